"""The app on ZeroGPU, emulated (`tests.zerogpu`): each GPU call in a forked process, a
fresh one or a reused idle one, arguments and yields pickled, nothing flowing back.

Served over HTTP with a tiny pair loaded at start-up in the main process, as a Space loads
its default pair at import, and called through `gradio_client`. `pytest -k zerogpu` runs
them all."""

from __future__ import annotations

import json
import math
import os
import threading

import pytest
import torch

gradio_client = pytest.importorskip("gradio_client")

import app  # noqa: E402
from assisted.models import learnt_store, pairs  # noqa: E402
from assisted.ui import errors, gpu_time  # noqa: E402
from tests.app.test_app import settings  # noqa: E402
from tests.serve import launch  # noqa: E402
from tests.zerogpu import ZeroGPU  # noqa: E402


@pytest.fixture(scope="module")
def zerogpu():
    with pytest.MonkeyPatch.context() as patch:
        yield ZeroGPU(patch)


@pytest.fixture(scope="module")
def config(tiny_dirs):
    target, other = str(tiny_dirs["target"]), str(tiny_dirs["other"])
    registry = {
        "tiny": pairs.custom_pair(target, other),
        "tiny-lookup": pairs.custom_pair(target, None),
    }
    return app.AppConfig(
        registry=registry,
        default_pair="tiny",
        device="cpu",
        dtype="float32",
        allow_local=True,
        zerogpu=True,
    )


@pytest.fixture(scope="module")
def server(zerogpu, config):
    pairs._loaded.entries.clear()
    # At the start on a Space, in the thread that imported `spaces`: the default pair
    # alone loads (every fresh worker moves what is loaded), so `tiny-lookup` loads inside
    # the GPU calls.
    fetched = []  # the pairs whose files were fetched, loaded or not
    fetch = pairs.fetch_pair

    def recording(spec, *args, **kwargs):
        fetched.append(spec.name)
        return fetch(spec, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pairs, "fetch_pair", recording)
        app.preload(config)
        app._fetching_ahead.join(60)
    assert app._preloaded == {config.registry["tiny"].name}
    # The other pair is fetched ahead, behind the start, so its calls only load it.
    assert config.registry["tiny-lookup"].name in fetched
    # Pinned: a worker that loads other pairs keeps it, as the calls ask no time to load it.
    assert [key[0].name for key in pairs._loaded.pinned] == [config.registry["tiny"].name]
    demo, url = launch(config, zerogpu.calls())
    yield demo, url
    demo.close()
    app._preloaded.clear()
    pairs._loaded.pinned.clear()
    app._gpu_times.__init__(app.GPU_CALL_MAX_S)


@pytest.fixture
def client(server, zerogpu):
    zerogpu.reuse = True
    zerogpu.requests.clear()
    zerogpu.handler_calls.clear()
    return gradio_client.Client(server[1], verbose=False)


def in_a_handler_thread(function, *args) -> list:
    """`function(*args)`'s yields, run in a thread as Gradio runs a handler."""
    values: list = []
    thread = threading.Thread(target=lambda: values.extend(function(*args)))
    thread.start()
    thread.join(60)
    return values


def test_zerogpu_a_comparison_runs_in_a_forked_worker_and_nothing_loads_in_a_handler(
    client, zerogpu
):
    result = client.predict(**settings(), api_name="/compare")[-1]
    assert result["identical"] is True and result["plain"]["new_tokens"] > 0
    assert zerogpu.worker_pids[-1] != os.getpid()
    assert len(zerogpu.requests) == 1
    assert zerogpu.handler_calls == []  # CUDA is not emulated in a handler thread


def test_zerogpu_a_pair_not_loaded_at_start_up_loads_inside_the_call(server, client, zerogpu):
    job = client.submit(**settings(pair="tiny-lookup"), api_name="/compare")
    final = job.result()
    statuses = [values[0] for values in job.outputs()]
    assert any("loads inside the call" in status for status in statuses)
    assert any("inside this GPU call" in status for status in statuses), statuses
    assert final[-1]["identical"] is True
    assert zerogpu.handler_calls == []
    assert "tiny-lookup" not in " ".join(pairs.loaded_pairs())  # loaded in the worker only
    # The pair dropdown's status says where the pair loads, and loads nothing itself.
    load_chosen = next(b.fn for b in server[0].fns.values() if b.name == "load_chosen")
    assert "loads inside each GPU call" in in_a_handler_thread(load_chosen, "tiny-lookup")[-1]
    assert "**Ready:** `" in in_a_handler_thread(load_chosen, "tiny")[-1]  # in memory
    assert zerogpu.handler_calls == []


