"""What the `auto` policy learnt on a loaded pair, kept from one run to the next.

Two kinds of knowledge, kept apart because they age differently:
- **costs**, facts about the machine: T(k), the target's seconds to verify k rows, and per
  assistant precision its seconds per drafted token and per token of a prefill. The
  calibration times them once per pair, device and dtype, and every run refines T(k) for
  the rows it verified and the prefill time (the median of the latest reads: `keep_read`).
  A sampled run's assistant drafts through its own `generate()`, warping and sampling
  each token, so its time per drafted token is timed apart (`sampled_draft_s`), once a
  process first prepares a sampled `auto` run.
  T(k) holds measured rows only, each with how many timings stand behind it and when it
  was last measured (`verify_timed`): a row fitted between measured ones is never kept,
  so a calibration checks measurements, not its own interpolation
  (`assisted.engine.engine`).
- **answers**, a fact about the prompts seen: the lengths of the pair's latest answers
  (`answers`: tokens, and whether the answer ended or its budget cut it), from which the
  policy expects how long an answer runs on (`assisted.policy.estimates.expected_tokens_left`):
  every run's, plain
  or drafted, once per prompt in a row (`keep_answer`).
- **acceptance**, a fact about the text seen: per assistant precision and temperature band
  (`assisted.core.settings`: greedy, or sampled at one of three temperatures), (accepted, tried)
  counts per source and streak. Each run starts from the latest counts of its band,
  lightly (`assisted.policy.estimates.HISTORY_WEIGHT`), and leaves its own there. Greedy's
  counts are `acceptance`, the field a file without bands holds; the sampled bands' are
  `sampled`.

The precision is the assistant's ("none": the pair's dtype, and the only one for drafters
without a model), since an int8 assistant drafts faster and is accepted less.

`to_dict()` and `from_dict()` turn the state into JSON-ready data and back: a new process
starts from what earlier ones learnt on the same machine (`assisted.models.learnt_store` keeps it
on disk), and only checks the costs they timed (`assisted.engine.engine.calibrate`).

`snapshot()` and `restore()` cover the acceptance only: the benchmark (inside
`acceptance_apart()`, so that none of it reaches the file) starts from no acceptance,
snapshots before a prompt's warm-up and restores before each of its timed assisted runs,
so every timed run starts from what the earlier prompts taught, as a new prompt in the app
would. The costs stay as the latest runs refined them. A restore works in place: the
pair's siblings (`dataclasses.replace` of the pair, the benchmark's variants) share it.

Several processes learn on one pair and write one file (ZeroGPU workers, the CLI, the
benchmark), so a save merges (`merge`): the file, with what this process learnt since it
last read or wrote it, which is what differs from its copy of the file then (`synced`).

No torch here.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from assisted.core.settings import GREEDY, SAMPLED_BANDS, Band, DrafterKind
from assisted.policy.estimates import (
    LONG_MATCH,
    WINDOW,
    AcceptanceCounts,
    Answer,
    Counts,
    EstimateKey,
)

_T = TypeVar("_T")


@dataclass
class PrecisionLearnt:
    """What runs drafting with the assistant in one precision learnt. The costs are None
    until the calibration times them (never, for drafters without a model)."""

    draft_s: float | None = None  # the assistant's seconds per drafted token
    prefill_s: float | None = None  # its seconds per token of context it prefills
    acceptance: AcceptanceCounts = field(default_factory=dict)  # greedy runs'
    # Its seconds per drafted token through its sampling `generate()`, for sampled runs.
    sampled_draft_s: float | None = None
    sampled: dict[Band, AcceptanceCounts] = field(default_factory=dict)  # per sampled band
    # The latest reads of context, each its seconds per token over its run's T(1).
    reads: list[float] = field(default_factory=list)

    def acceptance_in(self, band: Band) -> AcceptanceCounts:
        """The counts runs in `band` left: greedy's `acceptance`, or a sampled band's."""
        return self.acceptance if band == GREEDY else self.sampled.get(band, {})

    def keep_acceptance(self, band: Band, counts: AcceptanceCounts) -> None:
        """`counts` are now the latest of `band`."""
        if band == GREEDY:
            self.acceptance = counts
        else:
            self.sampled[band] = counts

    def keep_read(self, read_s: float, t1_s: float) -> None:
        """A run read context at `read_s` a token while its T(1) was `t1_s`: the next reads'
        price is the median of the latest `WINDOW`, each at the target's level now (a
        read timed in a burst that slowed the assistant alone sets no price)."""
        self.reads = [*self.reads, read_s / t1_s][-WINDOW:]
        self.prefill_s = statistics.median(self.reads) * t1_s

    def copy(self) -> PrecisionLearnt:
        return PrecisionLearnt(
            self.draft_s,
            self.prefill_s,
            _copy(self.acceptance),
            self.sampled_draft_s,
            _copy_bands(self.sampled),
            list(self.reads),
        )


@dataclass
class ProcessTiming:
    """What one process timed of the costs (`assisted.engine.engine.calibrate`), so that it
    times each once, and its runs' reports say what it timed. Not kept on disk."""

    pid: int = field(default_factory=os.getpid)
    seconds: float = 0.0  # all it spent timing, checks included
    fresh: bool = False  # it timed a cost the learnt state lacked: a calibration
    rows: set[int] = field(default_factory=set)  # the T(k) rows it timed, fresh or again
    drafting: set[str] = field(default_factory=set)  # precisions whose drafting it timed
    sampled_drafting: set[str] = field(default_factory=set)  # ... and sampled drafting
    # Costs read from disk and timed again ("T(1)", "T(9)", "drafting int8", "sampled
    # drafting int8"), and those of
    # them whose time the new timing lowered.
    checked: list[str] = field(default_factory=list)
    corrected: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LearntSnapshot:
    """The acceptance of every precision and band at one moment (see `LearntState.restore`):
    greedy's per precision, and the sampled bands' per precision."""

    acceptance: dict[str, AcceptanceCounts]
    sampled: dict[str, dict[Band, AcceptanceCounts]] = field(default_factory=dict)


