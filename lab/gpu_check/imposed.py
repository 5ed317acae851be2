"""Measured at an imposed acceptance: the product's assisted path end to end, where random
weights would otherwise agree on nothing.

The target is peaked (`models.peaked`), so that its greedy output stands out at every
verification width; it runs plain first, and its output is then known. The assistant is
peaked too, so that its graphs' self-check has positions to judge. Each assisted run
goes through `decoding.run` under `auto`, the assistant drafting its cap at every step
(`end_to_end.drafting_every_step`), and the seam builds its lean drafter as for any greedy
run (`draft_graphs.drafter_for_run`: replayed graphs on CUDA, the eager loop on a static
cache on a CPU). That drafter drafts for real, paying the assistant's cost on that path;
then `Imposed` proposes the known output in place of its draft, as many tokens: at each
position the next known token with probability α, else a wrong one (a seeded draw, the
same draws for every kind, so that the kinds differ by their α alone). The drafter's
cache is told it holds the proposal, so the next draft rolls back to the accepted prefix
and reads the target's own token, as after a draft of its own. The target's verification,
generate()'s overhead, full accepts and rollbacks all run.

So it measures cost at a stated acceptance, not correctness: a wrong replay's draft is
replaced before the target sees it. Correctness is the graphs' self-check's and the
end-to-end run's (`end_to_end`); here `held` asks only that every kind's run was lossless,
accepted as imposed, and on CUDA drafted through the graphs, whose cost it measures, with
replays counted.

α per prompt kind is the per-token acceptance the embedded pair measured on a CPU
(`speedup.ACCEPTANCE`, with the command that measured it); the measured α is counted from
the run's record as the benchmark counts it (`speedup.per_token_alpha`), beside it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

from assisted.analysis import stats
from assisted.core.record import CUDA_GRAPHS, DraftingPath, RunRecord, common_prefix_length
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import drain
from assisted.engine.drafters import draft_graphs
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import LoadedPair
from assisted.models.registry import PAIRS
from lab.gpu_check import end_to_end
from lab.gpu_check.models import free, peaked
from lab.gpu_check.speedup import ACCEPTANCE, per_token_alpha

SEED = end_to_end.SEED  # the draws of every run, and the peaked models' cycles
MARKERS = end_to_end.MARKERS
TOLERANCE_SE = 3  # measured α within this many standard errors of the imposed one


class Imposed:
    """The lean drafter `real` drafting for real, its draft replaced by the known
    continuation of `expected` (prompt and output ids) at acceptance `alpha`; the eager
    passes its drafts ran counted (a replayed graph runs no Python, so no hook sees it)."""

    def __init__(self, real, expected: list[int], alpha: float, vocab_size: int, seed: int):
        self.real = real
        self.expected = expected
        self.alpha = alpha
        self.vocab_size = vocab_size
        self.draws = random.Random(seed)
        self.intended: list[int] = []  # per draft, the known tokens it proposed first
        self.eager_passes = 0
        self.drafting = False  # the assistant also runs outside drafts (the hindsight)

    @property
    def path(self) -> DraftingPath:
        return self.real.path

    def count(self, *_) -> None:
        self.eager_passes += self.drafting

    def draft(
        self,
        input_ids: torch.LongTensor,
        gamma: int,
        ids: list[int] | None = None,
        floors: Sequence[float] = (),
    ) -> list[int]:
        if ids is None:
            ids = input_ids[0].tolist()
        self.drafting = True
        try:
            # Whole drafts: the policy's floors weigh the random model's confidence, which
            # says nothing of the acceptance imposed here.
            drafted = self.real.draft(input_ids, gamma, ids)
        finally:
            self.drafting = False
        proposal = [self._propose(len(ids) + i, token) for i, token in enumerate(drafted)]
        # Same positions, same passes: only the ids the keys and values stand for change.
        self.real.held = ids + proposal[:-1]
        self.intended.append(common_prefix_length(proposal, self.expected[len(ids) :]))
        return proposal

    def _propose(self, position: int, drafted: int) -> int:
        """The known token at `position` with probability α, else another; past the known
        output (a run off its track only), the assistant's own."""
        if position >= len(self.expected):
            return drafted
        known = self.expected[position]
        return known if self.draws.random() < self.alpha else (known + 1) % self.vocab_size


@contextmanager
def imposing(expected: list[int], alpha: float, vocab_size: int) -> Iterator[list[Imposed]]:
    """Within the block, each lean drafter the seam builds proposes as `Imposed`; the list
    yielded gathers them."""
    built = draft_graphs.drafter_for_run
    made: list[Imposed] = []
    hooks = []

    def imposed(model, *args, **kwargs) -> Imposed:
        made.append(Imposed(built(model, *args, **kwargs), expected, alpha, vocab_size, SEED))
        hooks.append(model.register_forward_pre_hook(made[-1].count))
        return made[-1]

    draft_graphs.drafter_for_run = imposed
    try:
        yield made
    finally:
        draft_graphs.drafter_for_run = built
        for hook in hooks:
            hook.remove()


