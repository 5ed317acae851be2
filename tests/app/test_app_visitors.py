"""Visitors who leave, over HTTP through `gradio_client`: a request cancelled or
disconnected before its turn never takes the device, and one that is running stops after
its current step. Also: a pair in memory goes straight to the line, and a refused input
is one line in the server's log."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

gradio_client = pytest.importorskip("gradio_client")

import gradio.routes  # noqa: E402
from gradio_client.client import Job  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

import app  # noqa: E402
from assisted.engine import decoding  # noqa: E402
from assisted.engine.observe import StepObserver  # noqa: E402
from assisted.models import pairs  # noqa: E402
from assisted.ui.pair_access import YOUR_TURN  # noqa: E402
from tests.serve import launch  # noqa: E402

# A visitor in a process of its own, which the test kills: its connections close as a
# closed page's or a dead client's do. It prints the first line of each status it gets.
VISITOR = """
import sys
from gradio_client import Client

url, prompt, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
job = Client(url, verbose=False).submit(
    prompt=prompt, pair="tiny", max_new_tokens=tokens, schedule="constant", api_name="/compare"
)
for values in job:
    print(values[0].splitlines()[0], flush=True)
"""
# How long a test waits for an event before it fails rather than hangs: generous, as a busy
# 2-core machine can leave a thread or a request unserved for seconds. No test passes by
# an event coming within it: each asserts what happened, in steps or in order.
WAIT_S = 60.0


def inputs(prompt: str, **changes) -> dict:
    """The /compare endpoint's inputs: greedy, the tiny pair."""
    values = {"prompt": prompt, "pair": "tiny", "max_new_tokens": 24, "schedule": "constant"}
    return {**values, **changes}


class Recorded:
    """The app's comparison entry point, recording the prompts whose GPU work started."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def compare(self, request):
        self.started.append(request.prompt)
        yield from app.GPU_CALLS["compare"](request)


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture(scope="module")
def server(tiny_dirs, recorded):
    registry = {"tiny": pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))}
    config = app.AppConfig(registry=registry, default_pair="tiny", dtype="float32")
    demo, url = launch(config, {**app.GPU_CALLS, "compare": recorded.compare})
    yield url
    demo.close()


@pytest.fixture
def client(server):
    return gradio_client.Client(server, verbose=False)


@pytest.fixture
def device_held():
    """The device, held as by a request using it; given back at the end of the test."""
    holder = app._device.turn()
    list(holder.waiting())
    yield holder
    holder.leave()


@pytest.fixture
def steps(monkeypatch) -> list[str]:
    """The name of the thread of each `StepObserver.put`: a run's prompt, then each of its
    target steps, in order (after `slow_steps`' wait, where a test uses it)."""
    names: list[str] = []
    put = StepObserver.put

    def counted_put(self, value):
        put(self, value)
        names.append(threading.current_thread().name)

    monkeypatch.setattr(StepObserver, "put", counted_put)
    return names


@pytest.fixture
def cancel_heard(monkeypatch) -> threading.Event:
    """Set as the server begins a request's cancel. Gradio's /cancel cancels the request's
    task (`cancel_tasks`, before its first await), then waits for the request's generator
    to yield. The event is set in the same stretch of the event loop, so nothing the test
    does after it (giving the device back) can resume the request before its cancel."""
    heard = threading.Event()
    cancel_tasks = gradio.routes.cancel_tasks

    async def heard_then_cancelled(task_ids):
        heard.set()
        return await cancel_tasks(task_ids)

    monkeypatch.setattr(gradio.routes, "cancel_tasks", heard_then_cancelled)
    return heard


@pytest.fixture
def cancelled(monkeypatch) -> threading.Event:
    """Set once a client's `Job.cancel()` has returned: the server has answered its /cancel,
    which ends once the request's generator has been closed."""
    done = threading.Event()
    cancel = Job.cancel

    def cancel_then_tell(self):
        result = cancel(self)
        done.set()
        return result

    monkeypatch.setattr(Job, "cancel", cancel_then_tell)
    return done


def wait_for(condition, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def in_line() -> int:
    return len(app._device._line)


def running_generations() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("generate-")]


def waiting(job) -> None:
    """Until `job` says it waits for the device."""
    for values in job:
        if "Waiting for the device" in values[0]:
            return
    pytest.fail("the request never waited for the device")


def a_visitor(url: str, prompt: str, tokens: int = 24) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", VISITOR, url, prompt, str(tokens)],
        stdout=subprocess.PIPE,
        text=True,
    )


def until_it_reads(visitor: subprocess.Popen, words: str) -> None:
    for line in visitor.stdout:
        if words in line:
            return
    pytest.fail(f"the visitor never read {words!r}")


def test_a_request_for_a_pair_in_memory_neither_fetches_nor_checks(client, monkeypatch):
    client.predict(**inputs("first"), api_name="/compare")  # the pair is in memory now

    def refused(*args, **kwargs):
        raise AssertionError("fetched or checked a pair in memory")

    monkeypatch.setattr(pairs, "fetching", refused)
    monkeypatch.setattr(pairs, "check_pair", refused)
    job = client.submit(**inputs("second"), api_name="/compare")
    first, *_ = next(iter(job))
    assert first == YOUR_TURN  # its place comes first: the front of the line
    assert job.result()[-1]["identical"] is True


def test_a_request_cancelled_before_its_turn_never_takes_the_device(
    client, recorded, device_held, cancel_heard
):
    job = client.submit(**inputs("cancelled while waiting"), api_name="/compare")
    waiting(job)
    cancelling = threading.Thread(target=job.cancel)
    cancelling.start()
    assert cancel_heard.wait(WAIT_S)  # the cancel under way while the request waits
    device_held.leave()  # its turn comes as it is cancelled
    cancelling.join(WAIT_S)
    wait_for(lambda: in_line() == 0)
    after = client.predict(**inputs("after the cancelled one"), api_name="/compare")
    assert after[-1]["identical"] is True
    assert "cancelled while waiting" not in recorded.started
    assert recorded.started[-1] == "after the cancelled one"


