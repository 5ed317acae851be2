"""The self-check of an assistant's drafts captured as CUDA graphs
(`assisted.engine.drafters.draft_graphs`): one that tells a wrong replay from a last bit,
and says when it could not judge.

Every replay, of each length on each cache, after a rollback and near the cache's end, is
compared with eager passes of the same code on the same static cache. Replayed twice: a
replay runs fixed kernels on fixed inputs, so two that differ in any bit are wrong. Against
the eager passes the candidates must be the same up to the eager draft's first near-tie
(where its top two probabilities are within the dtype's bound, `tolerance`, and rounding
may pick either), and every probability within that bound. Usually they are equal bit for
bit ("passed"): the graphs replay the kernels the eager passes launched. A library may
still pick another kernel under capture (cuBLAS's autotuning, an attention plan), which
rounds otherwise: within the bound that is "last-bit", reported with the largest gap and
where, and the graphs still draft. Beyond it, or a candidate changed before a near-tie,
the replay is wrong ("failed"). NaN equals NaN; NaN against a number is wrong.

That catches a wrong replay (a value baked in at capture, a buffer replaced), not a fault
the replays share with those passes. So the replays are also compared with the lean loop
on a DynamicCache (`lean.LeanDrafter`): its own cache, positions, mask and rollback. Its
attention runs other kernels, which round otherwise, so it judges candidates only, each
draft up to the loop's first near-tie, and counts the positions it judged: below
`MIN_JUDGED` (near-uniform logits, as random weights give) its verdict is inconclusive,
not a pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from assisted.core.record import FAILED, INCONCLUSIVE, LAST_BIT, PASSED, Verdict
from assisted.engine.drafters.lean import LeanDrafter
from assisted.engine.drafters.static_draft import DraftGraphs, StaticState, draft_on_device, start

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# The dtype's bound: the most two roundings of one probability may differ by, and a
# near-tie's top two. At least `PROBABILITY_TOLERANCE`; in a low precision `EPS_TOLERANCE`
# of its steps (in bf16 0.0625: a logit's last bit moves p ≈ 0.5 by about 0.03).
PROBABILITY_TOLERANCE = 1e-3
EPS_TOLERANCE = 8
# The fewest positions the comparison with the DynamicCache loop must judge for a pass: a
# draft of the usual cap. It drafts after up to `CHECK_CONTEXTS` ends of the probe (its
# last id, then one before, …) until it has judged as many.
MIN_JUDGED = 8
CHECK_CONTEXTS = 4


@dataclass(frozen=True)
class Gap:
    """The largest gap between a replay's probabilities and the eager passes' on its
    cache, and where it was ("" for none)."""

    size: float = 0.0
    at: str = ""


@dataclass(frozen=True)
class Replayed:
    """A draft of `gamma` replayed twice against the eager draft on its cache
    (`replays`): the candidate (from 0) where the two replays first differed, None where
    they agree in every bit; the positions whose candidates were judged against eager; the
    largest probability gap over them, and where; what was wrong against eager ("":
    nothing)."""

    gamma: int
    differs_at: int | None
    judged: int
    gap: Gap
    wrong: str = ""


def self_check(buckets: Sequence[DraftGraphs], probe: torch.Tensor) -> Verdict:
    """Check the replays on every cache of `buckets` on `probe` (1, n), whose first n − 2
    ids each cache holds (the module's note): against eager passes on its cache after the
    probe and a rollback (`_against_eager`), against the loop on a DynamicCache
    (`_against_loop`), then against eager passes near each cache's end (`_near_the_end`)."""
    margin = tolerance(buckets[0].state.model)
    early = _on_each_cache(_against_eager, buckets, probe, margin)
    if isinstance(early, Verdict):
        return early
    verdict = _against_loop(buckets, probe, margin)
    if verdict.check != PASSED:
        return verdict
    late = _on_each_cache(_near_the_end, buckets, probe, margin)
    if isinstance(late, Verdict):
        return late
    largest = max(early + late, key=lambda gap: gap.size)
    verdict = replace(verdict, gap=largest.size, gap_at=largest.at)
    if largest.size > 0:
        detail = f"replays within {margin:.2g} of eager passes (largest gap {largest.size:.2g})"
        return replace(verdict, check=LAST_BIT, detail=detail)
    return verdict


def _on_each_cache(
    check: Callable[[DraftGraphs, torch.Tensor, float], Gap | str],
    buckets: Sequence[DraftGraphs],
    probe: torch.Tensor,
    margin: float,
) -> list[Gap] | Verdict:
    """`check` on each cache: the gaps it found, or the failure where it found a replay
    wrong."""
    gaps = []
    for graphs in buckets:
        with torch.inference_mode():
            found = check(graphs, probe, margin)
        if isinstance(found, str):
            return Verdict(FAILED, 0, f"{found} (a cache of {graphs.state.capacity})")
        gaps.append(found)
    return gaps


def _against_eager(graphs: DraftGraphs, probe: torch.Tensor, margin: float) -> Gap | str:
    """The largest gap between replays and eager passes on `graphs`' cache, after `probe`
    (each length) and after a rollback to its first candidate; or where a replay was
    wrong (the module's note)."""
    state, cap = graphs.state, graphs.cap
    base, last = probe.shape[1] - 2, probe[0, -2:]
    found = _compare(graphs, base, last, range(1, cap + 1), margin, "a draft of {gamma}")
    if isinstance(found, str) or cap == 1:
        return found
    first = state.out[0, :1].to(last.dtype)  # the last replay's: its first candidate
    rollback = _compare(
        graphs, base + 1, torch.cat([last[1:], first]), [cap - 1], margin, "a rollback"
    )
    if isinstance(rollback, str):
        return rollback
    return max(found, rollback, key=lambda gap: gap.size)


def _near_the_end(graphs: DraftGraphs, probe: torch.Tensor, margin: float) -> Gap | str:
    """`_against_eager` for a draft of the cap whose last pass writes the cache's last
    position (`near_the_end`: a position, a mask or a length baked in at capture shows
    where a run's context is long); the cache then holds the probe's context again."""
    state, cap = graphs.state, graphs.cap
    filled = near_the_end(state.capacity, cap, probe)
    if filled is None:
        return Gap()  # the probe's own drafts were as near
    length = filled.shape[1] - 2
    state.rewind(0)
    state.feed(filled[:, :length])
    what = f"a draft of {{gamma}} near the cache's end (after {length} positions)"
    found = _compare(graphs, length, filled[0, length:], [cap], margin, what)
    state.rewind(0)
    state.feed(probe[:, :-2])
    return found


def near_the_end(capacity: int, cap: int, probe: torch.Tensor) -> torch.Tensor | None:
    """The ids (1, n) of a context whose draft of `cap` after its first n − 2 writes the
    last of `capacity` positions (its two last ids, then cap − 1 candidates): the probe's
    ids over and over. None where the probe is as long."""
    length = capacity - cap - 1
    if length <= probe.shape[1]:
        return None
    return probe.repeat(1, math.ceil((length + 2) / probe.shape[1]))[:, : length + 2]


def _compare(
    graphs: DraftGraphs,
    length: int,
    pair: torch.Tensor,
    gammas: Sequence[int],
    margin: float,
    what: str,
) -> Gap | str:
    """`replays` of each γ in `gammas` after `length` positions and `pair`: the largest
    gap, or where one was wrong. `what` names a draft, with `{gamma}` for its length."""
    largest = Gap()
    for found in replays(graphs, length, pair, gammas, margin):
        named = what.format(gamma=found.gamma)
        if found.differs_at is not None:
            return f"two replays of {named} differed at candidate {found.differs_at + 1}"
        if found.wrong:
            return f"{named} {found.wrong} against eager passes on the same cache"
        if found.gap.size > largest.size:
            where = f"{named} on a cache of {graphs.state.capacity}, {found.gap.at}"
            largest = replace(found.gap, at=where)
    return largest


def replays(
    graphs: DraftGraphs, length: int, pair: torch.Tensor, gammas: Sequence[int], margin: float
) -> list[Replayed]:
    """Each γ of `gammas` replayed twice after `length` positions and `pair`, against the
    eager draft of the longest (the module's note)."""
    eager, ties = eager_draft(graphs.state, length, pair, max(gammas), margin)
    found = []
    for gamma in gammas:
        twice = [_replayed(graphs, length, pair, gamma) for _ in range(2)]
        differs_at = None if same(*twice) else _first_difference(*twice)
        judged, gap, wrong = _gap(twice[0], eager[:, :gamma], ties, margin)
        found.append(Replayed(gamma, differs_at, judged, gap, wrong))
    return found


def _replayed(graphs: DraftGraphs, length: int, pair: torch.Tensor, gamma: int) -> torch.Tensor:
    start(graphs.state, length, pair)
    graphs.replay(gamma)
    return graphs.state.out[:, :gamma].clone()


def eager_draft(
    state: StaticState, length: int, pair: torch.Tensor, gamma: int, margin: float
) -> tuple[torch.Tensor, set[int]]:
    """The candidates and probabilities of `gamma` eager passes of `draft_on_device` after
    `length` positions and `pair`, and the positions that were near-ties (`margin`)."""
    start(state, length, pair)
    gaps = top_two_gaps(state.model, lambda: draft_on_device(state, gamma))
    return state.out[:, :gamma].clone(), {k for k, gap in enumerate(gaps) if gap <= margin}


def _gap(
    replayed: torch.Tensor, eager: torch.Tensor, ties: set[int], margin: float
) -> tuple[int, Gap, str]:
    """`replayed` against `eager` (rows: ids, then probabilities) while their candidates
    agree: the positions judged, the largest probability gap, and what was wrong ("":
    nothing): a candidate changed where the eager draft had no near-tie, a gap beyond
    `margin`, NaN against a number."""
    ids, probabilities = replayed.tolist()
    eager_ids, eager_probabilities = eager.tolist()
    largest = Gap()
    for position, (token, expected) in enumerate(zip(ids, eager_ids, strict=True)):
        if token != expected:
            if position in ties:
                return position, largest, ""  # rounding may pick either, and go elsewhere
            return (
                position,
                largest,
                (f"changed candidate {position + 1} ({int(expected)} to {int(token)})"),
            )
        got, want = probabilities[position], eager_probabilities[position]
        if math.isnan(got) and math.isnan(want):
            continue
        if math.isnan(got) or math.isnan(want):
            return position, largest, f"gave NaN against a number at candidate {position + 1}"
        size = abs(got - want)
        if size > margin:
            wrong = f"differed by {size:.3g} (bound {margin:.2g}) at candidate {position + 1}"
            return position, largest, wrong
        if size > largest.size:
            largest = Gap(size, f"candidate {position + 1}")
    return len(ids), largest, ""


def same(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Whether two drafts are equal in every bit, NaN equal to NaN."""
    return bool(((first == second) | (first.isnan() & second.isnan())).all())


def _first_difference(first: torch.Tensor, second: torch.Tensor) -> int:
    differs = (first != second) & ~(first.isnan() & second.isnan())
    return int(differs.any(0).nonzero()[0, 0])


def _against_loop(buckets: Sequence[DraftGraphs], probe: torch.Tensor, margin: float) -> Verdict:
    """Each cache's replays of the cap after up to `CHECK_CONTEXTS` ends of `probe` (its
    last id, then the one before, …) against the loop on a DynamicCache, each judged up to
    the loop's first near-tie (`_loop_draft`), until `MIN_JUDGED` positions were judged."""
    model, cap = buckets[0].state.model, buckets[0].cap
    judged = 0
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
    """The dtype's bound (`PROBABILITY_TOLERANCE`, `EPS_TOLERANCE`): on a probability, and
    between a near-tie's top two."""
    return max(PROBABILITY_TOLERANCE, EPS_TOLERANCE * torch.finfo(model.dtype).eps)


def top_two_gaps(model: PreTrainedModel, run: Callable[[], object]) -> list[float]:
    """The gap between the top two probabilities of each of `model`'s passes in `run`."""
    gaps: list[float] = []

    def gap(_module, _args, output) -> None:
        top = output.logits[0, -1].float().softmax(-1).topk(2).values
        gaps.append(float(top[0] - top[1]))

    hook = model.register_forward_hook(gap)
    try:
        run()
    finally:
        hook.remove()
    return gaps


def _loop_draft(
    model: PreTrainedModel, probe: torch.Tensor, cap: int, margin: float
) -> tuple[torch.Tensor, int]:
    """The lean loop's `cap` candidates after `probe` on a DynamicCache (float64 ids, as a
    replay leaves them, on the CPU); and how many come before its first near-tie, a
    candidate whose runner-up is within `margin`: another path may pick either there, and
    its draft goes elsewhere after."""
    drafter, drafted = LeanDrafter(model, 0.0, ()), []
    gaps = top_two_gaps(model, lambda: drafted.extend(drafter.draft(probe, cap)))
    judged = next((k for k, gap in enumerate(gaps) if gap <= margin), cap)
    return torch.tensor(drafted, dtype=torch.float64), judged