@dataclass
class LearntState:
    """Costs and acceptance learnt on one loaded pair; see the module's note."""

    # T(k): rows k -> the target's seconds to verify them, for the rows timed or verified.
    verify_s: dict[int, float] = field(default_factory=dict)
    precisions: dict[str, PrecisionLearnt] = field(default_factory=dict)
    # Per row of `verify_s`: how many timings stand behind it, and when (Unix seconds) it
    # was last measured; none for a row whose timings are unknown (a format-4 file's).
    verify_timed: dict[int, tuple[int, float]] = field(default_factory=dict)
    # The pair's latest answers, oldest first, at most `WINDOW`.
    answers: list[Answer] = field(default_factory=list)
    # What this process timed (`timed_here`). Not kept on disk.
    timing: ProcessTiming = field(default_factory=ProcessTiming, compare=False, repr=False)
    # The learnt file's state when this process last read or wrote it (`merge`); None
    # before it ever did. Not kept on disk.
    synced: LearntState | None = field(default=None, compare=False, repr=False)
    # False while the acceptance is this process's alone (`acceptance_apart`).
    shares_acceptance: bool = field(default=True, compare=False)
    # The prompt of the latest answer kept (`keep_answer`). Not kept on disk.
    answered: int | None = field(default=None, compare=False, repr=False)

    def timed_here(self) -> ProcessTiming:
        """What this process timed. A process forked from the one that timed (a ZeroGPU
        worker) has timed nothing yet, but does not time again what its parent timed on
        this machine moments before: it inherits the rows and precisions, not the
        seconds."""
        inherited = self.timing
        if inherited.pid != os.getpid():
            self.timing = ProcessTiming(
                rows=set(inherited.rows),
                drafting=set(inherited.drafting),
                sampled_drafting=set(inherited.sampled_drafting),
            )
        return self.timing

    @property
    def timed_s(self) -> float:
        """Seconds this process spent timing the costs, checks included: 0 where it timed
        nothing, every cost coming from an earlier process unchecked."""
        return self.timed_here().seconds

    def keep_verify(self, rows: int, seconds: float, timings: int) -> None:
        """T(`rows`) measured at `seconds`, the median of `timings` timings, now."""
        self.verify_s[rows] = seconds
        count = self.verify_timed.get(rows, (0, 0.0))[0]
        self.verify_timed[rows] = (count + timings, round(time.time(), 1))

    def keep_answer(self, answer: Answer, prompt: int | None = None) -> None:
        """One more answer of the pair, the oldest dropped past `WINDOW`; an answer to
        the same `prompt` (a key of its ids) as the latest one replaces it instead."""
        kept = self.answers
        if prompt is not None and prompt == self.answered and kept:
            kept = kept[:-1]
        self.answers = [*kept, answer][-WINDOW:]
        self.answered = prompt

    def precision(self, name: str) -> PrecisionLearnt:
        """What was learnt in precision `name` ("none", "int8", ...), empty at first."""
        return self.precisions.setdefault(name, PrecisionLearnt())

    def snapshot(self) -> LearntSnapshot:
        """The acceptance learnt so far, apart from what later runs will learn."""
        return LearntSnapshot(
            {name: _copy(learnt.acceptance) for name, learnt in self.precisions.items()},
            {name: _copy_bands(learnt.sampled) for name, learnt in self.precisions.items()},
        )

    def restore(self, snapshot: LearntSnapshot) -> None:
        """Bring back the acceptance of `snapshot`, in place: a precision first seen after
        it starts from nothing again. The costs stay as they are."""
        for name in self.precisions.keys() | snapshot.acceptance.keys() | snapshot.sampled.keys():
            learnt = self.precision(name)
            learnt.acceptance = _copy(snapshot.acceptance.get(name, {}))
            learnt.sampled = _copy_bands(snapshot.sampled.get(name, {}))

    @contextmanager
    def acceptance_apart(self) -> Iterator[None]:
        """Within the block the acceptance starts from nothing and is this process's alone:
        `merge` neither writes it to the file nor brings another writer's into it, while
        the costs merge as ever. Afterwards the acceptance is back as the block found it,
        and the next save or refresh brings in what other writers learnt meanwhile."""
        kept = self.snapshot()
        self.shares_acceptance = False
        self.restore(LearntSnapshot({}))
        try:
            yield
        finally:
            self.restore(kept)
            self.shares_acceptance = True

    def copy(self) -> LearntState:
        """The costs and acceptance, apart from this state's."""
        return LearntState(
            dict(self.verify_s),
            {name: learnt.copy() for name, learnt in self.precisions.items()},
            dict(self.verify_timed),
            list(self.answers),
        )

    def adopt(self, merged: LearntState, synced: LearntState) -> None:
        """Hold `merged` (`merge`), in place, now that the file holds `synced`. While the
        acceptance is apart, it stays as it is, and so does the file's copy of it."""
        self.verify_s.clear()
        self.verify_s.update(merged.verify_s)
        self.verify_timed = dict(merged.verify_timed)
        self.answers = list(merged.answers)
        for name, theirs in merged.precisions.items():
            mine = self.precision(name)
            mine.draft_s, mine.prefill_s = theirs.draft_s, theirs.prefill_s
            mine.reads = list(theirs.reads)
            mine.sampled_draft_s = theirs.sampled_draft_s
            if self.shares_acceptance:
                mine.acceptance = _copy(theirs.acceptance)
                mine.sampled = _copy_bands(theirs.sampled)
        seen = synced.copy()
        if not self.shares_acceptance:
            before = self.synced or LearntState()
            for name in seen.precisions.keys() | before.precisions.keys():
                seen.precision(name).acceptance = _copy(before.precision(name).acceptance)
                seen.precision(name).sampled = _copy_bands(before.precision(name).sampled)
        self.synced = seen

    def to_dict(self) -> dict:
        """The state as JSON-ready data: T(k) as [k, seconds, timings, measured at] rows,
        the answers as [tokens, ended] pairs, and each acceptance
        key, a (source, streak, match bucket) tuple, as three fields of its entry; greedy's
        acceptance under `acceptance`, the sampled bands' under `sampled`."""
        return {
            "verify_s": [
                [k, seconds, *self.verify_timed.get(k, ())]
                for k, seconds in sorted(self.verify_s.items())
            ],
            "answers": [[answer.tokens, answer.ended] for answer in self.answers],
            "precisions": {
                name: {
                    "draft_s": learnt.draft_s,
                    "prefill_s": learnt.prefill_s,
                    "reads": list(learnt.reads),
                    "acceptance": _entries(learnt.acceptance),
                    "sampled_draft_s": learnt.sampled_draft_s,
                    "sampled": {band: _entries(counts) for band, counts in learnt.sampled.items()},
                }
                for name, learnt in self.precisions.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict) -> LearntState:
        """The state `to_dict` made. Data of any other shape, or with a number the policy
        could not use (negative, infinite, not a number), raises ValueError, TypeError,
        KeyError or AttributeError. Data in format 3 (`assisted.models.learnt_store`), which has
        no sampled bands, has no `sampled_draft_s` nor `sampled`: its acceptance, left by
        greedy and sampled runs alike, is read as greedy's. Formats 3 and 4 hold T(k) as
        [k, seconds] pairs, with no count nor time, and no answers."""
        rows = [_verify_row(row) for row in data["verify_s"]]
        verify_s = {k: seconds for k, seconds, _ in rows}
        verify_timed = {k: timed for k, _, timed in rows if timed is not None}
        answers = [_answer(entry) for entry in data.get("answers", [])][-WINDOW:]
        precisions = {
            name: PrecisionLearnt(
                _optional(learnt["draft_s"]),
                _optional(learnt["prefill_s"]),
                _counts(learnt["acceptance"]),
                _optional(learnt.get("sampled_draft_s")),
                {
                    _band(band): _counts(entries)
                    for band, entries in learnt.get("sampled", {}).items()
                },
                [_number(value) for value in learnt.get("reads", [])][-WINDOW:],
            )
            for name, learnt in data["precisions"].items()
        }
        return cls(verify_s, precisions, verify_timed, answers)


def merge(disk: LearntState, state: LearntState) -> LearntState:
    """What the file should hold: `disk`, what it holds now, with what `state` learnt since
    it last read or wrote the file (its `synced` copy), value by value.

    - T(k), per row k (with its count and time), the answers (as one list), and each
      precision's drafting (greedy and sampled) and prefill seconds: this process's
      value where it timed or refined it since (it differs from its copy of the file), or
      where the file has none; the file's otherwise. Two measurements of one machine are
      both honest, so the later writer's stands.
    - Acceptance, per precision, band and estimate (source, streak, match bucket): the same
      rule.
      A run leaves its counts for the estimates it used and the history it started from
      for the others (`AcceptanceModel.counts`), so each estimate in the file is the
      latest counts of a run that used it, whichever process ran it. While `state`'s
      acceptance is apart (`acceptance_apart`), the file's stands whole.

    Nothing is ever removed: a value only the process holds stays, so a file deleted under
    a running process comes back with what that process holds at its next save."""
    synced = state.synced or LearntState()
    merged = disk.copy()
    for k, seconds in state.verify_s.items():
        if seconds != synced.verify_s.get(k) or k not in disk.verify_s:
            merged.verify_s[k] = seconds
            if k in state.verify_timed:
                merged.verify_timed[k] = state.verify_timed[k]
    if state.answers != synced.answers or not disk.answers:
        merged.answers = list(state.answers)
    for name, mine in state.precisions.items():
        was = synced.precisions.get(name, PrecisionLearnt())
        theirs = merged.precision(name)
        theirs.draft_s = _newer(mine.draft_s, was.draft_s, theirs.draft_s)
        theirs.prefill_s = _newer(mine.prefill_s, was.prefill_s, theirs.prefill_s)
        theirs.reads = _newer(mine.reads, was.reads, theirs.reads or None) or []
        theirs.sampled_draft_s = _newer(
            mine.sampled_draft_s, was.sampled_draft_s, theirs.sampled_draft_s
        )
        if state.shares_acceptance:
            _merge_counts(mine.acceptance, was.acceptance, theirs.acceptance)
            for band, counts in mine.sampled.items():
                into = theirs.sampled.setdefault(band, {})
                _merge_counts(counts, was.sampled.get(band, {}), into)
    return merged


def _merge_counts(mine: AcceptanceCounts, synced: AcceptanceCounts, disk: AcceptanceCounts) -> None:
    """Into `disk`, in place, `mine`'s counts of each estimate, `merge`'s rule."""
    for key, counts in _copy(mine).items():
        disk[key] = _newer(counts, synced.get(key), disk.get(key))


def _newer(mine: _T | None, synced: _T | None, disk: _T | None) -> _T | None:
    """This process's value where it changed it since it last saw the file, or where the
    file has none; the file's otherwise."""
    return mine if mine is not None and (mine != synced or disk is None) else disk


def _copy(acceptance: AcceptanceCounts) -> AcceptanceCounts:
    return {key: (list(accepted), list(tried)) for key, (accepted, tried) in acceptance.items()}


def _copy_bands(bands: dict[Band, AcceptanceCounts]) -> dict[Band, AcceptanceCounts]:
    return {band: _copy(counts) for band, counts in bands.items()}


def _entries(acceptance: AcceptanceCounts) -> list[dict]:
    return [
        {"source": source.value, "streak": streak, "match": bucket, "accepted": a, "tried": t}
        for (source, streak, bucket), (a, t) in _copy(acceptance).items()
    ]


def _counts(entries: list[dict]) -> AcceptanceCounts:
    return dict(_acceptance_entry(entry) for entry in entries)


def _band(name: object) -> Band:
    if name not in SAMPLED_BANDS:
        raise ValueError(f"{name!r} is not a sampled temperature band")
    return name


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


def _verify_row(row: list) -> tuple[int, float, tuple[int, float] | None]:
    """One row of T(k): [k, seconds, timings, measured at], or [k, seconds] where its
    timings are unknown (format 4, or a row set by hand)."""
    if len(row) == 2:
        return _rows(row[0]), _seconds(row[1]), None
    k, seconds, timings, at = row
    if isinstance(timings, bool) or not isinstance(timings, int) or timings < 0:
        raise ValueError(f"{timings!r} is not a count of timings")
    return _rows(k), _seconds(seconds), (timings, _number(at))


def _answer(entry: list) -> Answer:
    tokens, ended = entry
    if not isinstance(ended, bool):
        raise ValueError(f"{ended!r} is not true or false")
    return Answer(_rows(tokens), ended)


def _optional(value: object) -> float | None:
    return None if value is None else _number(value)


def _rows(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{value!r} is not a count of rows")
    return value
