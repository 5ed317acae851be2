"""What a run yields as it goes: a `StepEvent` per target step, then `RunDone` with its
record (`assisted.engine.running.run`, which the watched `generate()` of
`assisted.engine.decoding` feeds); `drain` consumes them to the record. A comparison adds
its `Phase`s between runs (`assisted.engine.comparison`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from assisted.core.record import Mode, RunRecord, Step


@dataclass(frozen=True)
class StepEvent:
    """One target step of a run, as it happens."""

    mode: Mode
    index: int
    step: Step


@dataclass(frozen=True)
class RunDone:
    """A run finished (or was stopped); the record holds everything it produced."""

    record: RunRecord


def drain(events: Iterable[object]) -> RunRecord:
    """A run's events consumed to its end: the record its RunDone carries."""
    for event in events:
        if isinstance(event, RunDone):
            return event.record
    raise RuntimeError("the run ended without a record")
