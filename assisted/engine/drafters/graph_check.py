"""The self-check of an assistant's drafts captured as CUDA graphs
(`assisted.engine.drafters.draft_graphs`): one that can fail, and says when it could not
judge.

Every replay, of each length on each cache and after a rollback, must equal eager passes of
the same code on the same static cache bit for bit: the same kernels in the same order, so
no tolerance and no tie rule. That catches a wrong replay (a value baked in at capture, a
buffer replaced), not a fault the replays share with those passes. So the replays are also
compared with the lean loop on a DynamicCache (`lean.LeanDrafter`): its own cache,
positions, mask and rollback. Its attention runs other kernels, which round otherwise,
so it judges candidates only, each draft up to the loop's first near-tie (where rounding
may pick either of the top two), and counts the positions it judged: below `MIN_JUDGED`
(near-uniform logits, as random weights give) its verdict is inconclusive, not a pass. It
leaves probabilities to the bit-for-bit comparison: no fixed tolerance bounds their
rounding at every probability (in bf16, a logit's last bit moves p ≈ 0.5 by about 0.03),
so one could turn a faithful replay away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from assisted.core.record import FAILED, INCONCLUSIVE, PASSED
from assisted.engine.drafters.lean import LeanDrafter
from assisted.engine.drafters.static_draft import DraftGraphs, StaticState, draft_on_device, start

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# A near-tie: the loop's top two probabilities within this much, at least, where a replay,
# whose attention runs other kernels (a masked static cache against the exact length,
# reduced in another order), may pick either. In a low precision, `EPS_TOLERANCE` of its
# steps (a heuristic, not measured on a GPU).
PROBABILITY_TOLERANCE = 1e-3
EPS_TOLERANCE = 8
# The fewest positions the comparison with the DynamicCache loop must judge for a pass: a
# draft of the usual cap. It drafts after up to `CHECK_CONTEXTS` ends of the probe (its
# last id, then one before, …) until it has judged as many.
MIN_JUDGED = 8
CHECK_CONTEXTS = 4


@dataclass(frozen=True)
class Verdict:
    """The self-check's outcome (`self_check`): "passed", "failed" or "inconclusive"; the
    positions its comparison with the DynamicCache loop judged; what differed, or why it
    could not judge ("" for a pass)."""

    check: str
    judged: int
    detail: str = ""


def self_check(buckets: Sequence[DraftGraphs], probe: torch.Tensor) -> Verdict:
    """Check the replays on every cache of `buckets` on `probe` (1, n), whose first n − 2
    ids each cache holds (the module's note): each replay against eager passes on its
    cache, bit for bit (`_against_eager`), then against the loop on a DynamicCache
    (`_against_loop`)."""
    with torch.inference_mode():
        for graphs in buckets:
            differs = _against_eager(graphs, probe)
            if differs is not None:
                return Verdict(FAILED, 0, f"{differs} (a cache of {graphs.state.capacity})")
    return _against_loop(buckets, probe)


def _against_eager(graphs: DraftGraphs, probe: torch.Tensor) -> str | None:
    """Where a replay after `probe`, of each length and of all but one after a rollback to
    its first candidate, differs in any bit from the same passes run eagerly on the same
    cache; None where none does. A replay of γ runs the first γ passes of the longest
    draft, the same kernels on the same inputs: it is checked against that draft's first γ
    candidates and probabilities."""
    state = graphs.state
    base, last = probe.shape[1] - 2, probe[0, -2:]
    eager = _eager_draft(state, base, last, graphs.cap)
    for gamma in range(1, graphs.cap + 1):
        differs = _replay_against(graphs, base, last, eager[:, :gamma], f"a draft of {gamma}")
        if differs:
            return differs
    if graphs.cap > 1:
        after = torch.cat([last[1:], eager[0, :1].to(last.dtype)])  # its first candidate
        again = _eager_draft(state, base + 1, after, graphs.cap - 1)
        differs = _replay_against(graphs, base + 1, after, again, "a rollback")
        if differs:
            return differs
    state.rewind(0)
    return None


def _eager_draft(state: StaticState, length: int, pair: torch.Tensor, gamma: int) -> torch.Tensor:
    """The candidates and probabilities of `gamma` eager passes of `draft_on_device` after
    `length` positions and `pair`."""
    start(state, length, pair)
    draft_on_device(state, gamma)
    return state.out[:, :gamma].clone()


def _replay_against(
    graphs: DraftGraphs, length: int, pair: torch.Tensor, eager: torch.Tensor, what: str
) -> str | None:
    """Where the replay of as many passes as `eager` has after `length` positions and
    `pair` leaves in `state.out` anything but exactly `eager`."""
    state, gamma = graphs.state, eager.shape[1]
    start(state, length, pair)
    graphs.replay(gamma)
    replayed = state.out[:, :gamma]
    if torch.equal(replayed, eager):
        return None
    at = int((replayed != eager).any(0).nonzero()[0, 0])
    return f"{what} differed from eager passes on the same cache at candidate {at + 1}"


def _against_loop(buckets: Sequence[DraftGraphs], probe: torch.Tensor) -> Verdict:
    """Each cache's replays of the cap after up to `CHECK_CONTEXTS` ends of `probe` (its
    last id, then the one before, …) against the loop on a DynamicCache, each judged up to
    the loop's first near-tie (`_loop_draft`), until `MIN_JUDGED` positions were judged."""
    model, cap = buckets[0].state.model, buckets[0].cap
    margin, judged = tolerance(model), 0
    for context in range(probe.shape[1], max(probe.shape[1] - CHECK_CONTEXTS, 2), -1):
        expected, kept = _loop_draft(model, probe[:, :context], cap, margin)
        for graphs in buckets:
            with torch.inference_mode():
                # Its first n − 2 ids are the probe's: the replays since wrote past them.
                start(graphs.state, context - 2, probe[0, context - 2 : context])
                graphs.replay(cap)
                got = graphs.state.out[0, :kept].cpu()
            if not torch.equal(got, expected[:kept]):
                at = int((got != expected[:kept]).nonzero()[0, 0])
                capacity = graphs.state.capacity
                differs = (
                    f"a draft after {context} ids on a cache of {capacity} differed from the "
                    f"DynamicCache loop at candidate {at + 1}"
                )
                return Verdict(FAILED, judged, differs)
        judged += kept
        if judged >= MIN_JUDGED:
            break
    for graphs in buckets:
        graphs.state.rewind(0)
    if judged < MIN_JUDGED:
        detail = (
            f"the DynamicCache loop's near-ties left {judged} positions to judge, "
            f"fewer than {MIN_JUDGED}"
        )
        return Verdict(INCONCLUSIVE, judged, detail)
    return Verdict(PASSED, judged)


