"""The Shoot-out tab's GPU work: one call of a shoot-out, given its request
(`shootout.request`), streaming `assisted.bench.shootout`'s events back.

`app.py` decorates `stream_shootout` with `@spaces.GPU` at module level, as ZeroGPU wants,
with the duration function every tab's request shares. On ZeroGPU the call runs in a
process forked from the main one (or an idle one reused): it loads the pair where that
process does not hold it (`assisted.ui.gpu_calls.gpu_ready`), and ends with what it
measured (a `CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

import time
from collections.abc import Iterator

import gradio as gr

from assisted.bench import Progress, shootout
from assisted.bench.measuring import Streamed
from assisted.core.settings import SettingsError
from assisted.engine import comparison
from assisted.models import pairs, placement
from assisted.ui.errors import refusal
from assisted.ui.gpu_calls import gpu_ready, map_yields
from assisted.ui.gpu_time import CallReport, runs_capture_s, runs_s_per_token, worker_start_s
from assisted.ui.shootout.request import ShootoutRequest


def stream_shootout(request: ShootoutRequest) -> Iterator[Progress | Streamed | dict | CallReport]:
    """`assisted.bench.shootout.shootout` on the pair: its Progress, each run's steps, the
    ranking, then what the call measured (a CallReport). Stop ends the run in progress
    within one step, and the ranking covers the rounds that finished."""
    spec = request.pair.spec
    started = time.perf_counter()
    cold_start_s = worker_start_s()
    try:
        loading = gpu_ready(request.pair)
        pair, load_s = yield from map_yields(lambda line: Progress(0, 0, line), loading)
    except pairs.PairError as error:
        raise refusal(f"Could not load {spec.name}: {error}", title="Pair not loaded") from error
    except Exception as error:  # a failure inside loading: say so, never hang
        raise gr.Error(f"Shoot-out failed: {type(error).__name__}: {error}") from error
    warmed = comparison.warmed_paths(pair)
    events = shootout.shootout(
        pair, request.prompt, request.settings, repeats=request.repeats, stop=request.stop
    )
    setup_s, records = None, []
    try:
        for event in events:
            if isinstance(event, Progress) and event.record is not None:
                if setup_s is None:  # up to the first timed run's start
                    ready = started + (load_s or 0.0)
                    setup_s = time.perf_counter() - ready - event.record.total_s
                records.append(event.record)
            yield event
    except SettingsError as error:
        raise refusal(str(error), title="Shoot-out") from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"Shoot-out failed: {type(error).__name__}: {error}") from error
    finally:
        events.close()
    plain, assisted = runs_s_per_token(records)
    gpu = placement.gpu_name(pair.device)
    # Only a call that prepared the pair captured its graphs: a reused worker paid none.
    captured = runs_capture_s(records) if comparison.warmed_paths(pair) > warmed else None
    yield CallReport(spec.name, load_s, setup_s, plain, assisted, cold_start_s, captured, gpu=gpu)
