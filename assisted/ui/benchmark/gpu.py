"""The Benchmark tab's GPU work: one call of a benchmark, given its request
(`benchmark.format.BenchmarkRequest`), streaming `assisted.bench`'s events back.

`app.py` decorates `stream_benchmark` with `@spaces.GPU` at module level, as ZeroGPU
wants, with the duration function every tab's request shares. The call runs through
`assisted.ui.gpu_calls.bench_call`, and so through `gpu_call` as every tab's does: the
pair ready in the call's process, the benchmark, then what the call measured (a
`CallReport`), for the time the next call asks for (`assisted.ui.gpu_time`).
"""

from collections.abc import Generator

from assisted import bench
from assisted.models.pairs import LoadedPair
from assisted.ui.benchmark.format import BenchmarkRequest
from assisted.ui.gpu_calls import GpuEvents, bench_call


def stream_benchmark(request: BenchmarkRequest) -> GpuEvents[bench.Progress | bench.Finished]:
    """`assisted.bench.benchmark` on the pair: its Progress events and Finished, within
    the call's events (`gpu_calls.gpu_call`). The request's `acceptance` is what the
    prompts before these left (a benchmark split into several GPU calls); None starts from
    none. Its `check`: the sampling check after the timed runs
    (`assisted.bench.sampling_check`); None runs none.

    Stop ends the run in progress within one step, and the benchmark without a report."""

    def runs(pair: LoadedPair) -> Generator[bench.Progress | bench.Finished, None, None]:
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

    yield from bench_call(request, runs, "Benchmark")
