"""What every GPU entry point does inside its call (each tab's `gpu` module): the pair
ready in the call's process (`gpu_ready`), its status lines passed on as the tab's values
(`map_yields`); and for the tabs that time runs with `assisted.bench` (the Benchmark's,
the Shoot-out's), the whole call: the pair ready, the runs, what the call measured
(`timed_runs`).

On ZeroGPU each call runs in a process forked from the main one (or an idle one reused):
it loads the pair where that process does not hold it, and starts from what earlier
processes learnt.
"""

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import gradio as gr

from assisted import bench
from assisted.core.settings import SettingsError
from assisted.engine import comparison, learning
from assisted.models import pairs, placement
from assisted.ui.errors import refusal
from assisted.ui.gpu_time import CallReport, runs_capture_s, runs_s_per_token, worker_start_s
from assisted.ui.requests import GpuRequest, PairPlace


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


def timed_runs(
    request: GpuRequest, title: str, runs: Callable[[pairs.LoadedPair], Iterator]
) -> Iterator[Any]:
    """A GPU call of timed runs: the pair ready (its status lines as `bench.Progress` of no
    runs), then `runs(pair)`'s events (`assisted.bench`'s: Progress, each carrying the
    record of the run it counts), then what the call measured (a CallReport): its load, its
    set-up up to the first timed run, the runs' seconds per token, and the capture of the
    assistant's drafts where this call prepared the pair (a reused worker paid none). Bad
    settings are refused under `title`; any other failure is said, never hung on."""
    spec = request.pair.spec
    started = time.perf_counter()
    cold_start_s = worker_start_s()
    try:
        loading = gpu_ready(request.pair)
        pair, load_s = yield from map_yields(lambda line: bench.Progress(0, 0, line), loading)
    except pairs.PairError as error:
        raise refusal(f"Could not load {spec.name}: {error}", title="Pair not loaded") from error
    except Exception as error:  # a failure inside loading: say so, never hang
        raise gr.Error(f"{title} failed: {type(error).__name__}: {error}") from error
    warmed = comparison.warmed_paths(pair)
    events = runs(pair)
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
        raise refusal(str(error), title=title) from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"{title} failed: {type(error).__name__}: {error}") from error
    finally:
        events.close()
    plain, assisted = runs_s_per_token(records)
    captured = runs_capture_s(records) if comparison.warmed_paths(pair) > warmed else None
    gpu = placement.gpu_name(pair.device)
    yield CallReport(spec.name, load_s, setup_s, plain, assisted, cold_start_s, captured, gpu=gpu)