def test_zerogpu_a_shootout_runs_in_a_forked_worker_that_loads_its_pair(client, zerogpu, config):
    app._gpu_times.__init__(app.GPU_CALL_MAX_S)  # nothing measured yet
    name = config.registry["tiny-lookup"].name  # not loaded at start-up
    zerogpu.reuse = False  # a fresh fork of the main process, which does not hold the pair
    workers = len(zerogpu.worker_pids)
    inputs = {"prompt": "def add(a, b):", "pair": "tiny-lookup", "max_new_tokens": 8}
    job = client.submit(**inputs, repeats=1, api_name="/shootout")
    status, *_, result = job.result()
    assert status.startswith("**Done**") and result["lanes"]
    statuses = [values[0] for values in job.outputs()]
    assert any("inside this GPU call" in line for line in statuses), statuses
    assert len(zerogpu.worker_pids) == workers + 1 and zerogpu.worker_pids[-1] != os.getpid()
    assert len(zerogpu.requests) == 1 and zerogpu.handler_calls == []
    # What the call measured came back for the next call's request.
    assert app._gpu_times.runs(name, 8, 8, preloaded=False).measured


@pytest.mark.parametrize("api_name", ["/compare", "/benchmark"])
def test_zerogpu_only_a_call_that_set_its_pair_up_reports_a_set_up(
    client, zerogpu, monkeypatch, api_name
):
    """A reused worker that finds its pair warmed reports no set-up: its few seconds would
    price the next call, which may be a fresh fork's, as if it set up nothing."""
    # A known pace, so that each request is one call whatever earlier tests measured.
    app._gpu_times.__init__(app.GPU_CALL_MAX_S)
    app._gpu_times.note(gpu_time.CallReport(pairs.loaded_pairs()[0], None, 0.0, 0.05, 0.05))
    reports = []
    note = app._gpu_times.note

    def noting(report: gpu_time.CallReport) -> None:
        reports.append(report)
        note(report)

    monkeypatch.setattr(app._gpu_times, "note", noting)
    inputs = settings(max_new_tokens=8) if api_name == "/compare" else bench_inputs()
    zerogpu.reuse = False  # a fresh fork: it warms the pair up
    client.predict(**inputs, api_name=api_name)
    zerogpu.reuse = True  # the same worker: the pair is warm
    client.predict(**inputs, api_name=api_name)
    fresh, reused = reports
    assert fresh.setup_s is not None and fresh.plain_s_per_token is not None
    assert reused.setup_s is None and reused.plain_s_per_token is not None


def learnt_files(folder) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def test_zerogpu_workers_start_from_what_earlier_workers_learnt(client, zerogpu, learnt_dir):
    auto = settings(schedule="auto", draft_length=4, max_new_tokens=16)
    for path in learnt_dir.glob("*.json"):
        path.unlink()
    (main_pair,) = [p for p in pairs._loaded.entries.values() if p.spec.name.endswith("other")]
    main_pair.learnt = learnt_store.load(None)  # the main process learnt nothing

    zerogpu.reuse = False  # a fresh fork: it times the costs, and keeps them on disk
    first = client.predict(**auto, api_name="/compare")[-1]["assisted"]["calibration"]
    assert first["source"] == "timed" and first["file"]
    zerogpu.reuse = True  # the same worker again: it holds what it timed
    again = client.predict(**auto, api_name="/compare")[-1]["assisted"]["calibration"]
    assert zerogpu.worker_pids[-1] == zerogpu.worker_pids[-2]
    assert again["source"] == "timed"  # "calibrated once … kept for the next start"
    zerogpu.reuse = False  # a fresh fork of a main process that never calibrated
    fresh = client.predict(**auto, api_name="/compare")[-1]["assisted"]["calibration"]
    assert zerogpu.worker_pids[-1] != zerogpu.worker_pids[-2]
    assert fresh["source"] == "disk", "a fresh fork calibrated again"
    assert not main_pair.learnt.verify_s  # nothing flowed back to the main process
    [kept] = [f for f in learnt_files(learnt_dir) if f["key"]["pair"] == main_pair.spec.name]
    assert kept["verify_s"] and kept["precisions"]


