"""The GPU entry points' work: a comparison and a benchmark, each given one request
(`assisted.ui.requests`) and streaming picklable values back.

`app.py` decorates these with `@spaces.GPU` at module level, as ZeroGPU wants, with
duration functions that take the same request. On ZeroGPU each call runs in a process
forked from the main one (or an idle one reused): it loads the pair where that process does
not hold it, starts from what earlier processes learnt, and ends with what it measured (a
`CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import gradio as gr

from assisted import bench
from assisted.core.settings import SettingsError
from assisted.engine import comparison, learning
from assisted.engine.events import StepEvent
from assisted.engine.prompt import encode_prompt
from assisted.models import pairs, placement
from assisted.ui.errors import refusal
from assisted.ui.gpu_time import (
    CallReport,
    capture_s,
    runs_s_per_token,
    s_per_token,
    worker_start_s,
)
from assisted.ui.live import Live, idle_outputs
from assisted.ui.outputs import CompareOutputs
from assisted.ui.requests import BenchmarkRequest, ComparisonRequest, PairPlace

YIELD_EVERY_S = 0.08  # stream at most this often while steps arrive (phases always stream)


def stream_comparison(request: ComparisonRequest) -> Iterator[CompareOutputs | CallReport]:
    """Plain then assisted, yielding every output's value (picklable) as steps arrive, and
    last what the call measured (a CallReport, which the handler keeps and does not show).

    On ZeroGPU this runs in a process forked for the call or an idle one reused: it loads
    the pair where that process does not hold it, and starts from what earlier processes
    learnt (`gpu_ready`)."""
    spec, prompt, settings = request.pair.spec, request.prompt, request.settings
    draft, stop = request.draft, request.stop
    cold_start_s = worker_start_s()
    try:
        loading = gpu_ready(request.pair)
        pair, load_s = yield from map_yields(idle_outputs, loading)
        prompt_ids = encode_prompt(pair, prompt, settings.chat_template)
        live = Live(pair, len(prompt_ids), settings, stop)
        warmed = comparison.warmed_paths(pair)
        setup = Stopwatch()
        last_yield = 0.0
        for event in comparison.compare(pair, prompt_ids, settings, draft, stop=stop):
            live.add(event)
            if isinstance(event, comparison.Phase):
                setup.mark(event.name == "warmup")
            now = time.perf_counter()
            if not isinstance(event, StepEvent) or now - last_yield >= YIELD_EVERY_S:
                last_yield = now
                yield live.outputs()
    except SettingsError as error:
        raise refusal(str(error), title="Settings") from error
    except pairs.PairError as error:
        raise refusal(f"Could not load {spec.name}: {error}", title="Pair not loaded") from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"Generation failed: {type(error).__name__}: {error}") from error
    final = live.outputs(done=True)
    yield final
    set_up = comparison.warmed_paths(pair) > warmed  # this call prepared and warmed up the pair
    yield CallReport(
        spec.name,
        load_s,
        setup.seconds if set_up else None,
        plain_s_per_token=s_per_token(final.result, "plain"),
        assisted_s_per_token=s_per_token(final.result, "assisted"),
        cold_start_s=cold_start_s,
        capture_s=capture_s(final.result) if set_up else None,
        gpu=placement.gpu_name(pair.device),
    )


def gpu_ready(place: PairPlace) -> Generator[str, None, tuple[pairs.LoadedPair, float | None]]:
    """The pair in this process, loaded here where it is not (a status line meanwhile),
    and the seconds loading took (None: it was in memory). Runs in the GPU call: on
    ZeroGPU nothing may touch CUDA in the main process's handler threads.

    The pair starts from what every process learnt so far: on ZeroGPU this process was
    forked from the main one, which holds what it read at start-up only, or it is an idle
    worker reused, which holds what it learnt itself; the file holds what all of them
    kept (`assisted.models.learnt_store`)."""
    spec, device, dtype = place.spec, place.device, place.dtype
    pair = pairs.loaded(spec, device, dtype)
    load_s = None
    if pair is None:
        yield f"**Loading** `{spec.name}` inside this GPU call…"
        started = time.perf_counter()
        pair = pairs.load_pair(spec, device, dtype, allow_local=place.allow_local)
        load_s = time.perf_counter() - started
    else:
        learning.refresh(pair)
    return pair, load_s


def map_yields(function: Callable[[Any], Any], generator: Generator) -> Generator:
    """`generator`'s yields passed through `function`; returns what it returns."""
    while True:
        try:
            item = next(generator)
        except StopIteration as done:
            return done.value
        yield function(item)


class Stopwatch:
    """Seconds between the first `mark(True)` and the next `mark(False)`."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.seconds: float | None = None

    def mark(self, start: bool) -> None:
        now = time.perf_counter()
        if start and self.started is None:
            self.started = now
        elif not start and self.started is not None and self.seconds is None:
            self.seconds = now - self.started


def stream_benchmark(
    request: BenchmarkRequest,
) -> Iterator[bench.Progress | bench.Finished | CallReport]:
    """`assisted.bench.benchmark` on the pair: its Progress events, Finished, then what the
    call measured (a CallReport). The request's `acceptance` is what the prompts before
    these left (a benchmark split into several GPU calls); None starts from none. Its
    `check`: the sampling check after the timed runs (`assisted.bench.sampling_check`);
    None runs none.

    Stop ends the run in progress within one step, and the benchmark without a report."""
    spec = request.pair.spec
    started = time.perf_counter()
    cold_start_s = worker_start_s()
    try:
        loading = gpu_ready(request.pair)
        pair, load_s = yield from map_yields(lambda line: bench.Progress(0, 0, line), loading)
    except pairs.PairError as error:
        raise refusal(f"Could not load {spec.name}: {error}", title="Pair not loaded") from error
    except Exception as error:  # a failure inside loading: say so, never hang
        raise gr.Error(f"Benchmark failed: {type(error).__name__}: {error}") from error
    events = bench.benchmark(
        pair,
        list(request.examples),
        list(request.variants),
        request.settings,
        request.repeats,
        stop=request.stop,
        acceptance=request.acceptance,
        check=request.check,
    )
    setup_s, records = None, []
    try:
        for event in events:
            if isinstance(event, bench.Progress) and event.record is not None:
                if setup_s is None:  # up to the first timed run's start
                    ready = started + (load_s or 0.0)
                    setup_s = time.perf_counter() - ready - event.record.total_s
                records.append(event.record)
            yield event
    except (bench.BenchError, SettingsError) as error:
        raise refusal(str(error), title="Benchmark") from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"Benchmark failed: {type(error).__name__}: {error}") from error
    finally:
        events.close()
    plain, assisted = runs_s_per_token(records)
    gpu = placement.gpu_name(pair.device)
    yield CallReport(spec.name, load_s, setup_s, plain, assisted, cold_start_s, gpu=gpu)
