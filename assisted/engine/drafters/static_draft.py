"""The lean drafting loop: on a DynamicCache (`LeanDrafter`), and on a static cache, rolled
back by a length and replayable as a graph (`StaticDrafter`); and the self-check of its
replays.

The loop on a DynamicCache (its own note follows) keeps the assistant's keys and values
there and reads each candidate back as it drafts it: two host synchronisations a drafted token. On a
GPU at batch 1 the assistant's eager passes are launch-bound, so that loop costs nearly a
target step a token (docs/space.md). Here the keys and values sit in a Transformers
`StaticCache` sized once: its length is a tensor on the device (`StaticLayer.
cumulative_length`), so taking a draft back is a fill of that tensor, and the positions past
it are masked by position and overwritten by the next draft. A γ-token draft is then a
fixed sequence of kernels with the argmax feeding the next pass on the device
(`draft_on_device`), which `assisted.engine.drafters.draft_graphs` captures as CUDA graphs and
replays, reading the γ candidates and their probabilities back once. Its first pass reads
two ids: a step that accepted a whole draft leaves two for the assistant to read (its last
candidate, never read, and the target's token), and one that rejected a candidate leaves
one, read with the id before it again; so a draft after the assistant's replays alone.

The candidates are the loop's exactly: the argmax at each position, cut after an
end-of-sequence token, a token below the confidence threshold, or once the product of the
probabilities falls below the cumulative threshold (`cut`). Without graphs (a CPU, graphs
turned off, a failed capture or self-check) the same cache drafts eagerly, one pass a token,
stopping as the loop stops. An assistant with sliding-window layers keeps the dynamic loop:
a static sliding layer is a rolling buffer, which a length cannot take back.

**The self-check** (`self_check`) of the drafts captured as CUDA graphs tells a wrong replay
from a last bit, and says when it could not judge.

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

The assistant's draft as a bare loop of forward passes on a cache of its own.

Transformers drafts with the assistant's whole `generate()`: per call it copies the
generation config, builds logits processors and stopping criteria, prepares the cache and
masks, and returns scores the target only reads when it samples. On a CPU that work is a
sizable share of a small assistant's drafting call, against a bare loop of forward passes,
which raises the effective cost ratio c (`python -m lab.lean_timing` times both
ways and prints c; docs/lab-notes.md). Under greedy
decoding the target needs the candidates' ids only, so the `auto` schedule drafts with
this loop instead; the target still verifies every candidate in Transformers' own loop,
so the output cannot change.

It drafts the argmax at each position, stopping after an end-of-sequence token, and where
the product of its probabilities over the draft so far (its reach, its own estimate that
the whole draft is kept) falls below the floor the `auto` policy priced for that position
(`assisted.policy.choice`: the next candidate no longer pays), or below a cumulative
threshold a caller set (`DraftSettings.cumulative_threshold`). A per-token confidence
threshold (Transformers' `ConfidenceCriteria`) is kept as a rule too, for callers that set
one; the `auto` seam does not. Its cache holds committed ids only: before
each draft it keeps the prefix that the committed ids confirm and reads the rest, so a
draft never rests on candidates the target rejected.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache, StaticCache

from assisted.core.record import (
    CUDA_GRAPHS,
    EAGER,
    FAILED,
    INCONCLUSIVE,
    LAST_BIT,
    PASSED,
    DraftingPath,
    Verdict,
    common_prefix_length,
)

if TYPE_CHECKING:
    from transformers import Cache, PreTrainedModel


class DraftEnd:
    """Where a greedy draft ends (the module's note): after an end-of-sequence token, a token
    whose probability falls below `threshold`, or the token at which the product of the
    draft's probabilities (its reach) falls below `cumulative`, or below `floors[k - 1]` at
    its k-th token (the `auto` policy's price of drafting on: `assisted.policy.choice`).
    One per draft: it keeps that product."""

    def __init__(
        self,
        eos_ids: frozenset[int],
        threshold: float,
        cumulative: float,
        floors: Sequence[float] = (),
    ):
        self.eos_ids = eos_ids
        self.threshold = threshold
        self.cumulative = cumulative
        self.floors = floors
        self.reach = 1.0  # the product of the draft's probabilities so far
        self.tokens = 0  # the draft's tokens so far

    @property
    def weighs_confidence(self) -> bool:
        """Whether `after` needs each token's probability (a read of the device)."""
        return bool(self.threshold or self.cumulative or any(self.floors))

    def after(self, token: int, confidence: float | None = None) -> bool:
        """Whether the draft ends with `token`, whose probability was `confidence` (read
        only where `weighs_confidence`)."""
        self.tokens += 1
        if token in self.eos_ids:
            return True
        if confidence is None or not self.weighs_confidence:
            return False
        self.reach *= confidence
        floor = self.floors[self.tokens - 1] if self.tokens <= len(self.floors) else 0.0
        return confidence < self.threshold or self.reach < max(self.cumulative, floor)


def confidence_of(logits: torch.Tensor, token: int) -> float:
    """The probability `logits` (one position's) give `token`."""
    return logits.float().softmax(-1)[token].item()


class LeanDrafter:
    """Greedy drafts from `model`, a loop of forward passes (the module's note)."""

    def __init__(
        self,
        model: PreTrainedModel,
        threshold: float,
        eos_ids: Collection[int],
        cumulative: float = 0.0,
        path: DraftingPath | None = None,
    ):
        self.model = model
        self.threshold = threshold
        self.cumulative = cumulative
        self.eos_ids = frozenset(eos_ids)
        self.cache = DynamicCache(config=model.config)
        # As Transformers does for every assistant's cache: a sliding-window layer keeps the
        # states past its window until the next crop, so a draft can be taken back.
        self.cache.activate_past_recording()
        self.held: list[int] = []  # the ids whose keys and values the cache holds
        # `StaticDrafter` drafts on a static cache, except for an
        # assistant with sliding-window layers, or whose graphs failed their capture or
        # self-check (`assisted.engine.drafters.draft_graphs`, which then gives `path`).
        self.path = path or DraftingPath(EAGER, "sliding-window layers: a dynamic cache")

    def draft(
        self,
        input_ids: torch.LongTensor,
        gamma: int,
        ids: list[int] | None = None,
        floors: Sequence[float] = (),
    ) -> list[int]:
        """Up to `gamma` candidates to follow `input_ids` (one sequence), whose ids the
        caller may have read already (`ids`), ending where `floors` say (`DraftEnd`)."""
        if ids is None:
            ids = input_ids[0].tolist()
        # At least the last id is read again: its logits give the first candidate.
        keep = crop_to_committed(self.cache, self.held, ids, len(ids) - 1)
        feed = input_ids[:, keep:].to(self.model.device)
        drafted: list[int] = []
        end = DraftEnd(self.eos_ids, self.threshold, self.cumulative, floors)
        with torch.inference_mode():
            for _ in range(gamma):
                logits = self.model(
                    input_ids=feed, past_key_values=self.cache, use_cache=True, logits_to_keep=1
                ).logits[0, -1]
                token = int(logits.argmax())
                drafted.append(token)
                weighed = confidence_of(logits, token) if end.weighs_confidence else None
                if end.after(token, weighed):
                    break
                feed = torch.tensor([[token]], device=feed.device)
        # The last candidate was never read: the cache holds the ids and the rest.
        self.held = ids + drafted[:-1]
        return drafted


def crop_to_committed(cache: Cache, held: list[int], ids: list[int], most: int) -> int:
    """Crop `cache`, which holds the keys and values of `held`, to the prefix of `held` that
    the committed `ids` confirm, and to at most `most` tokens; the tokens it then holds."""
    keep = min(common_prefix_length(held, ids), most)
    length = cache.get_seq_length()
    if length and length >= keep:
        # 5.23: a negative count removes that many tokens. Cropped even when none is stale:
        # a sliding-window layer recording its past then drops the states outside its
        # window (Transformers crops its assistant's cache before every draft too).
        cache.crop(keep - length)
    return min(keep, cache.get_seq_length())


def cut(
    tokens: Sequence[int],
    confidences: Sequence[float],
    eos_ids: Collection[int],
    threshold: float,
    cumulative: float,
    floors: Sequence[float] = (),
) -> list[int]:
    """The draft the lean loop keeps of `tokens`, the assistant's argmax at each position
    with the probability it gave each: up to where `DraftEnd` ends it."""
    end = DraftEnd(frozenset(eos_ids), threshold, cumulative, floors)
    drafted: list[int] = []
    for token, confidence in zip(tokens, confidences, strict=True):
        drafted.append(token)
        if end.after(token, confidence):
            break
    return drafted


def has_sliding_layers(model: PreTrainedModel) -> bool:
    """Whether any of the assistant's layers attends to a sliding window, as Transformers
    reads its config (Mistral's window has no `layer_types`): a cache built for it, whose
    tensors are allocated only at its first update, says."""
    return any(StaticCache(config=model.config, max_cache_len=1).is_sliding)


class StaticState:
    """An assistant's static cache of `capacity` positions, the device buffers a draft
    reads and writes, and the one-token pass both the eager and the graphed drafts run."""

    def __init__(self, model: PreTrainedModel, capacity: int, cap: int):
        self.model = model
        self.capacity = capacity
        self.cap = cap  # the longest draft the device buffers hold
        device = model.device  # its embeddings may be wrapped (`assisted.models.vocab`)
        self.cache = StaticCache(config=model.config, max_cache_len=capacity)
        self.pair = torch.zeros((1, 2), dtype=torch.long, device=device)  # a draft's first input
        self.token = torch.zeros((1, 1), dtype=torch.long, device=device)  # each later one
        # Row 0: the candidates' ids, row 1: their probabilities, one read for both (ids
        # below 2**53 and float32 probabilities are exact in float64).
        self.out = torch.zeros((2, cap), dtype=torch.float64, device=device)

    def rewind(self, length: int) -> None:
        """Keep the first `length` positions: a fill on the device, no host round trip. In
        inference mode, where the cache's tensors were made (moved to a GPU at its first
        pass, they are inference tensors, which only inference mode may change)."""
        with torch.inference_mode():
            for layer in self.cache.layers:
                layer.cumulative_length.fill_(length)

    def feed(self, ids: torch.Tensor) -> torch.Tensor:
        """Read `ids` (1, n) into the cache; the logits after the last one."""
        return self.model(
            input_ids=ids, past_key_values=self.cache, use_cache=True, logits_to_keep=1
        ).logits[0, -1]

    def step(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Read `ids` (`pair` or `token`) into the cache: the argmax after the last and its
        probability, on the device. The graphs capture exactly these passes."""
        logits = self.feed(ids)
        best = logits.argmax()
        # A gather, not `[best]`: indexing with a tensor reads it back to the host.
        return best, logits.float().softmax(-1).gather(0, best.view(1))[0]


def draft_on_device(state: StaticState, gamma: int) -> None:
    """`gamma` greedy passes, the first reading `state.pair`, each later one the argmax
    before it, the candidates and their probabilities left in `state.out`: no host
    synchronisation, so a CUDA graph can hold it whole."""
    ids = state.pair
    for position in range(gamma):
        best, probability = state.step(ids)
        state.out[0, position].copy_(best)
        state.out[1, position].copy_(probability)
        state.token.copy_(best.view(1, 1))
        ids = state.token


def start(state: StaticState, length: int, pair: torch.Tensor) -> None:
    """Roll `state` back to `length` positions, `pair` (two ids on its device) the next
    draft's first input."""
    state.rewind(length)
    state.pair.copy_(pair.view(1, 2))


class Replay(torch.nn.Module):
    """A replay called as a module, so that forward hooks time it as they time the
    assistant's eager passes (`assisted.engine.observe`): one call, `gamma` tokens. One
    module for all of an assistant's caches (`DraftGraphs.module`), so one hook sees them."""

    def forward(self, gamma: int, replays: dict[int, Callable[[], None]]) -> None:
        replays[gamma]()


@dataclass
class DraftGraphs:
    """The replays of one assistant's drafts by length, on the cache of `state`: CUDA
    graphs (`assisted.engine.drafters.draft_graphs`), or in tests the passes run eagerly.
    `module` may be shared with the graphs of the assistant's other caches."""

    state: StaticState
    replays: dict[int, Callable[[], None]]  # γ: the replay of a γ-pass draft
    capture_s: float = 0.0  # the capture and its self-check, set once checked
    # γ: the seconds of a replay of a γ-pass draft, read back, timed once checked: a short
    # draft pays the launch and the read a long one pays, so each length its own.
    replay_s: dict[int, float] | None = None
    verdict: Verdict | None = None  # the self-check's, set once it passed
    module: Replay | None = None

    def __post_init__(self) -> None:
        self.module = self.module or Replay()

    @property
    def cap(self) -> int:
        return max(self.replays)

    def replay(self, gamma: int) -> None:
        """Draft `gamma` candidates after `state.pair` into `state.out`."""
        self.module(gamma, self.replays)


@dataclass
class DraftCounts:
    """What a drafter did in one run: its drafts through graphs, and eagerly (a draft
    longer than the graphs' cap)."""

    graphed: int = 0
    eager: int = 0


class StaticDrafter:
    """Greedy drafts from a static cache (the module's note), through `graphs` where given
    and able to draft the asked length after two ids or more, else eagerly. Where a replay
    raises, `on_fault` gives the drafter that drafts the rest of the run (and raises where
    nothing on the device can: `assisted.engine.drafters.draft_graphs.fall_back`)."""

    def __init__(
        self,
        state: StaticState,
        threshold: float,
        eos_ids: Collection[int],
        cumulative: float = 0.0,
        graphs: DraftGraphs | None = None,
        reason: str = "",
        on_fault: Callable[[Exception], LeanDrafter] | None = None,
    ):
        self.state = state
        self.model = state.model
        self.threshold = threshold
        self.cumulative = cumulative
        self.eos_ids = frozenset(eos_ids)
        self.graphs = graphs
        self.reason = reason
        self.held: list[int] = []  # the ids whose keys and values the cache holds
        self.counts = DraftCounts()
        self.on_fault = on_fault
        self.fallback: LeanDrafter | None = None  # drafting the run's rest after a fault
        state.rewind(0)

    @property
    def path(self) -> DraftingPath:
        """The path this drafter takes, why, and what its graphs cost to capture and what
        their self-check found; the fallback's, after a replay raised."""
        if self.fallback is not None:
            return self.fallback.path
        graphed = self.graphs is not None
        verdict = self.graphs.verdict if graphed else None
        return DraftingPath(
            CUDA_GRAPHS if graphed else EAGER,
            self.reason,
            self.graphs.capture_s if graphed else None,
            verdict.check if verdict else None,
            verdict.judged if verdict else None,
            verdict.gap if verdict else None,
            verdict.gap_at if verdict else None,
        )

    def draft(
        self,
        input_ids: torch.LongTensor,
        gamma: int,
        ids: list[int] | None = None,
        floors: Sequence[float] = (),
    ) -> list[int]:
        """Up to `gamma` candidates to follow `input_ids` (one sequence), whose ids the
        caller may have read already (`ids`): else they are read here; ending where
        `floors` say (`DraftEnd`)."""
        if ids is None:
            ids = input_ids[0].tolist()
        if self.fallback is not None:
            return self.fallback.draft(input_ids, gamma, ids, floors)
        replayed = self.graphs is not None and gamma <= self.graphs.cap and len(ids) > 1
        # At least the last id is read again: its logits give the first candidate. A
        # replay's first pass reads the last two.
        keep = min(common_prefix_length(self.held, ids), len(ids) - (2 if replayed else 1))
        feed = input_ids[:, keep:].to(self.state.token.device)
        with torch.inference_mode():
            self.state.rewind(keep)
            if not replayed:
                return self._eager(ids, feed, gamma, floors)
            try:
                return self._replayed(ids, feed, gamma, floors)
            except Exception as error:
                if self.on_fault is None:
                    raise
                # The static cache may hold what the failed replay half wrote: the rest of
                # the run drafts on a cache of the fallback's own.
                self.fallback = self.on_fault(error)
        return self.fallback.draft(input_ids, gamma, ids, floors)

    def _replayed(
        self, ids: list[int], feed: torch.Tensor, gamma: int, floors: Sequence[float]
    ) -> list[int]:
        """The draft as one graph of `gamma` passes, after the committed ids not yet read
        (an eager pass, of none after an assistant's draft: the graph's first pass reads
        the two ids that a step leaves, accepting the whole draft or not)."""
        if feed.shape[1] > 2:
            self.state.feed(feed[:, :-2])
        self.state.pair.copy_(feed[:, -2:])
        self.graphs.replay(gamma)
        tokens, probabilities = self.state.out[:, :gamma].tolist()  # the draft's one read
        self.counts.graphed += 1
        tokens = [int(token) for token in tokens]
        # Every pass wrote its keys and values: the cache holds the ids and all but the
        # last candidate, whatever the cut keeps.
        self.held = ids + tokens[:-1]
        return cut(tokens, probabilities, self.eos_ids, self.threshold, self.cumulative, floors)

    def _eager(
        self, ids: list[int], feed: torch.Tensor, gamma: int, floors: Sequence[float]
    ) -> list[int]:
        """The lean loop on the static cache: a pass and a read a candidate, stopping as
        soon as a rule ends the draft."""
        state = self.state
        drafted: list[int] = []
        end = DraftEnd(self.eos_ids, self.threshold, self.cumulative, floors)
        logits = state.feed(feed)
        for position in range(gamma):
            if position:
                logits = state.feed(state.token)
            token = int(logits.argmax())
            drafted.append(token)
            weighed = confidence_of(logits, token) if end.weighs_confidence else None
            if end.after(token, weighed):
                break
            state.token.fill_(token)
        self.counts.eager += 1
        # The last candidate was never read: the cache holds the ids and the rest.
        self.held = ids + drafted[:-1]
        return drafted


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
