"""Costs read from disk are checked once per process: T(1), T(2), T(cap + 1) and the drafting
time are timed again, and the smaller time stands, as other work on the machine only ever
adds time. So a slow value that a busy earlier process left is corrected, a slow timing now
never overwrites a good value on disk, and the runs' reports say what was checked."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from assisted.core.settings import GREEDY, DraftSettings
from assisted.engine import engine
from assisted.engine.drafters import seam
from assisted.models import learnt_store, pairs
from assisted.models.learnt_store import LearntFile
from assisted.policy.learnt import LearntState

CAP = 8
QUIET = {1: 0.010, 2: 0.011, CAP + 1: 0.015}  # T(1), T(2) and T(9) on a quiet machine
DRAFT_S = 0.002
READ_S = DRAFT_S / engine._PREFILL_ROWS  # the stand-in times every block as one row


@pytest.fixture(scope="module")
def pair(tiny_dirs) -> pairs.LoadedPair:
    spec = pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return pairs.load_pair(spec, device="cpu", dtype="float32")


@pytest.fixture
def file(tmp_path) -> LearntFile:
    return LearntFile(tmp_path / "p.json", {"pair": "p"})


def earlier_process(
    file: LearntFile, verify_s: dict[int, float], draft_s=DRAFT_S, read_s=READ_S
) -> None:
    """What an earlier process timed and kept in `file`."""
    earlier = LearntState(verify_s=dict(verify_s))
    earlier.precision("none").draft_s, earlier.precision("none").prefill_s = draft_s, read_s
    learnt_store.save(file, earlier)


def new_process(pair: pairs.LoadedPair, file: LearntFile) -> pairs.LoadedPair:
    """The pair as a process that has just read `file` holds it."""
    return dataclasses.replace(pair, learnt=learnt_store.load(file), learnt_file=file)


def timings_now(monkeypatch, pair, target_s: dict[int, float], draft_s=DRAFT_S) -> list:
    """Make the machine read `target_s` and `draft_s` now; the calls, as (model, rows)."""
    calls = []

    def time_forwards(model, prefix, rows, device):
        name = "target" if model is pair.target else "assistant"
        calls.append((name, rows))
        return {k: target_s[k] if name == "target" else draft_s for k in rows}

    monkeypatch.setattr(engine, "_time_forwards", time_forwards)
    return calls


def calibrate(pair: pairs.LoadedPair) -> dict[int, float]:
    prefix = torch.tensor([[1, 2, 3]])
    verify_s, _, _ = engine.calibrate(pair, prefix, pair.assistant, "none", CAP)
    return verify_s


def test_a_slow_t_cap_plus_one_on_disk_is_corrected_by_the_next_process(pair, file, monkeypatch):
    busy = {**QUIET, CAP + 1: 3 * QUIET[CAP + 1]}  # timed while the machine was busy
    earlier_process(file, busy)
    checking = new_process(pair, file)
    timings_now(monkeypatch, pair, QUIET)
    verify_s = calibrate(checking)
    assert verify_s[1] == QUIET[1] and verify_s[CAP + 1] == QUIET[CAP + 1]
    # Interpolated between the second row and the last.
    assert verify_s[5] == pytest.approx(QUIET[2] + (QUIET[CAP + 1] - QUIET[2]) * 3 / 7)
    calibration = learnt_store.calibration(checking.learnt, file)
    assert calibration.source == "disk"
    assert calibration.checked == ("T(1)", "T(2)", "T(9)", "drafting none", "read none")
    assert calibration.corrected == ("T(9)",)
    learnt_store.save(file, checking.learnt)  # as its first run does, after its clock stops
    assert learnt_store.load(file).verify_s == QUIET  # the next process reads it corrected


def test_a_slow_timing_now_leaves_a_good_value_on_disk_as_it_is(pair, file, monkeypatch):
    earlier_process(file, QUIET)
    checking = new_process(pair, file)
    busy = {k: 3 * seconds for k, seconds in QUIET.items()}
    timings_now(monkeypatch, pair, busy, draft_s=3 * DRAFT_S)
    assert calibrate(checking)[CAP + 1] == QUIET[CAP + 1]
    assert checking.learnt.verify_s == QUIET
    assert checking.learnt.precision("none").draft_s == DRAFT_S
    assert learnt_store.calibration(checking.learnt, file).corrected == ()
    learnt_store.save(file, checking.learnt)
    assert learnt_store.load(file).verify_s == QUIET


def test_a_slow_drafting_time_on_disk_is_corrected_too(pair, file, monkeypatch):
    earlier_process(file, QUIET, draft_s=3 * DRAFT_S)
    checking = new_process(pair, file)
    timings_now(monkeypatch, pair, QUIET)
    _, draft_s, prefill_s = engine.calibrate(
        checking, torch.tensor([[1, 2, 3]]), pair.assistant, "none", CAP
    )
    assert draft_s == DRAFT_S and prefill_s == READ_S  # the read is checked with the drafting
    assert learnt_store.calibration(checking.learnt, file).corrected == ("drafting none",)


def test_costs_all_read_from_disk_are_checked_exactly_once_per_process(pair, file, monkeypatch):
    earlier_process(file, QUIET)
    checking = new_process(pair, file)
    calls = timings_now(monkeypatch, pair, QUIET)
    for _ in range(3):  # as several preparations in one process would
        calibrate(checking)
    assert calls == [("target", [1, 2, CAP + 1]), ("assistant", [1, engine._PREFILL_ROWS])]
    assert checking.learnt.timed_s > 0
    calibration = learnt_store.calibration(checking.learnt, file)
    assert calibration.source == "disk" and calibration.seconds == checking.learnt.timed_s
    assert learnt_store.describe(
        {**dataclasses.asdict(calibration), "checked": list(calibration.checked)}
    ).startswith("Costs loaded from an earlier run on this machine, T(1), T(2), T(9), drafting")


def test_a_disturbed_check_is_timed_again(pair, file, monkeypatch):
    earlier_process(file, {**QUIET, CAP + 1: 10 * CAP * QUIET[1]})  # 9 rows at 80× one
    checking = new_process(pair, file)
    readings = iter([{**QUIET, CAP + 1: 5 * CAP * QUIET[1]}, QUIET])  # still disturbed
    monkeypatch.setattr(
        engine,
        "_time_forwards",
        lambda m, p, rows, d: next(readings) if m is pair.target else dict.fromkeys(rows, DRAFT_S),
    )
    assert calibrate(checking)[CAP + 1] == QUIET[CAP + 1]


def test_a_process_forked_after_timing_reports_nothing_timed_and_times_nothing_again(
    pair, file, monkeypatch
):
    earlier_process(file, QUIET)
    worker = new_process(pair, file)
    calls = timings_now(monkeypatch, pair, QUIET)
    calibrate(worker)
    assert learnt_store.calibration(worker.learnt, file).seconds > 0
    parent_pid = worker.learnt.timing.pid
    monkeypatch.setattr("os.getpid", lambda: parent_pid + 1)  # as a forked worker sees it
    assert worker.learnt.timed_s == 0  # the parent's seconds are not the worker's
    calibrate(worker)  # its parent checked these on this machine moments before
    assert len(calls) == 2
    assert learnt_store.calibration(worker.learnt, file).checked == ()


def drafts_first(pair: pairs.LoadedPair) -> bool:
    """Whether a fresh greedy `auto` policy on the pair's learnt costs drafts with the
    assistant at a first step (no acceptance seen: its prior), context already read."""
    policy = engine.new_policy(pair, DraftSettings(num_assistant_tokens=CAP), "none", GREEDY)
    policy.started = True  # the assistant has read the prompt: no prefill to weigh
    choice = policy.choose({seam.ASSISTANT: CAP, seam.LOOKUP: 0}, tokens_left=64, context=0)
    return choice.source == seam.ASSISTANT and choice.gamma > 0


def test_a_calibration_under_load_does_not_stop_the_next_visitors_drafting(pair, file, monkeypatch):
    """A first calibration (nothing on disk) whose assistant pass is timed during a burst
    of other work, dearer than the target's own step: timed again, so the costs kept, and
    the next visitor's policy, draft as on a quiet machine; kept as timed, they would not.
    (A T(k) timed slow never replaces a learnt one: the smaller stands.)"""
    fresh = new_process(pair, file)
    assistant_s = iter([5 * QUIET[1], DRAFT_S])  # a burst, then quiet

    def time_forwards(model, prefix, rows, device):
        if model is pair.target:
            return {k: QUIET[k] for k in rows}
        seconds = next(assistant_s)
        return {k: seconds * k for k in rows}

    monkeypatch.setattr(engine, "_time_forwards", time_forwards)
    calibrate(fresh)
    assert fresh.learnt.precision("none").draft_s == DRAFT_S
    learnt_store.save(file, fresh.learnt)
    visitor = new_process(pair, file)
    assert drafts_first(visitor)
    busy = new_process(pair, file)
    busy.learnt.precision("none").draft_s = 5 * QUIET[1]  # as kept without the second timing
    assert not drafts_first(busy)


def test_a_slow_read_on_disk_is_corrected_by_the_next_process(pair, file, monkeypatch):
    # The read priced 3x too dear (shared/fixtures): only a first draft ever timed it, and
    # the policy, priced so, never made one.
    earlier_process(file, QUIET, read_s=3 * READ_S)
    checking = new_process(pair, file)
    timings_now(monkeypatch, pair, QUIET)
    _, _, prefill_s = engine.calibrate(
        checking, torch.tensor([[1, 2, 3]]), pair.assistant, "none", CAP
    )
    assert prefill_s == READ_S
    assert learnt_store.calibration(checking.learnt, file).corrected == ("read none",)


def test_a_read_retimed_beside_a_busy_neighbour_is_priced_at_the_kept_level(
    pair, file, monkeypatch
):
    # The read on disk 3x too dear, retimed while a neighbour slows every pass 2.5x: the
    # one-row pass timed with the block says how much, and the drafting time kept from a
    # quiet moment stands. The read must come out at its quiet price, not 2.5x it.
    earlier_process(file, QUIET, read_s=3 * READ_S)
    checking = new_process(pair, file)
    timings_now(monkeypatch, pair, QUIET, draft_s=2.5 * DRAFT_S)
    _, draft_s, prefill_s = engine.calibrate(
        checking, torch.tensor([[1, 2, 3]]), pair.assistant, "none", CAP
    )
    assert draft_s == DRAFT_S
    assert prefill_s == pytest.approx(READ_S)


def test_a_hump_of_kept_rows_on_disk_is_timed_again(pair, file, monkeypatch):
    # Rows 3 to 8 kept while another job shared the cores: dearer than T(9), which no
    # machine makes so. Each is timed again; the rows that agree are not.
    quiet = {k: 0.010 + 0.0006 * k for k in range(1, CAP + 2)}
    hump = quiet | {k: 3 * quiet[k] for k in range(3, CAP + 1)}
    earlier_process(file, hump)
    checking = new_process(pair, file)
    calls = timings_now(monkeypatch, pair, quiet)
    verify_s = calibrate(checking)
    assert calls[:2] == [("target", [1, 2, CAP + 1]), ("target", list(range(3, CAP + 1)))]
    assert verify_s == pytest.approx(quiet)
    assert checking.learnt.verify_s == pytest.approx(quiet)


def test_a_row_a_calibration_timed_a_few_times_never_cuts_one_the_runs_timed_often(pair, file):
    # T(1) the median of the runs' 177 passes; T(2) a calibration's three, on a quiet
    # moment. The curve the next run starts from keeps T(1) as the runs paid it.
    earlier = LearntState()
    for rows, seconds, timings in ((1, 0.023, 177), (2, 0.015, 3), (CAP + 1, 0.026, 13)):
        earlier.keep_verify(rows, seconds, timings)
    earlier.precision("none").draft_s, earlier.precision("none").prefill_s = DRAFT_S, READ_S
    learnt_store.save(file, earlier)
    checking = new_process(pair, file)
    verify_s, _, _ = engine.calibrated(checking, "none", CAP, model=True)
    assert verify_s[1] == pytest.approx(0.023) and verify_s[2] == pytest.approx(0.023)
    assert verify_s[CAP + 1] == pytest.approx(0.026)