def run(
    device: torch.device, dtype: torch.dtype, tiny: bool, tokens: int, kinds: Sequence[str]
) -> dict:
    """Plain, then assisted at the α of each of `kinds` (prompt kinds of `ACCEPTANCE`),
    `tokens` new tokens on `end_to_end.PAIR`'s shapes (toy widths under `tiny`): the
    module's note."""
    spec = PAIRS[end_to_end.PAIR]
    built = end_to_end.built_pair(spec, device, dtype, tiny)
    try:
        for model in built:
            peaked(model, MARKERS, SEED)
        pair, draft = end_to_end.random_pair(spec, *built, device, dtype)
        return _runs(pair, draft, tokens, kinds)
    finally:
        del built
        free(device)


def _runs(pair: LoadedPair, draft: DraftSettings, tokens: int, kinds: Sequence[str]) -> dict:
    alphas = ACCEPTANCE[DrafterKind.ASSISTANT.value]
    settings = RunSettings(max_new_tokens=tokens)
    ids = encode_prompt(pair, end_to_end.PROMPT)
    vocab_size = pair.target.config.get_text_config().vocab_size
    figures = {}
    with end_to_end.drafting_every_step():
        decoding.warm_up(pair, ("plain", "assisted"), draft)
        plain = drain(decoding.run(pair, ids, "plain", settings))
        expected = ids + plain.token_ids
        for kind in kinds:
            alpha = alphas[kind][0]
            with imposing(expected, alpha, vocab_size) as made:
                assisted = drain(decoding.run(pair, ids, "assisted", settings, draft))
            figures[kind] = _kind(alpha, plain, assisted, made[-1])
    path = assisted.drafting_path
    expected = end_to_end.expected_path(pair.device)
    return {
        "held": held(figures, expected),
        "measures": "cost at an imposed acceptance: the drafts are replaced",
        "pair": pair.spec.name,
        "new_tokens": len(plain.token_ids),
        "plain_tokens_per_s": round(stats.tokens_per_s(plain), 2),
        "drafting_path": path.path if path else None,
        "drafting_path_reason": path.reason if path else None,
        "expected_path": expected,
        "self_check": path.check if path else None,
        "self_check_judged": path.judged if path else None,
        "self_check_gap": path.gap if path else None,
        "self_check_gap_at": path.gap_at if path else None,
        "kinds": figures,
    }


def held(figures: dict, expected: str) -> bool:
    """Whether the runs at an imposed acceptance held: each kind's lossless, accepted as
    imposed, its measured α within its tolerance, and drafted on the `expected` path (the
    graphs on CUDA, whose cost is measured, with replays above 0: a run whose replay fell
    back mid-run names the loop's path). A cost, not a correctness check (the module's
    note)."""
    return bool(figures) and all(
        kind["drafting_path"] == expected
        and (expected != CUDA_GRAPHS or kind["graphed_drafts"] > 0)
        and kind["identical"]
        and kind["as_imposed"]
        and abs(kind["measured_alpha"] - kind["imposed_alpha"]) <= kind["tolerance"]
        for kind in figures.values()
    )


def _kind(alpha: float, plain: RunRecord, assisted: RunRecord, drafter: Imposed) -> dict:
    """One assisted run's figures against the plain one, at imposed `alpha`; the speedup is
    the ratio of their tokens/s."""
    drafting = [step for step in assisted.steps if step.drafted]
    measured, positions = per_token_alpha((step.drafted, step.accepted) for step in drafting)
    counts = getattr(drafter.real, "counts", None)  # a StaticDrafter's drafts by path
    path = assisted.drafting_path
    return {
        "drafting_path": path.path if path else None,
        "imposed_alpha": alpha,
        "measured_alpha": round(measured, 3),
        "positions": positions,
        # Each position a draw of probability α: the estimate's standard error, times three.
        "tolerance": round(TOLERANCE_SE * math.sqrt(alpha * (1 - alpha) / max(positions, 1)), 3),
        "identical": assisted.token_ids == plain.token_ids,
        # The target accepted, at every step, the known tokens that were proposed first.
        "as_imposed": [step.accepted for step in drafting] == drafter.intended,
        "assisted_tokens_per_s": round(stats.tokens_per_s(assisted), 2),
        "speedup": round(stats.tokens_per_s(assisted) / stats.tokens_per_s(plain), 3),
        "accepted_per_step": round(stats.accepted(assisted) / len(assisted.steps), 2),
        "tokens_per_step": round(stats.tokens_per_step(assisted), 2),
        "eager_assistant_passes": drafter.eager_passes,
        "graphed_drafts": counts.graphed if counts else 0,
        "eager_drafts": counts.eager if counts else len(drafting),
    }
