"""What the `auto` policy learnt on a loaded pair, kept from one run to the next.

Two kinds of knowledge, kept apart because they age differently:
- **costs**, facts about the machine: T(k), the target's seconds to verify k rows, and per
  assistant precision its seconds per drafted token and per token of a prefill. The
  calibration times them once per loaded pair (so per device and dtype), and every run
  refines T(k) for the rows it verified and the prefill time (`assisted.auto`).
- **acceptance**, a fact about the text seen: per assistant precision, (accepted, tried)
  counts per source and streak. Each run starts from the latest run's counts, lightly
  (`assisted.acceptance.HISTORY_WEIGHT`), and leaves its own.

The precision is the assistant's ("none": the pair's dtype, and the only one for drafters
without a model), since an int8 assistant drafts faster and is accepted less.

`snapshot()` and `restore()` cover the acceptance only. The benchmark snapshots before a
prompt's warm-up and restores before each of its timed assisted runs, so every timed run
starts from what the earlier prompts taught, never from the prompt's own warm-up or
repeats, as a new prompt in the app would; the costs stay as the latest runs refined them,
since timing the same machine again only sharpens them. A restore works in place: the
pair's siblings (`dataclasses.replace` of the pair, as the benchmark's drafter variants
are) share this object, and see it.

No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assisted.acceptance import AcceptanceCounts


@dataclass
class PrecisionLearnt:
    """What runs drafting with the assistant in one precision learnt. The costs are None
    until the calibration times them (never, for drafters without a model)."""

    draft_s: float | None = None  # the assistant's seconds per drafted token
    prefill_s: float | None = None  # its seconds per token of context it prefills
    acceptance: AcceptanceCounts = field(default_factory=dict)


@dataclass(frozen=True)
class LearntSnapshot:
    """The acceptance of every precision at one moment (see `LearntState.restore`)."""

    acceptance: dict[str, AcceptanceCounts]


@dataclass
class LearntState:
    """Costs and acceptance learnt on one loaded pair; see the module's note."""

    # T(k): rows k -> the target's seconds to verify them, for the rows timed or verified.
    verify_s: dict[int, float] = field(default_factory=dict)
    precisions: dict[str, PrecisionLearnt] = field(default_factory=dict)

    def precision(self, name: str) -> PrecisionLearnt:
        """What was learnt in precision `name` ("none", "int8", ...), empty at first."""
        return self.precisions.setdefault(name, PrecisionLearnt())

    def snapshot(self) -> LearntSnapshot:
        """The acceptance learnt so far, apart from what later runs will learn."""
        return LearntSnapshot(
            {name: _copy(learnt.acceptance) for name, learnt in self.precisions.items()}
        )

    def restore(self, snapshot: LearntSnapshot) -> None:
        """Bring back the acceptance of `snapshot`, in place: a precision first seen after
        it starts from nothing again. The costs stay as they are."""
        for name in self.precisions.keys() | snapshot.acceptance.keys():
            self.precision(name).acceptance = _copy(snapshot.acceptance.get(name, {}))


def _copy(acceptance: AcceptanceCounts) -> AcceptanceCounts:
    return {key: (list(accepted), list(tried)) for key, (accepted, tried) in acceptance.items()}
