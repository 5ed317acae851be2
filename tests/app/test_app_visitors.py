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

from gradio_client.exceptions import AppError  # noqa: E402

import app  # noqa: E402
from assisted.engine import comparison  # noqa: E402
from assisted.models import pair_checks, pairs  # noqa: E402
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
        yield from app.stream_comparison(request)


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture(scope="module")
def server(tiny_dirs, recorded):
    registry = {"tiny": pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))}
    config = app.AppConfig(registry=registry, default_pair="tiny", dtype="float32")
    demo, url = launch(config, app.GpuCalls(recorded.compare, app.stream_benchmark))
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


def wait_for(condition, timeout_s: float = 15.0) -> None:
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
    monkeypatch.setattr(pair_checks, "check_pair", refused)
    job = client.submit(**inputs("second"), api_name="/compare")
    first, *_ = next(iter(job))
    assert first == YOUR_TURN  # its place comes first: the front of the line
    assert job.result()[-1]["identical"] is True


def test_a_request_cancelled_before_its_turn_never_takes_the_device(client, recorded, device_held):
    job = client.submit(**inputs("cancelled while waiting"), api_name="/compare")
    waiting(job)
    cancelling = threading.Thread(target=job.cancel)
    cancelling.start()
    time.sleep(0.3)  # the cancel under way while the request waits
    device_held.leave()  # its turn comes as it is cancelled
    cancelling.join(10)
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


def test_a_cancelled_run_stops_after_its_current_step(client, slow_steps):
    job = client.submit(
        **inputs("cancelled while running", max_new_tokens=200), api_name="/compare"
    )
    for values in job:
        if "Running plain" in values[0]:
            break
    assert running_generations()
    job.cancel()
    wait_for(lambda: not running_generations(), timeout_s=2.0)  # a step is 30 ms here
    assert in_line() == 0
    after = client.predict(**inputs("after the cancelled run"), api_name="/compare")
    assert after[-1]["plain"]["new_tokens"] == 24


def test_a_run_whose_visitor_went_stops_after_its_current_step(server, client, slow_steps):
    visitor = a_visitor(server, "gone while running", tokens=200)
    until_it_reads(visitor, "Running plain")
    visitor.kill()
    visitor.wait()
    # Gradio notices a closed connection as it sends the next update (a few per second).
    wait_for(lambda: not running_generations(), timeout_s=5.0)
    assert in_line() == 0
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
        yield comparison.Phase("plain")
        raise RuntimeError("device on fire")

    monkeypatch.setattr(comparison, "compare", broken)
    with pytest.raises(AppError, match="device on fire"):
        client.predict(**inputs("a fault"), api_name="/compare")
    log = capfd.readouterr().err
    assert "Traceback" in log and "device on fire" in log


def test_the_load_check_tells_each_visitors_outcome_on_loopback_only(server, device_held):
    from assisted.lab import visitors

    with pytest.raises(SystemExit, match="loopback only"):
        visitors.loopback_only("https://huggingface.co/spaces/owner/assisted-decoding")
    assert visitors.loopback_only(server.rstrip("/")) == server
    threading.Timer(5.0, device_held.leave).start()  # the third cancels while it waits
    visits, config_s = visitors.burst(server, 3, 0.1, "tiny", 8, cancel_every=3)
    assert [visit.outcome for visit in visits] == ["served", "served", "cancelled"]
    assert all(visit.place_s is not None and visit.place_s < 5 for visit in visits)
    assert all(visit.result_s > 4 for visit in visits[:2])  # each waited for the device
    assert config_s and max(config_s) < visitors.CONFIG_TIMEOUT_S
