"""The lean drafting loop on a static cache: rolled back by a length, replayable as a graph.

`assisted.engine.drafters.lean`'s loop keeps the assistant's keys and values in a DynamicCache and
reads each candidate back as it drafts it: two host synchronisations a drafted token. On a
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
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import StaticCache

from assisted.core.record import (
    CUDA_GRAPHS,
    EAGER,
    DraftingPath,
    Verdict,
    common_prefix_length,
)
from assisted.engine.drafters.lean import DraftEnd, LeanDrafter, confidence_of

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def cut(
    tokens: Sequence[int],
    confidences: Sequence[float],
    eos_ids: Collection[int],
    threshold: float,
    cumulative: float,
    floors: Sequence[float] = (),
) -> list[int]:
    """The draft the lean loop keeps of `tokens`, the assistant's argmax at each position
    with the probability it gave each: up to where `assisted.engine.drafters.lean.DraftEnd` ends
    it."""
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
        `floors` say (`assisted.engine.drafters.lean.DraftEnd`)."""
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
