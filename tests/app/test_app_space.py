"""The app as a shared Space: a download holds up no one, and the operator's settings.

Custom Hub ids are served by a fake `fetch.hub_files` that hands out a tiny model folder
once the test lets it, reporting progress meanwhile; nothing is downloaded."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import gradio as gr
import pytest

gradio_client = pytest.importorskip("gradio_client")

import app  # noqa: E402
from assisted.models import fetch, pairs  # noqa: E402
from assisted.models.registry import DEFAULT_PAIR, PAIRS  # noqa: E402
from tests.app.test_app import settings  # noqa: E402
from tests.serve import launch  # noqa: E402

# How long a test waits for an event before it fails rather than hangs: generous, as a busy
# 2-core machine can leave a request unserved for seconds.
WAIT_S = 60.0
HUB_ID = "tiny-hub/model"


@pytest.fixture(scope="module")
def registry(tiny_dirs) -> dict[str, pairs.PairSpec]:
    return {"tiny": pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))}


@pytest.fixture(scope="module")
def server(registry):
    # As on a Space: custom pairs from the Hub, no local folders.
    demo, url = launch(app.AppConfig(registry=registry, default_pair="tiny", dtype="float32"))
    yield url
    demo.close()


class SlowHub:
    """Stands in for `fetch.hub_files`: the config at once; the weights half-way, then
    whole once the test sets `finish` (or a failure half-way, with `error`)."""

    def __init__(self, folder, error: Exception | None = None):
        self.folder = folder
        self.error = error
        self.weight_calls: list[str] = []
        self.finish = threading.Event()

    def __call__(self, repo_id, patterns, progress):
        if patterns == fetch.CONFIG_FILES:
            return self.folder
        self.weight_calls.append(repo_id)
        progress(1, 2)
        if self.error:
            raise self.error
        self.finish.wait(WAIT_S)
        return self.folder


@pytest.fixture
def slow_hub(tiny_dirs, monkeypatch) -> Iterator[SlowHub]:
    hub = SlowHub(tiny_dirs["other"])
    monkeypatch.setattr(fetch, "hub_files", hub)
    monkeypatch.setattr(fetch, "_fetched", {})
    yield hub
    hub.finish.set()  # a download a failed test left waiting


def clients(url: str, count: int) -> list:
    return [gradio_client.Client(url, verbose=False) for _ in range(count)]


def wait_for(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_slow_download_holds_up_no_one_comparing_on_a_loaded_pair(server, slow_hub):
    first, second, comparer = clients(server, 3)
    comparer.predict(**settings(), api_name="/compare")  # the tiny pair is in memory
    custom = settings(pair="custom", custom_target=HUB_ID, custom_assistant="")
    downloads = [client.submit(**custom, api_name="/compare") for client in (first, second)]
    wait_for(lambda: slow_hub.weight_calls)

    # The download ends only once the comparison has: one that waited for it would not end.
    comparing = comparer.submit(**settings(), api_name="/compare")
    result = comparing.result(timeout=WAIT_S)[-1]
    assert result["identical"] is True
    # A visitor sees the download's progress while it waits for it (every `fetch.POLL_S`).
    wait_for(lambda: any(map(shows_progress, downloads[0].outputs())))
    slow_hub.finish.set()

    for job in downloads:
        assert job.result(timeout=WAIT_S)[-1]["pair"] == f"{HUB_ID} (prompt-lookup)"
    assert slow_hub.weight_calls == [HUB_ID]  # two visitors, one download


def shows_progress(values: tuple) -> bool:
    """Whether a /compare update's status tells the custom model's download and how far."""
    return f"Downloading {HUB_ID}" in values[0] and "%)" in values[0]


def test_a_failed_download_is_an_error_and_the_pairs_in_memory_stay_usable(server, slow_hub):
    slow_hub.error = OSError("connection reset by peer")
    visitor, comparer = clients(server, 2)
    broken = settings(pair="custom", custom_target="tiny-hub/broken", custom_assistant="")
    with pytest.raises(gradio_client.exceptions.AppError, match="connection reset by peer"):
        visitor.predict(**broken, api_name="/compare")
    assert fetch.fetched("tiny-hub/broken") is None and not fetch._jobs
    assert not [name for name in pairs.loaded_pairs() if "broken" in name]
    assert comparer.predict(**settings(), api_name="/compare")[-1]["identical"] is True


def test_custom_pairs_can_be_turned_off(registry):
    config = app.AppConfig(
        registry=registry, default_pair="tiny", dtype="float32", allow_custom=False
    )
    demo, url = launch(config)
    try:
        client = gradio_client.Client(url, verbose=False)
        custom = settings(pair="custom", custom_target=HUB_ID)
        refused = r"custom is not in the list of choices: \['tiny'\]"
        with pytest.raises(gradio_client.exceptions.AppError, match=refused):
            client.predict(**custom, api_name="/compare")
        assert client.predict(**settings(), api_name="/compare")[-1]["identical"] is True
    finally:
        demo.close()
    # The page's Load pair button is hidden, and its handler refuses too.
    [load_custom] = [block.fn for block in demo.fns.values() if block.name == "load_custom"]
    with pytest.raises(gr.Error, match="ASSISTED_ALLOW_CUSTOM=0"):
        next(load_custom(HUB_ID, ""))


def dropdown_choices(demo, elem_id: str) -> list[str]:
    [dropdown] = [block for block in demo.blocks.values() if block.elem_id == elem_id]
    return [value for _, value in dropdown.choices]


def test_operator_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("ASSISTED_PAIRS", " smollm2-1.7b, embedded-prompt-lookup ")
    monkeypatch.setenv("ASSISTED_ALLOW_CUSTOM", "0")
    config = app.AppConfig.from_env()
    assert list(config.registry) == ["smollm2-1.7b", "embedded-prompt-lookup"]
    assert config.default_pair == "smollm2-1.7b"  # the embedded pair is not offered
    assert config.allow_custom is False and config.allow_local is False
    demo = app.build_demo(config)
    assert dropdown_choices(demo, "pair") == ["smollm2-1.7b", "embedded-prompt-lookup"]
    assert dropdown_choices(demo, "bench-pair") == ["smollm2-1.7b", "embedded-prompt-lookup"]

    monkeypatch.setenv("ASSISTED_PAIRS", "embedded,no-such-pair")
    with pytest.raises(ValueError, match="unknown pairs: no-such-pair"):
        app.AppConfig.from_env()

    monkeypatch.delenv("ASSISTED_PAIRS")
    monkeypatch.delenv("ASSISTED_ALLOW_CUSTOM")
    config = app.AppConfig.from_env()
    assert config.registry == PAIRS and config.default_pair == DEFAULT_PAIR
    assert config.allow_custom is True
    assert dropdown_choices(app.build_demo(config), "pair")[-1] == app.CUSTOM


def test_a_request_waiting_for_the_device_sees_its_place_and_can_stop(server):
    client = gradio_client.Client(server, verbose=False)
    holder = app._device.turn()
    list(holder.waiting())  # another request is using the device
    try:
        job = client.submit(**settings(), api_name="/compare")
        for values in job:
            if "Waiting for the device" in values[0]:
                break
        assert "1 request ahead" in values[0]
        app._stops[f"{client.session_hash}:compare"].set()  # what Stop does for this session
        final = job.result()
    finally:
        holder.leave()
    assert "Stopped" in final[0] and final[-1] is None
