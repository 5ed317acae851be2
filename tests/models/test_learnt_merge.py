"""Several processes writing one learnt file: each save merges what its writer learnt into
what the file holds, so that no writer's observation is lost to another's stale copy; a
refresh brings other writers' learning in; crashed writers' temporary files go; and a save
that cannot lock still saves."""

from __future__ import annotations

import fcntl
import logging
import multiprocessing
import os
import threading
import time

import pytest

from assisted.core.settings import DrafterKind
from assisted.models import learnt_store
from assisted.models.learnt_store import LearntFile
from assisted.policy.learnt import LearntState

A, L = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP
KEY = {"pair": "p", "machine": "cpu"}
# How long a test waits for a thread's event that takes milliseconds, before it fails rather
# than hangs: generous, as a busy 2-core machine can leave a thread unscheduled for seconds.
WAIT_S = 60.0


@pytest.fixture
def file(tmp_path) -> LearntFile:
    """A learnt file that an earlier process wrote: T(1), T(9), and "none" acceptance."""
    kept = LearntFile(tmp_path / "p.json", KEY)
    earlier = LearntState(verify_s={1: 0.5, 9: 0.9})
    earlier.precision("none").acceptance = {(A, False, 0): ([1.0], [2.0])}
    learnt_store.save(kept, earlier)
    return kept


def acceptance(state: LearntState) -> dict:
    return {name: p.acceptance for name, p in state.precisions.items() if p.acceptance}


def test_two_writers_that_learnt_different_things_both_end_on_disk(file):
    a = learnt_store.load(file)
    b = learnt_store.load(file)  # read before A saved: a stale copy from then on
    # A timed T(1) and T(9) and drafted in int8.
    a.verify_s.update({1: 0.01, 9: 0.05})
    int8 = a.precision("int8")
    int8.draft_s, int8.prefill_s = 0.003, 0.0004
    int8.acceptance = {(A, False, 0): ([3.0], [4.0])}
    learnt_store.save(file, a)
    # B drafted in "none": its run left new counts for lookup and the old ones for the rest.
    b.precision("none").acceptance[L, True, 2] = ([5.0], [6.0])
    learnt_store.save(file, b)

    expected = {
        "none": {(A, False, 0): ([1.0], [2.0]), (L, True, 2): ([5.0], [6.0])},
        "int8": {(A, False, 0): ([3.0], [4.0])},
    }
    on_disk = learnt_store.load(file)
    assert on_disk.verify_s == {1: 0.01, 9: 0.05}  # B's stale rows did not undo A's
    assert (on_disk.precision("int8").draft_s, on_disk.precision("int8").prefill_s) == (
        0.003,
        0.0004,
    )
    assert acceptance(on_disk) == expected
    assert b == on_disk  # B's save brought A's learning into B's memory too
    learnt_store.save(file, a)  # A learnt nothing since: its stale "none" stays off the file
    assert learnt_store.load(file) == on_disk == a


def test_a_row_both_writers_refined_holds_the_later_ones_value(file):
    a, b = learnt_store.load(file), learnt_store.load(file)
    a.verify_s[1] = 0.2
    learnt_store.save(file, a)
    b.verify_s[1] = 0.3
    learnt_store.save(file, b)
    assert learnt_store.load(file).verify_s == {1: 0.3, 9: 0.9}


def _write_many(file: LearntFile, state: LearntState, index: int, rounds: int) -> None:
    """One writer: a row and a precision of its own, and T(1), which all of them refine."""
    for r in range(1, rounds + 1):
        state.verify_s[100 + index] = r / 1000
        state.verify_s[1] = index + r / 1000
        own = state.precision(f"p{index}")
        own.draft_s = r / 1000
        own.acceptance = {(A, False, 0): ([float(r)], [float(r + 1)])}
        if r % 5 == 0:
            learnt_store.refresh(file, state)
        learnt_store.save(file, state)


