"""The Compare tab's GPU work: a comparison, given its request (`compare.request`),
streaming every output's value (picklable) as steps arrive.

`app.py` decorates `stream_comparison` with `@spaces.GPU` at module level, as ZeroGPU
wants, with a duration function that takes the same request. On ZeroGPU each call runs in
a process forked from the main one (or an idle one reused): it loads the pair where that
process does not hold it (`assisted.ui.gpu_calls.gpu_ready`), and ends with what it
measured (a `CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

import time
from collections.abc import Iterator

import gradio as gr

from assisted.core.settings import SettingsError
from assisted.engine import comparison
from assisted.engine.events import StepEvent
from assisted.engine.prompt import encode_prompt
from assisted.models import pairs, placement
from assisted.ui.compare.live import Live, idle_outputs
from assisted.ui.compare.outputs import CompareOutputs
from assisted.ui.compare.request import ComparisonRequest
from assisted.ui.errors import refusal
from assisted.ui.gpu_calls import gpu_ready, map_yields
from assisted.ui.gpu_time import CallReport, capture_s, s_per_token, worker_start_s

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
        live = Live(pair, len(prompt_ids), settings, stop, draft=draft or pair.spec.draft)
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
    live.set_up = comparison.warmed_paths(pair) > warmed  # this call prepared the pair
    final = live.outputs(done=True)
    yield final
    set_up = live.set_up
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
