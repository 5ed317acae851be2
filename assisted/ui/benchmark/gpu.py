"""The Benchmark tab's GPU work: one call of a benchmark, given its request
(`benchmark.request`), streaming `assisted.bench`'s events back.

`app.py` decorates `stream_benchmark` with `@spaces.GPU` at module level, as ZeroGPU
wants, with a duration function that takes the same request. On ZeroGPU each call runs in
a process forked from the main one (or an idle one reused): it loads the pair where that
process does not hold it (`assisted.ui.gpu_calls.gpu_ready`), and ends with what it
measured (a `CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

from collections.abc import Iterator

from assisted import bench
from assisted.models.pairs import LoadedPair
from assisted.ui.benchmark.request import BenchmarkRequest
from assisted.ui.gpu_calls import timed_runs
from assisted.ui.gpu_time import CallReport


def stream_benchmark(
    request: BenchmarkRequest,
) -> Iterator[bench.Progress | bench.Finished | CallReport]:
    """`assisted.bench.benchmark` on the pair: its Progress events, Finished, then what the
    call measured (a CallReport: `gpu_calls.timed_runs`). The request's `acceptance` is
    what the prompts before these left (a benchmark split into several GPU calls); None
    starts from none. Its `check`: the sampling check after the timed runs
    (`assisted.bench.sampling_check`); None runs none.

    Stop ends the run in progress within one step, and the benchmark without a report."""

    def runs(pair: LoadedPair) -> Iterator[bench.Progress | bench.Finished]:
        return bench.benchmark(
            pair,
            list(request.examples),
            list(request.variants),
            request.settings,
            request.repeats,
            stop=request.stop,
            acceptance=request.acceptance,
            check=request.check,
        )

    yield from timed_runs(request, "Benchmark", runs)
