"""The Compare tab's GPU work: a comparison, given its request (`compare.format.ComparisonRequest`),
streaming every output's value (picklable) as steps arrive.

`app.py` decorates `stream_comparison` with `@spaces.GPU` at module level, as ZeroGPU
wants, with the duration function every tab's request shares. The call runs through
`assisted.ui.gpu_calls.gpu_call`, as every tab's does: the pair ready in the call's
process, the comparison, then what the call measured (a `CallReport`), for the time the
next call asks for (`assisted.ui.gpu_time`).
"""

import time
from collections.abc import Iterator

from assisted.engine import decoding
from assisted.engine.decoding import RunDone, StepEvent
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import LoadedPair
from assisted.ui.compare.format import CompareOutputs, ComparisonRequest
from assisted.ui.compare.live import Live
from assisted.ui.gpu_calls import CallTiming, GpuEvents, gpu_call

YIELD_EVERY_S = 0.08  # stream at most this often while steps arrive (phases always stream)


def stream_comparison(request: ComparisonRequest) -> GpuEvents[CompareOutputs]:
    """Plain then assisted, yielding every output's value (picklable) as steps arrive,
    within the call's events (`gpu_calls.gpu_call`)."""
    settings, draft, stop = request.settings, request.draft, request.stop

    def work(pair: LoadedPair, timing: CallTiming) -> Iterator[CompareOutputs]:
        prompt_ids = encode_prompt(pair, request.prompt, settings.chat_template)
        live = Live(pair, len(prompt_ids), settings, stop, draft=draft or pair.spec.draft)
        last_yield = 0.0
        for event in decoding.compare(pair, prompt_ids, settings, draft, stop=stop):
            live.add(event)
            if isinstance(event, RunDone):
                timing.timed(event.record)
            now = time.perf_counter()
            if not isinstance(event, StepEvent) or now - last_yield >= YIELD_EVERY_S:
                last_yield = now
                yield live.outputs()
        live.set_up = timing.set_up  # the last status line names a capture this call paid
        yield live.outputs(done=True)

    yield from gpu_call(request, work, "Settings", fault="Generation")
