"""What a process keeps between requests, in one place: each per-process cache registers its
state here (`register`), and one fork handler readies them all for a forked child.

ZeroGPU runs a GPU call in a process forked from the main one, from a handler thread, while
other threads run: a request's fetch, another's check or preparation. The child has only the
thread that forked. A lock another thread held at the fork would stay held there forever,
and a job another thread ran would never end there. So in the child every state gets a lock
of its own, and forgets what only the parent's threads could finish (`State.in_child`).

What the states keep, and when it goes:
- the loaded pairs (`LoadedPairs`, held by `assisted.models.pairs`): the one cache that
  evicts, as the one whose entries weigh. At most ASSISTED_MAX_PAIRS pairs; while they hold
  more than ASSISTED_MAX_MODEL_GB, the least recently used goes first; a pinned pair never.
  A child keeps them: the pairs in memory at the fork are what its GPU call counts on.
- the preparations (`assisted.engine.engine`): each loaded pair's own, gone with their
  pair, and kept by process, so a child prepares again on its own device;
- the verdicts of the pairs checked (`assisted.models.pairs`): a few words a pair,
  kept for the process's life, the child's too;
- the fetches (`assisted.models.fetch`): the folders fetched, kept while their files are
  there; the jobs running, forgotten in a child.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from assisted.models.loading import release_memory


class State:
    """One per-process cache's lock, and what a forked child forgets of the cache."""

    def __init__(self, name: str, forget_in_child: Callable[[], None] | None = None):
        self.name = name
        self.lock = threading.Lock()
        self._forget_in_child = forget_in_child

    def in_child(self) -> None:
        self.lock = threading.Lock()
        if self._forget_in_child is not None:
            self._forget_in_child()


S = TypeVar("S", bound=State)
STATES: list[State] = []  # every state registered, in the order their modules loaded


def register(state: S) -> S:
    """Keep `state` among those a forked child readies (`_in_child`)."""
    STATES.append(state)
    return state


def _in_child() -> None:
    for state in STATES:
        state.in_child()


os.register_at_fork(after_in_child=_in_child)


class HoldsModels(Protocol):
    def models(self) -> list[Any]: ...


P = TypeVar("P", bound=HoldsModels)


class LoadedPairs(State, Generic[P]):
    """Pairs in memory by key, most recently used last, and the keys never evicted (`pinned`).
    Loading happens under the lock, so two requests for one pair load it once; a failed load
    leaves the pairs as they were. Call the methods but `load` holding `lock`."""

    def __init__(self) -> None:
        super().__init__("loaded pairs")
        self.entries: OrderedDict[Hashable, P] = OrderedDict()
        self.pinned: set[Hashable] = set()

    def cached(self, key: Hashable) -> P | None:
        """The pair loaded under `key`, now the most recently used."""
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        return None

    def load(self, key: Hashable, build: Callable[[], P], max_pairs: int, max_bytes: float) -> P:
        """The pair under `key`: cached, or built once others are evicted to leave room for
        it, at most `max_pairs` in memory and `max_bytes` of weights."""
        with self.lock:
            if (pair := self.cached(key)) is not None:  # loaded by another request meanwhile
                return pair
            while len(self.entries) >= max_pairs and self._evict_oldest():
                pass
            pair = self.entries[key] = build()
            self.evict_over(max_bytes, keep=pair)
            return pair

    def held_bytes(self) -> int:
        """Bytes of the weights that the pairs hold, a model that pairs share once."""
        from assisted.models.quantize import weights_bytes

        held = {id(model): model for pair in self.entries.values() for model in pair.models()}
        return sum(weights_bytes(model) for model in held.values())

    def evict_over(self, max_bytes: float, keep: P) -> None:
        """Evict the least recently used pairs while the pairs hold more than `max_bytes`,
        never `keep` (the pair that just grew), whatever it holds."""
        while self.held_bytes() > max_bytes:
            kept = self.pinned | {key for key, pair in self.entries.items() if pair is keep}
            oldest = next((key for key in self.entries if key not in kept), None)
            if oldest is None:
                return
            self.evict(oldest)

    def _evict_oldest(self) -> bool:
        """Evict the least recently used pair that is not pinned; False where all are."""
        oldest = next((key for key in self.entries if key not in self.pinned), None)
        if oldest is not None:
            self.evict(oldest)
        return oldest is not None

    def evict(self, key: Hashable) -> None:
        del self.entries[key]
        release_memory()
