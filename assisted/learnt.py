"""What the `auto` policy learnt on a loaded pair, kept from one run to the next.

Two kinds of knowledge, kept apart because they age differently:
- **costs**, facts about the machine: T(k), the target's seconds to verify k rows, and per
  assistant precision its seconds per drafted token and per token of a prefill. The
  calibration times them once per pair, device and dtype, and every run refines T(k) for
  the rows it verified and the prefill time (`assisted.auto`).
- **acceptance**, a fact about the text seen: per assistant precision, (accepted, tried)
  counts per source and streak. Each run starts from the latest run's counts, lightly
  (`assisted.acceptance.HISTORY_WEIGHT`), and leaves its own.

The precision is the assistant's ("none": the pair's dtype, and the only one for drafters
without a model), since an int8 assistant drafts faster and is accepted less.

`to_dict()` and `from_dict()` turn the state into JSON-ready data and back: a new process
starts from what earlier ones learnt on the same machine (`assisted.learnt_store` keeps it
on disk), and times no cost they timed.

`snapshot()` and `restore()` cover the acceptance only. The benchmark starts from no
acceptance, then snapshots before a prompt's warm-up and restores before each of its timed
assisted runs, so every timed run starts from what the earlier prompts taught, never from
the prompt's own warm-up or repeats, as a new prompt in the app would, nor from runs
before the benchmark. The costs stay as the latest runs refined them, since timing the same
machine again only sharpens them. A restore works in place: the pair's siblings
(`dataclasses.replace` of the pair, as the benchmark's drafter variants are) share this
object, and see it.

No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from assisted.acceptance import LONG_MATCH, AcceptanceCounts, Counts, EstimateKey
from assisted.drafters import DrafterKind


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
    # Seconds this process spent timing the costs (`assisted.auto.calibrate`), for the runs'
    # reports: 0 where every cost came from an earlier process. Not kept on disk.
    timed_s: float = field(default=0.0, compare=False)

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

    def to_dict(self) -> dict:
        """The state as JSON-ready data: T(k) as [k, seconds] pairs, and each acceptance
        key, a (source, streak, match bucket) tuple, as three fields of its entry."""
        return {
            "verify_s": [[k, seconds] for k, seconds in sorted(self.verify_s.items())],
            "precisions": {
                name: {
                    "draft_s": learnt.draft_s,
                    "prefill_s": learnt.prefill_s,
                    "acceptance": [
                        {
                            "source": source.value,
                            "streak": streak,
                            "match": bucket,
                            "accepted": accepted,
                            "tried": tried,
                        }
                        for (source, streak, bucket), (accepted, tried) in _copy(
                            learnt.acceptance
                        ).items()
                    ],
                }
                for name, learnt in self.precisions.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict) -> LearntState:
        """The state `to_dict` made. Data of any other shape, or with a number the policy
        could not use (negative, infinite, not a number), raises ValueError, TypeError,
        KeyError or AttributeError."""
        verify_s = {_rows(k): _seconds(seconds) for k, seconds in data["verify_s"]}
        precisions = {
            name: PrecisionLearnt(
                _optional(learnt["draft_s"]),
                _optional(learnt["prefill_s"]),
                dict(_acceptance_entry(entry) for entry in learnt["acceptance"]),
            )
            for name, learnt in data["precisions"].items()
        }
        return cls(verify_s, precisions)


def _copy(acceptance: AcceptanceCounts) -> AcceptanceCounts:
    return {key: (list(accepted), list(tried)) for key, (accepted, tried) in acceptance.items()}


def _acceptance_entry(entry: dict) -> tuple[EstimateKey, Counts]:
    if not isinstance(entry["streak"], bool):
        raise ValueError(f"streak {entry['streak']!r} is not true or false")
    bucket = entry["match"]
    if isinstance(bucket, bool) or not isinstance(bucket, int) or not 0 <= bucket <= LONG_MATCH:
        raise ValueError(f"match bucket {bucket!r} is not a whole number up to {LONG_MATCH}")
    accepted = [_number(value) for value in entry["accepted"]]
    tried = [_number(value) for value in entry["tried"]]
    if len(accepted) != len(tried):
        raise ValueError("accepted and tried counts of different lengths")
    return (DrafterKind(entry["source"]), entry["streak"], bucket), (accepted, tried)


def _number(value: object) -> float:
    """A count or a cost: finite and not negative."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ValueError(f"{value!r} is not a finite, non-negative number")
    return float(value)


def _seconds(value: object) -> float:
    """A verification time: above 0 too, as the policy divides by it."""
    if _number(value) == 0:
        raise ValueError("a verification that took no time")
    return float(value)


def _optional(value: object) -> float | None:
    return None if value is None else _number(value)


def _rows(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{value!r} is not a count of rows")
    return value