def test_many_processes_saving_at_once_lose_no_writers_observation(file):
    writers, rounds = 4, 40
    stale = learnt_store.load(file)  # every writer forks from this copy, as ZeroGPU's do
    context = multiprocessing.get_context("fork")
    processes = [
        context.Process(target=_write_many, args=(file, stale, index, rounds))
        for index in range(writers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * writers

    on_disk = learnt_store.load(file)
    for index in range(writers):
        assert on_disk.verify_s[100 + index] == rounds / 1000
        own = on_disk.precision(f"p{index}")
        assert own.draft_s == rounds / 1000
        assert own.acceptance == {(A, False, 0): ([float(rounds)], [float(rounds + 1)])}
    # The row they all refined holds one writer's last value, whichever saved last.
    assert on_disk.verify_s[1] in {index + rounds / 1000 for index in range(writers)}
    assert on_disk.verify_s[9] == 0.9  # what none of them changed stays as the file had it
    assert list(file.path.parent.glob("*.tmp")) == []


def test_a_refresh_brings_another_writers_learning_in_and_keeps_what_is_unsaved(file):
    worker = learnt_store.load(file)
    other = learnt_store.load(file)
    other.verify_s[5] = 0.6
    other.precision("int8").draft_s = 0.002
    other.precision("none").acceptance[A, False, 0] = ([7.0], [8.0])
    learnt_store.save(file, other)
    worker.verify_s[3] = 0.4  # timed here, not saved yet
    worker.precision("int8").acceptance = {(L, False, 4): ([1.0], [1.0])}

    learnt_store.refresh(file, worker)
    assert worker.verify_s == {1: 0.5, 3: 0.4, 5: 0.6, 9: 0.9}
    assert worker.precision("int8").draft_s == 0.002
    assert acceptance(worker) == {
        "none": {(A, False, 0): ([7.0], [8.0])},
        "int8": {(L, False, 4): ([1.0], [1.0])},
    }
    assert learnt_store.load(file).verify_s == {1: 0.5, 5: 0.6, 9: 0.9}  # refresh wrote nothing
    learnt_store.save(file, worker)  # what the worker learnt is still its own to write
    assert learnt_store.load(file) == worker


def test_costs_a_refresh_brings_in_read_as_loaded_and_costs_timed_here_as_timed(file):
    worker = learnt_store.load(file)
    other = learnt_store.load(file)
    other.precision("int8").draft_s = 0.002
    learnt_store.save(file, other)
    learnt_store.refresh(file, worker)
    assert worker.timed_s == 0
    assert learnt_store.calibration(worker, file).source == "disk"
    timing = worker.timed_here()
    timing.seconds, timing.fresh = 1.5, True  # as `calibration.calibrate` records a calibration
    learnt_store.refresh(file, worker)
    assert learnt_store.calibration(worker, file).source == "timed"


def test_acceptance_kept_apart_neither_reaches_the_file_nor_takes_the_files(file):
    app = learnt_store.load(file)
    other = learnt_store.load(file)
    with app.acceptance_apart():
        assert acceptance(app) == {}
        app.precision("none").acceptance = {(A, False, 0): ([0.0], [9.0])}  # a benchmark's
        app.verify_s[3] = 0.3
        other.precision("none").acceptance[A, False, 0] = ([2.0], [3.0])
        learnt_store.save(file, other)
        learnt_store.save(file, app)
        assert acceptance(app) == {"none": {(A, False, 0): ([0.0], [9.0])}}  # its own still
    on_disk = learnt_store.load(file)
    assert on_disk.verify_s[3] == 0.3  # the costs are kept
    assert acceptance(on_disk) == {"none": {(A, False, 0): ([2.0], [3.0])}}  # the other's
    assert acceptance(app) == {"none": {(A, False, 0): ([1.0], [2.0])}}  # back as it was
    # The app learnt nothing since it last saw the file: its next save brings the other's
    # counts in and writes back nothing of its older ones.
    learnt_store.save(file, app)
    assert acceptance(app) == acceptance(on_disk) == acceptance(learnt_store.load(file))


def test_a_save_removes_the_temporary_files_crashed_writers_left(file):
    folder = file.path.parent
    crashed = folder / "p.json.abcd1234.tmp"
    writing = folder / "p.json.efgh5678.tmp"  # a writer that has not locked: being written
    not_ours = folder / "notes.tmp"
    for path in (crashed, writing, not_ours):
        path.write_text("{")
    old = time.time() - learnt_store.STALE_TMP_S - 60
    os.utime(crashed, (old, old))
    os.utime(not_ours, (old, old))
    learnt_store.save(file, learnt_store.load(file))
    assert not crashed.exists()
    assert writing.exists() and not_ours.exists()


def test_a_save_waits_for_the_lock_and_past_a_hung_holder_saves_without_it(
    file, monkeypatch, caplog
):
    monkeypatch.setattr(learnt_store, "LOCK_TIMEOUT_S", 0.3)
    state = learnt_store.load(file)
    state.verify_s[2] = 0.2
    refused, looked = threading.Event(), threading.Event()
    flock = fcntl.flock

    def held_until_looked(*args):
        # The saver's tries at the held lock are refused as ever, but it goes on from its first
        # refusal only once the test has looked at the file: however late either thread
        # runs, the saver has tried the lock and not yet saved when the test looks (its
        # timeout, started before then, may pass meanwhile).
        try:
            return flock(*args)
        except BlockingIOError:
            refused.set()
            looked.wait(WAIT_S)
            raise

    with open(f"{file.path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        monkeypatch.setattr(fcntl, "flock", held_until_looked)
        saver = threading.Thread(target=learnt_store.save, args=(file, state))
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="assisted.models.learnt_store"):
            saver.start()
            assert refused.wait(WAIT_S)
            assert learnt_store.load(file).verify_s.get(2) is None  # it waits on the lock
            looked.set()
            saver.join(WAIT_S)
    assert time.monotonic() - started >= 0.3
    assert f"saving {file.path} without a lock" in caplog.text
    assert learnt_store.load(file).verify_s[2] == 0.2


def test_where_locking_fails_a_save_still_saves_and_says_so_once(file, monkeypatch, caplog):
    def refuse(*args):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)
    state = learnt_store.load(file)
    with caplog.at_level(logging.WARNING, logger="assisted.models.learnt_store"):
        for seconds in (0.2, 0.3):
            state.verify_s[2] = seconds
            learnt_store.save(file, state)
    assert learnt_store.load(file).verify_s[2] == 0.3
    assert caplog.text.count("without a lock") == 1


def test_two_writers_in_different_bands_both_end_on_disk_beside_greedys(file):
    a, b = learnt_store.load(file), learnt_store.load(file)
    a_none = a.precision("none")
    a_none.sampled["t<=0.5"] = {(A, False, 0): ([3.0], [4.0])}
    a_none.sampled_draft_s = 0.007
    learnt_store.save(file, a)
    # B read before A saved: its stale copy has no bands. It learnt at a higher temperature.
    b.precision("none").sampled["t>1"] = {(A, False, 0): ([1.0], [4.0])}
    learnt_store.save(file, b)

    on_disk = learnt_store.load(file).precision("none")
    assert on_disk.sampled == {
        "t<=0.5": {(A, False, 0): ([3.0], [4.0])},
        "t>1": {(A, False, 0): ([1.0], [4.0])},
    }
    assert on_disk.sampled_draft_s == 0.007  # B's stale None did not undo A's time
    assert on_disk.acceptance == {(A, False, 0): ([1.0], [2.0])}  # greedy's, as the file had
    assert b.precision("none").sampled == on_disk.sampled  # B's save brought A's band in


def test_one_band_refined_by_two_writers_holds_the_later_ones_counts(file):
    a, b = learnt_store.load(file), learnt_store.load(file)
    a.precision("none").sampled["t<=1"] = {(A, False, 0): ([1.0], [2.0])}
    learnt_store.save(file, a)
    b.precision("none").sampled["t<=1"] = {(A, False, 0): ([2.0], [2.0])}
    learnt_store.save(file, b)
    assert learnt_store.load(file).precision("none").sampled == {
        "t<=1": {(A, False, 0): ([2.0], [2.0])}
    }