def test_zerogpu_stop_ends_a_running_comparison_within_one_step(client, zerogpu, slow_steps):
    prompt = "Write a very long story about a fox."
    job = client.submit(**settings(prompt=prompt, max_new_tokens=200), api_name="/compare")
    for values in job:
        if "Running plain" in values[0]:
            break
    app._stops[f"{client.session_hash}:compare"].set()  # what the Stop button does
    final = job.result()
    assert "Stopped" in final[0]
    assert final[-1] is None or final[-1]["plain"]["stopped"]


def test_zerogpu_stop_ends_a_running_benchmark(client, zerogpu, slow_steps):
    inputs = bench_inputs(prompts_per_category=1, repeats=3, max_new_tokens=64)
    job = client.submit(**inputs, api_name="/benchmark")
    for values in job:
        if "Run 1 of 6 done" in values[0]:
            break
    else:
        pytest.fail(f"the benchmark never reported a finished run: {values[0]}")
    app._stops[f"{client.session_hash}:benchmark"].set()
    status, *_, report = job.result()
    assert "Stopped" in status and "of 6 timed runs" in status and report is None


def test_zerogpu_settings_that_cannot_run_are_refused_before_a_gpu_is_asked_for(client, zerogpu):
    # On ZeroGPU the device is CUDA, where the int8 assistant's CPU kernels cannot run.
    with pytest.raises(gradio_client.exceptions.AppError, match="uses CPU kernels"):
        client.predict(**settings(assistant_quant="int8"), api_name="/compare")
    assert zerogpu.requests == []


def test_zerogpu_a_comparison_asks_for_what_its_pair_was_measured_to_need(client, zerogpu):
    app._gpu_times.__init__(app.GPU_CALL_MAX_S)  # nothing measured yet
    app._gpu_times.preloaded(pairs.memory_in_use())  # as the start-up leaves it
    tokens = 24
    name = pairs.loaded_pairs()[0]  # the pair loaded at start-up
    zerogpu.reuse = False  # a fresh worker, which times its start and its set-up
    client.predict(**settings(max_new_tokens=tokens), api_name="/compare")
    zerogpu.reuse = True
    measured = app._gpu_times.runs(name, tokens, tokens, preloaded=True)
    client.predict(**settings(max_new_tokens=tokens), api_name="/compare")
    first, second = (request.duration_s for request in zerogpu.requests)
    # A custom pair: priced at the largest allowed, its capture at the request's cap.
    guess = gpu_time.first_guess(None, cap=settings()["draft_length"])
    # A fresh worker's start, estimated from the weights the start-up preloaded.
    moving_s = pairs.memory_in_use() / app._gpu_times.device.load_bytes_per_s
    cold = gpu_time.CUDA_SETUP_S + moving_s
    setup_s = guess.setup_s + guess.capture_s
    asked = gpu_time.MARGIN * (2 * tokens * guess.plain_s_per_token + setup_s + cold)
    assert first == max(gpu_time.FLOOR_S, math.ceil(asked))
    assert measured.measured and second == measured.seconds
    assert second < first  # tiny models on a CPU: far faster than the first guess
    assert "as measured here" in measured.cold_start  # the fresh worker timed its start


def bench_inputs(**changes) -> dict:
    """The /benchmark endpoint's inputs: the two short `chat` prompts, greedy, one drafter."""
    values = {
        "pair": "tiny",
        "categories": ["chat"],
        "prompts_per_category": 2,
        "max_new_tokens": 8,
        "repeats": 1,
        "drafters": ["assistant"],
    }
    return {**values, **changes}


