"""The Shoot-out tab's GPU work: one call of a shoot-out, given its request
(`shootout.format.ShootoutRequest`), streaming `assisted.bench.shootout`'s events back.

`app.py` decorates `stream_shootout` with `@spaces.GPU` at module level, as ZeroGPU wants,
with the duration function every tab's request shares. The call runs through
`assisted.ui.gpu_calls.bench_call`, and so through `gpu_call` as every tab's does: the
pair ready in the call's process, the shoot-out, then what the call measured (a
`CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

from collections.abc import Generator

from assisted.bench import Progress, shootout
from assisted.bench.measuring import Streamed
from assisted.models.pairs import LoadedPair
from assisted.ui.gpu_calls import GpuEvents, bench_call
from assisted.ui.shootout.format import ShootoutRequest


def stream_shootout(request: ShootoutRequest) -> GpuEvents[Progress | Streamed | dict]:
    """`assisted.bench.shootout.shootout` on the pair: its Progress, each run's steps and
    the ranking, within the call's events (`gpu_calls.bench_call`). Stop ends the run in
    progress within one step, and the ranking covers the rounds that finished."""

    prompt, settings, stop = request.prompt, request.settings, request.stop

    def runs(pair: LoadedPair) -> Generator[Progress | Streamed | dict, None, None]:
        return shootout.shootout(
            pair, prompt, settings, repeats=request.repeats, stop=stop, per_step=request.per_step
        )

    yield from bench_call(request, runs, "Shoot-out")
