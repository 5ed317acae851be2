"""The target's p and the drafter's q of each drafted token, taken where a sampled
assisted run computes them.

Under sampling, Transformers accepts a drafted token x with probability min(1, p(x)/q(x))
(`_speculative_sampling`: Leviathan et al. 2023, "Fast Inference from Transformers via
Speculative Decoding", algorithm 1). p is the target's distribution at x's position and q
the assistant's, both after the run's logits processors (temperature, top-p). Transformers
reports neither, and computing them again could only approximate what it used, so both are
kept as it computes them:

- q: the candidate generator returns the draft with `candidate_logits`, the assistant's
  processed scores (its `generate()` samples with the target's warpers). The generator
  Transformers builds for the run gets a `get_candidates` that keeps them. A prompt-lookup
  draft has none: its q is a point mass on the drafted token, q = 1, and Transformers
  accepts the token where the target's own sample equals it, with probability p.
- p: the target's loop runs its logits processors on each row of the verification's
  logits; one more processor, appended to that same list, keeps each processed row as it
  passes and returns it unchanged. Transformers' prompt lookup runs the same list on fake
  logits while it searches for a match, inside `get_candidates`, so rows are kept only
  once `get_candidates` has returned.

Greedy runs install none of this: their accepted tokens are the target's top tokens, and
p and q say nothing more. Reading a step costs two softmaxes over its drafted rows, the
ones Transformers computes too (measured in docs/app.md, "Sampling").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from transformers.generation.logits_process import LogitsProcessor

if TYPE_CHECKING:
    from transformers import PreTrainedModel
    from transformers.generation.candidate_generator import CandidateGenerator


class DraftProbabilities:
    """Keeps the q and the processed target rows of the step under way, and reads each
    drafted token's p and q from them once the step has committed (`read`)."""

    def __init__(self) -> None:
        self.q_logits: torch.Tensor | None = None  # the step's candidate_logits
        self.rows: list[torch.Tensor] = []  # the step's processed target rows, in order
        self.keeping = False  # between the step's get_candidates and its commit

    @contextmanager
    def watching(self, target: PreTrainedModel) -> Iterator[None]:
        """Within the block, `target.generate()`'s assisted loop shows us its candidate
        logits and its processed rows. Wraps whatever builds the candidate generator now
        (Transformers' own, or a drafting seam's, `assisted.engine.drafters.seam.drafting_policy`),
        on this instance only, and puts it back afterwards."""
        previous = vars(target).get("_get_candidate_generator")
        build = target._get_candidate_generator

        def get_candidate_generator(*args, **kwargs) -> CandidateGenerator:
            generator = build(*args, **kwargs)
            # The very list the assisted loop runs on each verification row.
            kwargs["logits_processor"].append(_KeepRows(self))
            candidates = generator.get_candidates

            def get_candidates(input_ids: torch.LongTensor, **more):
                candidate_ids, candidate_logits = candidates(input_ids, **more)
                self.q_logits, self.rows, self.keeping = candidate_logits, [], True
                return candidate_ids, candidate_logits

            # On the instance: the generator keeps its type, which the loop checks.
            generator.get_candidates = get_candidates
            return generator

        target._get_candidate_generator = get_candidate_generator
        try:
            yield
        finally:
            if previous is None:
                del target._get_candidate_generator
            else:
                target._get_candidate_generator = previous

    def read(self, draft: tuple[int, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """p and q of each token of `draft`, the candidates the step verified; empty where
        the step drafted nothing or its rows were not seen whole. Clears the step."""
        rows, q_logits = self.rows, self.q_logits
        self.rows, self.q_logits, self.keeping = [], None, False
        count = len(draft)
        # The target verifies the candidates and adds a row of its own after them.
        if not count or len(rows) != count + 1:
            return (), ()
        p = _probabilities(torch.cat(rows[:count]), draft)
        if q_logits is None:  # prompt lookup: a point mass on each drafted token
            return p, (1.0,) * count
        if q_logits.shape[1] != count:
            return (), ()
        return p, _probabilities(q_logits[0], draft)


class _KeepRows(LogitsProcessor):
    """The last of the target's logits processors: keeps each processed row of a step's
    verification, unchanged."""

    def __init__(self, probabilities: DraftProbabilities):
        self.probabilities = probabilities

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if self.probabilities.keeping:
            self.probabilities.rows.append(scores)
        return scores


def _probabilities(scores: torch.Tensor, tokens: tuple[int, ...]) -> tuple[float, ...]:
    """The probability of `tokens[i]` under the softmax of row i of `scores`, as
    Transformers takes it (`_speculative_sampling`)."""
    ids = torch.tensor(tokens, device=scores.device)
    chosen = scores.float().softmax(dim=-1)[torch.arange(len(tokens), device=scores.device), ids]
    return tuple(chosen.tolist())
