"""The Benchmark tab's GPU work: one call of a benchmark, given its request
(`benchmark.request`), streaming `assisted.bench`'s events back.

`app.py` decorates `stream_benchmark` with `@spaces.GPU` at module level, as ZeroGPU
wants, with a duration function that takes the same request. On ZeroGPU each call runs in
a process forked from the main one (or an idle one reused): it loads the pair where that
process does not hold it (`assisted.ui.gpu_calls.gpu_ready`), and ends with what it
measured (a `CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

import time
from collections.abc import Iterator

import gradio as gr

from assisted import bench
from assisted.core.settings import SettingsError
from assisted.engine import comparison
from assisted.models import pairs, placement
from assisted.ui.benchmark.request import BenchmarkRequest
from assisted.ui.errors import refusal
from assisted.ui.gpu_calls import gpu_ready, map_yields
from assisted.ui.gpu_time import CallReport, runs_capture_s, runs_s_per_token, worker_start_s


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
    warmed = comparison.warmed_paths(pair)
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
    # Only a call that prepared the pair captured its graphs: a reused worker paid none.
    captured = runs_capture_s(records) if comparison.warmed_paths(pair) > warmed else None
    yield CallReport(spec.name, load_s, setup_s, plain, assisted, cold_start_s, captured, gpu=gpu)