def tolerance(model: PreTrainedModel) -> float:
    """The gap between the loop's top two probabilities at or below which a position is a
    near-tie (`PROBABILITY_TOLERANCE`)."""
    return max(PROBABILITY_TOLERANCE, EPS_TOLERANCE * torch.finfo(model.dtype).eps)


def _loop_draft(
    model: PreTrainedModel, probe: torch.Tensor, cap: int, margin: float
) -> tuple[torch.Tensor, int]:
    """The lean loop's `cap` candidates after `probe` on a DynamicCache (float64 ids, as a
    replay leaves them, on the CPU); and how many come before its first near-tie, a
    candidate whose runner-up is within `margin`: another path may pick either there, and
    its draft goes elsewhere after. A host read (`nonzero`) is fine here: nothing is being
    captured."""
    passes: list[torch.Tensor] = []
    hook = model.register_forward_hook(
        lambda _module, _args, output: passes.append(output.logits[0, -1].float().softmax(-1))
    )
    try:
        drafted = LeanDrafter(model, 0.0, ()).draft(probe, cap)
    finally:
        hook.remove()
    top = torch.stack([probabilities.topk(2).values for probabilities in passes])
    ties = (top[:, 0] - top[:, 1] <= margin).nonzero()
    judged = int(ties[0, 0]) if len(ties) else cap
    return torch.tensor(drafted, dtype=torch.float64), judged
