"""What a greedy assisted run's drafters would have proposed at every output position,
found once the run's clock has stopped: the facts `assisted.analysis.oracle` prices.

- **The assistant.** Under greedy decoding a draft from output position i agrees with the
  output for as long as the assistant's next token, given the true prefix, is the output's.
  One sweep over the output gives that next token at every position, so every run length.
  The int8 assistant quantizes its activations per pass (fbgemm's per-tensor dynamic
  scales), so the keys and values it holds depend on how its passes grouped the rows, and
  a run's drafting groups them as its steps fell (a start or a catch-up reads a block, a
  draft one row at a time). The sweep prefills the prompt in one pass, then reads the
  output one row at a time: of the groupings tried, the one that reproduces the run's own
  acceptance at the most drafting steps (docs/lab-notes.md, "Agreement"). The oracle's
  `agreement` reports how many for every run.
- **The lookup.** Its proposal at each position is a pure function of the ids, found again
  with the run's own lookup.
- **The costs.** The run's cost model as it ended (the `auto` schedule's), or the pair's
  calibration for the other schedules; none where the pair was never calibrated. Those
  schedules can draft past the cap (Transformers' heuristic grows a fully accepted draft
  by two, without a bound), so the verification of the longest draft a run made is timed
  too where the calibration stops short of it, once per process, up to `TIMED_ROWS` rows;
  past that the oracle extrapolates, and says so (`assisted.analysis.oracle.Costs`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from assisted.analysis import oracle
from assisted.core.record import Hindsight, RunRecord
from assisted.core.settings import MAX_DRAFT_TOKENS, DrafterKind
from assisted.engine import engine
from assisted.engine.drafters.seam import Match
from assisted.engine.observe import synchronize
from assisted.models.loading import end_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from assisted.engine.drafters.seam import SuffixLookup
    from assisted.engine.engine import Prepared
    from assisted.models.pairs import LoadedPair
    from assisted.policy.choice import DraftPolicy

Propose = Callable[[list[int], int], Match]
# The most rows a verification is timed at after a run: every constant draft's (a cap of
# `MAX_DRAFT_TOKENS`), and Transformers' heuristic schedule's to 33 (from γ = 5, 14 fully
# accepted steps in a row); a longer one is extrapolated (each timed row costs three target
# passes on the run's hindsight).
TIMED_ROWS = MAX_DRAFT_TOKENS + 1


def find(
    pair: LoadedPair,
    prepared: Prepared,
    prompt_ids: Sequence[int],
    record: RunRecord,
    policy: DraftPolicy | None,
    lookup: SuffixLookup | None,
) -> Hindsight | None:
    """The hindsight of a finished assisted run drafted as `prepared` says, under `policy`
    (None: not `auto`) and with `lookup` (None: Transformers' own search); None where
    `oracle.why_not` finds no oracle possible or no costs are known."""
    if oracle.why_not(record, needs_hindsight=False) is not None or not record.steps:
        return None
    costs = _costs(pair, prepared, policy, max(step.drafted for step in record.steps) + 1)
    if costs is None:
        return None
    started = time.perf_counter()
    output = record.token_ids
    cap = prepared.draft.length_for(pair.spec.drafter)
    runs = confidence = None
    if prepared.assistant is not None:
        runs, confidence = assistant_runs(prepared.assistant, prompt_ids, output, pair.device)
    propose = _proposer(pair, prepared, lookup)
    ids = list(prompt_ids) + output
    matches = [propose(ids[: len(prompt_ids) + i], cap) for i in range(len(output))]
    return Hindsight(
        assistant_runs=runs,
        assistant_confidence=confidence,
        lookup_drafts=tuple(match.tokens for match in matches),
        lookup_lengths=tuple(match.length for match in matches),
        cap=cap,
        seconds=time.perf_counter() - started,
        **costs,
    )


def assistant_runs(
    model: PreTrainedModel, prompt_ids: Sequence[int], output: Sequence[int], device: torch.device
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """For each output position i, how many output tokens in a row from i the model's
    greedy continuation of the true prefix agrees with, and the probability it gives its
    own next token there (what the confidence threshold reads)."""
    predicted, confidence = _next_tokens(model, prompt_ids, output, device)
    runs = [0] * (len(output) + 1)
    for i in range(len(output) - 1, -1, -1):
        runs[i] = runs[i + 1] + 1 if predicted[i] == output[i] else 0
    return tuple(runs[:-1]), tuple(confidence)


def _next_tokens(
    model: PreTrainedModel, prompt_ids: Sequence[int], output: Sequence[int], device: torch.device
) -> list[int]:
    """The model's argmax after the prompt and each proper prefix of the output, and its
    probability: the prompt read in one pass, then the output one row at a time (the
    module's note)."""
    ids = torch.tensor([list(prompt_ids) + list(output[:-1])], device=model.device)
    cache = DynamicCache(config=model.config)
    blocks = [(0, len(prompt_ids)), *((p, p + 1) for p in range(len(prompt_ids), ids.shape[1]))]
    predicted, confidence = [], []
    with torch.inference_mode():
        for start, end in blocks:
            logits = model(
                input_ids=ids[:, start:end], past_key_values=cache, use_cache=True, logits_to_keep=1
            ).logits[0, -1]
            best = logits.float().softmax(-1).max(-1)
            predicted.append(int(best.indices))
            confidence.append(round(float(best.values), 4))
    synchronize(device)
    return predicted, confidence


def _proposer(pair: LoadedPair, prepared: Prepared, lookup: SuffixLookup | None) -> Propose:
    """The run's prompt-lookup source as a function of the ids: the suffix lookup, or
    Transformers' own n-gram search under the draft settings."""
    if lookup is not None:
        return lookup.find
    eos_ids = list(end_ids(pair.target.generation_config))
    search = PromptLookupCandidateGenerator(
        eos_token_id=torch.tensor(eos_ids) if eos_ids else None,
        num_output_tokens=1,
        max_matching_ngram_size=prepared.draft.max_matching_ngram_size,
        max_length=2**31 - 1,
    )

    def propose(ids: list[int], most: int) -> Match:
        search.num_output_tokens = most
        candidates, _ = search.get_candidates(torch.tensor([ids]))
        return Match(tuple(candidates[0, len(ids) :].tolist()), 0)  # its length unknown

    return propose


def _costs(
    pair: LoadedPair, prepared: Prepared, policy: DraftPolicy | None, rows: int
) -> dict | None:
    """The cost model's figures as `Hindsight` keeps them: the `auto` run's own, else the
    pair's calibration (None where it has none for this precision and cap), to the `rows`
    the run's longest verification held, timed where the cap stops short of them, up to
    `TIMED_ROWS`."""
    model = prepared.assistant is not None
    if policy is not None:
        costs = policy.costs
        drafting = costs.drafter_s.get(DrafterKind.ASSISTANT, 0.0) if model else 0.0
        return {
            "verify_s": tuple(costs.verify_curve()),
            "drafting_s": drafting,
            "call_s": costs.call_s if model else 0.0,
            "catch_up_s": costs.catch_up_s if model else 0.0,
            "prefill_s": costs.prefill_s if model else 0.0,
        }
    cap = prepared.draft.length_for(pair.spec.drafter)
    rows = min(max(rows, cap + 1), TIMED_ROWS)
    if rows not in pair.learnt.verify_s and 1 in pair.learnt.verify_s:
        engine.Engine.of(pair).calibrate_rows(rows)
    try:
        verify_s, drafting, prefill = engine.calibrated(pair, prepared.precision, rows - 1, model)
    except RuntimeError:
        return None
    return {
        "verify_s": tuple(sorted(verify_s.items())),
        "drafting_s": drafting,
        "prefill_s": prefill,
    }
