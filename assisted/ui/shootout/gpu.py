"""The Shoot-out tab's GPU work: one call of a shoot-out, given its request
(`shootout.request`), streaming `assisted.bench.shootout`'s events back.

`app.py` decorates `stream_shootout` with `@spaces.GPU` at module level, as ZeroGPU wants,
with the duration function every tab's request shares. On ZeroGPU the call runs in a
process forked from the main one (or an idle one reused): it loads the pair where that
process does not hold it (`assisted.ui.gpu_calls.gpu_ready`), and ends with what it
measured (a `CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

from collections.abc import Iterator

from assisted.bench import Progress, shootout
from assisted.bench.measuring import Streamed
from assisted.models.pairs import LoadedPair
from assisted.ui.gpu_calls import timed_runs
from assisted.ui.gpu_time import CallReport
from assisted.ui.shootout.request import ShootoutRequest


def stream_shootout(request: ShootoutRequest) -> Iterator[Progress | Streamed | dict | CallReport]:
    """`assisted.bench.shootout.shootout` on the pair: its Progress, each run's steps, the
    ranking, then what the call measured (a CallReport: `gpu_calls.timed_runs`). Stop ends
    the run in progress within one step, and the ranking covers the rounds that finished."""

    def runs(pair: LoadedPair) -> Iterator[Progress | Streamed | dict]:
        return shootout.shootout(
            pair,
            request.prompt,
            request.settings,
            repeats=request.repeats,
            stop=request.stop,
            per_step=request.per_step,
        )

    yield from timed_runs(request, "Shoot-out", runs)