def test_zerogpu_a_long_benchmark_is_split_into_calls_within_the_limit(client, zerogpu):
    app._gpu_times.__init__(app.GPU_CALL_MAX_S)
    name = pairs.loaded_pairs()[0]
    one_prompt = app._gpu_times.runs(name, 8, 8, preloaded=True).seconds
    app._gpu_times.max_s = one_prompt  # room for one prompt per call
    zerogpu.reuse = False  # fresh forks, each of which sets its pair up
    try:
        report = client.predict(**bench_inputs(), api_name="/benchmark")[-1]
    finally:
        app._gpu_times.max_s = app.GPU_CALL_MAX_S
    assert len(report["prompts"]) == 2 and len(zerogpu.requests) == 2
    assert all(request.duration_s <= one_prompt for request in zerogpu.requests)
    # The first call measured the pair, its set-up too: the second asked for what it measured.
    measured = app._gpu_times.runs(name, 8, 8, preloaded=True)
    assert measured.measured and zerogpu.requests[1].duration_s < one_prompt
    assert report["overall"]["prompts"] == report["overall"]["identical_prompts"] == 2


def test_zerogpu_the_sampling_check_runs_in_the_last_call(client, zerogpu):
    name = pairs.loaded_pairs()[0]
    # Known paces, so that the calls do not depend on what earlier tests measured: a
    # prompt's runs take 16 × 0.05 s, the check's 40 samples 40 × 6 × 0.05 s.
    app._gpu_times.__init__(app.GPU_CALL_MAX_S)
    app._gpu_times.note(gpu_time.CallReport(name, None, 0.0, 0.05, 0.05))
    client.predict(**bench_inputs(sampling_check=10), api_name="/benchmark")
    assert [request.duration_s for request in zerogpu.requests] == [21]  # 1.5 × (1.6 + 12) s
    app._gpu_times.__init__(app.GPU_CALL_MAX_S)
    app._gpu_times.note(gpu_time.CallReport(name, None, 0.0, 0.05, 0.05))
    app._gpu_times.max_s = 10  # room for both prompts, not for the check beside them
    zerogpu.requests.clear()
    try:
        report = client.predict(**bench_inputs(sampling_check=10), api_name="/benchmark")[-1]
    finally:
        app._gpu_times.max_s = app.GPU_CALL_MAX_S
    assert len(zerogpu.requests) == 2 and len(report["prompts"]) == 2
    assert report["sampling_check"]["n"] == 10  # kept when the calls' runs are reported as one


def test_zerogpu_visitors_do_not_queue_for_one_device(client, zerogpu):
    holder = app._device.turn()
    list(holder.waiting())  # elsewhere, this would hold every request up
    try:
        job = client.submit(**settings(), api_name="/compare")
        final = job.result(timeout=120)
        statuses = [values[0] for values in job.outputs()]
    finally:
        holder.leave()
    assert final[-1]["identical"] is True
    assert not any("Waiting for the device" in status for status in statuses)


def test_zerogpu_a_fork_taken_while_a_handler_holds_the_pairs_lock_runs(client, zerogpu):
    zerogpu.reuse = False  # a fresh fork, taken while another thread holds the lock
    taken, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with pairs._loaded.lock:
            taken.set()
            release.wait(180)

    holder = threading.Thread(target=hold_the_lock, daemon=True)
    holder.start()
    taken.wait()
    try:
        job = client.submit(**settings(pair="tiny-lookup"), api_name="/compare")
        final = job.result(timeout=120)
    finally:
        release.set()
    assert final[-1]["identical"] is True


REFUSALS = [
    (
        errors.QUOTA,
        "You have exceeded your free ZeroGPU quota (65s requested vs. 30s left). "
        "Try again in 0:09:30.",
        "Sign in to Hugging Face",
    ),
    (
        errors.TOO_LONG,
        "The requested GPU duration (400s) is larger than the maximum allowed",
        "fewer new tokens",
    ),
    (
        errors.PENDING,
        "You have too many ZeroGPU credits allocated to running tasks. "
        "Try again once some of those tasks have completed.",
        "once they have finished",
    ),
    (errors.QUEUE, "No GPU was available after 60s. Try again later.", "in a minute"),
    (errors.CLIENT, "Expired ZeroGPU proxy token", "Reload the page"),
]


def refused_then_next(client, api_name: str, inputs: dict) -> tuple[str, str, list]:
    """The error of a refused request, its last status line, and the next request's values."""
    job = client.submit(**inputs, api_name=api_name)
    with pytest.raises(gradio_client.exceptions.AppError) as raised:
        job.result()
    status = job.outputs()[-1][0] if job.outputs() else ""
    return str(raised.value), status, client.predict(**inputs, api_name=api_name)