def test_a_request_whose_visitor_went_before_its_turn_never_takes_the_device(
    server, client, recorded, device_held
):
    visitor = a_visitor(server, "gone while waiting")
    until_it_reads(visitor, "Waiting for the device")
    visitor.kill()
    visitor.wait()
    wait_for(lambda: in_line() == 1)  # the gone visitor's place is given up
    device_held.leave()
    after = client.predict(**inputs("after the gone one"), api_name="/compare")
    assert after[-1]["identical"] is True
    assert "gone while waiting" not in recorded.started


def test_a_cancelled_run_stops_after_its_current_step(client, slow_steps, steps):
    job = client.submit(
        **inputs("cancelled while running", max_new_tokens=200), api_name="/compare"
    )
    for values in job:
        if "Running plain" in values[0]:
            break
    running = len(steps)  # the steps of the pair's first use, a warm-up, come before
    assert running_generations()
    job.cancel()  # returns once the server has closed the request's generator
    cancelled = len(steps)
    wait_for(lambda: not running_generations())
    assert len(steps) - cancelled <= 1  # the step it was in, at most
    ran = steps[running:]
    assert set(ran) <= {"generate-plain"} and len(ran) < 200  # stopped mid-run, no assisted
    assert in_line() == 0
    after = client.predict(**inputs("after the cancelled run"), api_name="/compare")
    assert after[-1]["plain"]["new_tokens"] == 24


def test_a_run_whose_visitor_went_stops_after_its_current_step(server, client, slow_steps, steps):
    visitor = a_visitor(server, "gone while running", tokens=200)
    until_it_reads(visitor, "Running plain")
    running = len(steps)
    visitor.kill()
    visitor.wait()
    # Gradio notices a closed connection as it sends the next update (a few per second, a
    # few steps apart): the run stops then, long before its 200 steps, and none follows.
    wait_for(lambda: not running_generations())
    ran = steps[running:]
    assert set(ran) <= {"generate-plain"} and len(ran) < 200
    # The request's place is given up as its generator closes, after the run's thread has
    # ended: a moment later, on a busy machine (no client call waits for that close here).
    wait_for(lambda: in_line() == 0)
    after = client.predict(**inputs("after the gone run"), api_name="/compare")
    assert after[-1]["plain"]["new_tokens"] == 24


def test_a_refused_input_is_one_line_in_the_log_and_a_fault_keeps_its_traceback(
    client, capfd, monkeypatch
):
    capfd.readouterr()
    with pytest.raises(AppError, match="5000"):
        client.predict(**inputs("too long", max_new_tokens=5000), api_name="/compare")
    with pytest.raises(AppError, match="prompt is empty"):
        client.predict(**inputs("  "), api_name="/compare")
    with pytest.raises(AppError, match="context"):  # found inside the GPU entry point
        client.predict(**inputs("word " * 300), api_name="/compare")
    log = capfd.readouterr().err
    refused = [line for line in log.splitlines() if line.startswith("Refused (")]
    assert len(refused) == 3, log
    assert refused[0] == "Refused (Input): Value 5000 is greater than maximum value 1024."
    assert refused[1] == "Refused (Settings): the prompt is empty: type something to generate from"
    assert refused[2].startswith("Refused (Settings): the prompt has") and "context" in refused[2]
    assert "Traceback" not in log

    def broken(*args, **kwargs):
        yield decoding.Phase("plain")
        raise RuntimeError("device on fire")

    monkeypatch.setattr(decoding, "compare", broken)
    with pytest.raises(AppError, match="device on fire"):
        client.predict(**inputs("a fault"), api_name="/compare")
    log = capfd.readouterr().err
    assert "Traceback" in log and "device on fire" in log


def test_the_load_check_tells_each_visitors_outcome_on_loopback_only(
    server, device_held, cancelled
):
    from lab import visitors

    with pytest.raises(SystemExit, match="loopback only"):
        visitors.loopback_only("https://huggingface.co/spaces/owner/assisted-decoding")
    assert visitors.loopback_only(server.rstrip("/")) == server
    waiting_at_turn: list[int] = []

    def give_the_device_back() -> None:
        # The third cancels while it waits (3–4 s after its submit, `visitors.burst`); then,
        # with the other two waiting behind the holder, the device is given back.
        try:
            cancelled.wait(WAIT_S)
            wait_for(lambda: in_line() == 3)
        finally:  # the burst's visitors never wait past this thread
            waiting_at_turn.append(in_line() - 1)
            device_held.leave()

    giving_back = threading.Thread(target=give_the_device_back)
    giving_back.start()
    visits, config_s = visitors.burst(server, 3, 0.1, "tiny", 8, cancel_every=3)
    giving_back.join(WAIT_S)
    assert [visit.outcome for visit in visits] == ["served", "served", "cancelled"]
    assert waiting_at_turn == [2]  # each served visitor waited for the device
    # Each heard its place, which comes in milliseconds: the third in the 3–4 s before its
    # cancel, the others in the seconds they waited for it, before their results.
    assert all(visit.place_s is not None for visit in visits)
    assert all(visit.place_s < visit.result_s for visit in visits[:2])
    # No /config fetch failed or ran into its timeout (a real client's, the promise itself),
    # for fetches that take milliseconds.
    assert config_s and max(config_s) < visitors.CONFIG_TIMEOUT_S
