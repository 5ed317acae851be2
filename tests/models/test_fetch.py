"""Fetching model files apart from loading them: shared jobs, progress, cancellation and
failure, on a fake Hub that serves tiny model folders. Nothing is downloaded."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from transformers import MambaConfig

from assisted.models import fetch, pairs
from assisted.models.pairs import PairError, custom_pair

REPO = "tiny-hub/model"


class FakeHub:
    """Stands in for `fetch.hub_files`: the config at once, then the weights in small steps
    of progress until `release` is set (or, with `error`, a failure half-way)."""

    def __init__(self, folder: Path, error: Exception | None = None):
        self.folder = folder
        self.error = error
        self.release = threading.Event()
        self.weight_calls = 0
        self.ended_by: BaseException | None = None

    def __call__(self, repo_id: str, patterns: list[str], progress) -> Path:
        if patterns == fetch.CONFIG_FILES:
            return self.folder
        self.weight_calls += 1
        total, done = 1_000_000, 0
        try:
            while not self.release.wait(0.01):
                done = min(done + 10_000, total - 1)
                progress(done, total)
                if self.error and done >= total // 2:
                    raise self.error
        except BaseException as error:
            self.ended_by = error
            raise
        progress(total, total)
        return self.folder


@pytest.fixture(autouse=True)
def fresh_jobs(monkeypatch):
    monkeypatch.setattr(fetch, "_fetched", {})
    monkeypatch.setattr(fetch, "POLL_S", 0.02)
    yield
    assert not fetch._jobs, "a job outlived its test"


@pytest.fixture
def hub(tiny_dirs, monkeypatch) -> FakeHub:
    fake = FakeHub(tiny_dirs["target"])
    monkeypatch.setattr(fetch, "hub_files", fake)
    return fake


def in_background(function, *args) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def waiters(ref: str) -> int:
    job = fetch._jobs.get(ref)
    return job.waiters if job else 0


def test_requests_for_one_model_share_one_download(hub, tiny_dirs):
    spec = custom_pair(REPO, None)
    runs = [in_background(pairs.fetch_pair, spec) for _ in range(2)]
    wait_for(lambda: waiters(REPO) == 2)
    hub.release.set()
    for thread, _ in runs:
        thread.join(10)
    assert hub.weight_calls == 1
    assert [outcome["value"] for _, outcome in runs] == [{REPO: str(tiny_dirs["target"])}] * 2
    assert pairs.fetch_pair(spec) == {REPO: str(tiny_dirs["target"])}  # done: no new job
    assert hub.weight_calls == 1


def test_a_waiter_sees_the_download_progress(hub):
    steps = pairs.fetching(custom_pair(REPO, None))
    seen = [next(steps) for _ in range(5)]
    hub.release.set()
    seen.extend(steps)
    assert any(message.startswith(f"Downloading {REPO}: ") for message, _ in seen)
    fractions = [fraction for _, fraction in seen if fraction is not None]
    assert fractions and all(0 < fraction <= 1 for fraction in fractions)
    assert fractions == sorted(fractions)


def test_a_download_no_one_waits_for_is_cancelled_and_leaves_nothing(hub):
    steps = pairs.fetching(custom_pair(REPO, None))
    next(steps)
    steps.close()  # the visitor went away (Gradio closes the generator of a cancelled job)
    wait_for(lambda: hub.ended_by is not None and not fetch._jobs)
    assert isinstance(hub.ended_by, fetch.FetchCancelled)
    assert fetch.fetched(REPO) is None


def test_an_exiting_program_cancels_its_downloads(hub, monkeypatch):
    thread, outcome = in_background(pairs.fetch_pair, custom_pair(REPO, None))
    wait_for(lambda: waiters(REPO) == 1)
    monkeypatch.setattr(fetch, "_exiting", threading.Event())
    fetch._cancel_at_exit()  # what atexit runs, with the waiter still there
    assert isinstance(hub.ended_by, fetch.FetchCancelled) and not fetch._jobs
    thread.join(10)
    assert "exiting" in str(outcome["error"])


def test_a_download_goes_on_while_anyone_still_waits(hub, tiny_dirs):
    leaving = pairs.fetching(custom_pair(REPO, None))
    next(leaving)
    thread, outcome = in_background(pairs.fetch_pair, custom_pair(REPO, None))
    wait_for(lambda: waiters(REPO) == 2)
    leaving.close()
    time.sleep(0.1)  # several progress reports: none of them cancels
    hub.release.set()
    thread.join(10)
    assert outcome["value"] == {REPO: str(tiny_dirs["target"])}
    assert hub.ended_by is None and hub.weight_calls == 1


def test_a_failed_download_is_a_clear_error_and_the_next_request_retries(hub):
    hub.error = OSError("connection reset by peer")
    spec = custom_pair(REPO, None)
    with pytest.raises(PairError, match=f"cannot fetch '{REPO}': connection reset by peer"):
        pairs.fetch_pair(spec)
    assert fetch.fetched(REPO) is None and not fetch._jobs
    hub.error = None
    hub.release.set()
    assert pairs.fetch_pair(spec) == {REPO: str(hub.folder)}
    assert hub.weight_calls == 2


def test_a_model_that_cannot_be_used_costs_only_its_config(hub, tmp_path):
    MambaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1).save_pretrained(tmp_path)
    hub.folder = tmp_path
    with pytest.raises(PairError, match="cannot be cropped"):
        pairs.fetch_pair(custom_pair(REPO, None))
    assert hub.weight_calls == 0


def test_a_failed_hub_download_deletes_its_partial_files(tmp_path, monkeypatch):
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    blobs = tmp_path / "models--tiny-hub--model" / "blobs"

    def interrupted(repo_id, **kwargs):
        blobs.mkdir(parents=True)
        (blobs / "aaaa").write_bytes(b"a finished file")
        (blobs / "bbbb.incomplete").write_bytes(b"half of a fi")
        raise OSError("connection reset by peer")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", interrupted)
    with pytest.raises(OSError, match="connection reset"):
        fetch.hub_files(REPO, fetch.MODEL_FILES, lambda done, total: None)
    assert sorted(path.name for path in blobs.iterdir()) == ["aaaa"]


def test_progress_bars_report_bytes_written_and_carry_cancellation():
    reports: list[tuple[int, int]] = []
    bars = fetch._progress_bars(lambda done, total: reports.append((done, total)))
    # As snapshot_download makes them: bytes received (Xet, a guessed total), bytes
    # written (against the files' sizes), and a count of files.
    received = bars(desc="Downloading bytes", total=0, unit="B", unit_scale=True)
    written = bars(desc="Reconstructing (incomplete total...)", total=0, unit="B")
    files = bars(desc="Fetching 3 files", total=3)
    written.total = 2_000
    received.update(900)
    written.update(500)
    files.update(1)
    written.update(700)
    assert reports == [(500, 2_000), (1_200, 2_000)]

    def cancelled(done: int, total: int) -> None:
        raise fetch.FetchCancelled("no request waits")

    with pytest.raises(fetch.FetchCancelled):
        fetch._progress_bars(cancelled)(total=10, unit="B").update(1)


def test_a_forked_child_forgets_the_fetches_running_in_its_parent():
    """A GPU worker forked mid-fetch neither waits on a job no thread of its own runs nor
    on a lock that a parent's thread held at the fork."""
    fetch._jobs["owner/model"] = fetch._Job("owner/model", "Fetching owner/model")
    try:
        with fetch._fetches.lock:
            pid = os.fork()
            if pid == 0:  # the child: exit 0 only if it starts clean
                clean = not fetch._jobs and fetch._fetches.lock.acquire(timeout=1)
                os._exit(0 if clean else 1)
    finally:
        fetch._jobs.pop("owner/model")
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