@pytest.mark.parametrize(("title", "said", "advice"), REFUSALS)
def test_zerogpu_a_refusal_is_a_clear_error_and_the_next_comparison_runs(
    client, zerogpu, title, said, advice
):
    zerogpu.refusal = (title, said)
    inputs = settings(max_new_tokens=8)
    error, status, values = refused_then_next(client, "/compare", inputs)
    headline = errors.WORDS[title][0]
    assert headline in error and advice in error and said.rstrip(".") in error
    assert headline in status and advice in status  # the page says it too
    assert values[-1]["identical"] is not None  # the next request ran to its result


def test_zerogpu_a_refused_benchmark_says_why_and_the_next_one_runs(client, zerogpu):
    title, said, advice = REFUSALS[0]
    zerogpu.refusal = (title, said)
    error, status, values = refused_then_next(client, "/benchmark", bench_inputs())
    assert advice in error and errors.WORDS[title][0] in status
    assert values[-1]["overall"]["speedup_geomean"] is not None


def test_zerogpu_an_aborted_call_is_a_clear_error_and_the_next_comparison_asks_more(
    client, zerogpu, monkeypatch
):
    monkeypatch.setattr(gpu_time, "FLOOR_S", 1)  # tiny models ask less than the floor
    zerogpu.reuse, zerogpu.abort = False, True  # a fresh fork, which dies mid-call
    try:
        job = client.submit(**settings(max_new_tokens=8), api_name="/compare")
        with pytest.raises(gradio_client.exceptions.AppError) as raised:
            job.result()
    finally:
        zerogpu.abort = False
    happened, advice = errors.ABORTED_WORDS
    assert happened in str(raised.value) and advice in str(raised.value)
    assert happened in job.outputs()[-1][0]
    values = client.predict(**settings(max_new_tokens=8), api_name="/compare")
    assert values[-1]["identical"] is not None
    # Remembered in the main process: the next request for the pair asks twice as much.
    aborted, after = (request.duration_s for request in zerogpu.requests)
    assert after >= gpu_time.ABORT_GROWTH * aborted - 1  # each rounded up to whole seconds


def test_zerogpu_a_sticky_cuda_error_is_said_in_words_and_the_next_request_forks_afresh(
    client, zerogpu, monkeypatch, tmp_path
):
    """A worker's capture meets a sticky CUDA error (on the CPU's stand-in for graphs, the
    assistant taken to be on CUDA): the request ends in words, and although ZeroGPU offers
    the idle worker for the next one, `spaces` retires a worker whose call raised, so the
    next request runs in a fresh fork, where the capture goes through. Mutation caught:
    the fault caught and the fallback run in the broken context (then the first request
    fails as "Generation failed", not in these words)."""
    from assisted.engine.drafters import draft_graphs
    from tests.engine.test_drafting_faults import ILLEGAL_ADDRESS, FaultyGraphs

    class BreaksOnce(FaultyGraphs):
        """Breaks the device at the first capture of any worker, and never again."""

        def record(self, region, pool=None):
            marker = tmp_path / "broke"
            if not marker.exists():
                marker.touch()
                self.capture_fault = torch.AcceleratorError(ILLEGAL_ADDRESS)
            return super().record(region, pool)

    monkeypatch.setattr(draft_graphs, "GRAPHS", BreaksOnce())
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    inputs = settings(max_new_tokens=8, schedule="auto")
    zerogpu.reuse = False  # a fork taken with the stand-in in place
    job = client.submit(**inputs, api_name="/compare")
    with pytest.raises(gradio_client.exceptions.AppError) as raised:
        job.result()
    said = str(raised.value)
    assert "CUDA context is broken" in said and ILLEGAL_ADDRESS in said, said
    assert "fresh GPU worker" in said
    zerogpu.reuse = True  # ZeroGPU offers the idle worker
    values = client.predict(**inputs, api_name="/compare")
    assert values[-1]["identical"] is not None
    broken, fresh = zerogpu.worker_pids[-2:]
    assert zerogpu.requests[-1].reuse and fresh != broken
