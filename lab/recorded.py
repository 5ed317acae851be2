"""A benchmark's recorded runs read back from its runs.jsonl (`assisted.bench.reporting`
writes it, one line per timed run, in the order the runs ran), for the tools that replay
them offline: `policy_fit`, `cost_fit` and `step_prices`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from assisted.core.record import RunRecord


@dataclass(frozen=True)
class Recorded:
    """One timed run: its prompt, the variant that drafted it (None: plain decoding), the
    repeat, and the record."""

    question_id: str
    category: str
    drafter: str | None
    repeat: int
    record: RunRecord

    @property
    def key(self) -> tuple[str, int]:
        """The prompt and repeat, shared by a plain run and the assisted runs set against it."""
        return self.question_id, self.repeat

    @property
    def replayable(self) -> bool:
        """Whether this is an assisted run with its hindsight (a greedy run, not stopped)."""
        return self.drafter is not None and self.record.hindsight is not None


def read(path: Path) -> list[Recorded]:
    """The runs of `path` in the order they ran."""
    runs = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if not text:
            continue
        line = json.loads(text)
        runs.append(
            Recorded(
                question_id=line["question_id"],
                category=line.get("category") or "-",
                drafter=line["drafter"],
                repeat=line["repeat"],
                record=RunRecord.from_dict(line["record"]),
            )
        )
    return runs


def step_seconds(record: RunRecord) -> list[float]:
    """The seconds of each of `record`'s steps but the first (whose time since the run's
    start holds the target's prefill of the prompt)."""
    return [step.t_s - earlier.t_s for earlier, step in pairwise(record.steps)]


def plain_runs(runs: list[Recorded]) -> dict[tuple[str, int], RunRecord]:
    """Each plain run's record by its prompt and repeat."""
    return {run.key: run.record for run in runs if run.drafter is None}
