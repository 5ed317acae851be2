"""Plain and assisted decoding of one prompt, side by side, streamed live (Gradio app); a
Benchmark tab times the examples set by category (`assisted.bench`).

`python app.py` loads the embedded pair and serves the app (GRADIO_SERVER_NAME, default
127.0.0.1; GRADIO_SERVER_PORT). This file is the composition root: the configuration, the
state the tabs share, the GPU entry points (module level, as ZeroGPU wants them) and
`build_demo()`, which assembles the tabs of `assisted.ui`. `assisted/` loads pairs, decodes
and computes every figure.

Environment:
- ASSISTED_DEVICE, ASSISTED_DTYPE: where and in what precision pairs load (default "auto").
- ASSISTED_ALLOW_LOCAL=1: accept local model folders as custom ids. Off by default, so a
  public Space never loads files from its own disk on a visitor's request.
- ASSISTED_ALLOW_CUSTOM=0: offer no custom pairs (the inputs are hidden, the API refuses them).
- ASSISTED_PAIRS: the registry pairs to offer, as a comma list (default: all of them).
- SPACE_ID (set by Hugging Face Spaces): load the default pair at import, as ZeroGPU wants.
- SPACES_ZERO_GPU (set by ZeroGPU hardware): the GPU work runs in forked processes, each
  call scheduled by ZeroGPU (docs/space.md#zerogpu).
- ASSISTED_GPU_CALL_MAX_S (default 300): the most one ZeroGPU call asks for; a longer
  benchmark is split into calls.
"""

import spaces  # first: on ZeroGPU it must patch CUDA before anything touches it

# isort: split
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import gradio as gr
from spaces.config import Config as SpacesConfig

from assisted import bench
from assisted.analysis.sampling_evidence import CheckSettings
from assisted.core.examples import Example, load_folder
from assisted.core.settings import DraftSettings, RunSettings, SettingsError
from assisted.engine import comparison, decoding, learning, running
from assisted.models import pairs
from assisted.models.registry import DEFAULT_PAIR, PAIRS, PairSpec, default_pair_for
from assisted.policy.learnt import LearntSnapshot
from assisted.ui import page
from assisted.ui.benchmark_tab import StreamBenchmark, build_benchmark_tab
from assisted.ui.compare_tab import StreamComparison, build_compare_tab
from assisted.ui.device_queue import DeviceQueue
from assisted.ui.errors import quiet_component_refusals, refusal
from assisted.ui.gpu_time import (
    CallReport,
    GpuTimes,
    capture_s,
    runs_s_per_token,
    s_per_token,
    worker_start_s,
)
from assisted.ui.live import Live, idle_outputs
from assisted.ui.outputs import CompareOutputs
from assisted.ui.shared import CUSTOM as CUSTOM  # re-exported: the custom pair's choice
from assisted.ui.shared import PairLoader
from assisted.ui.stop_flags import StopFlag, StopFlags

QUEUE_MAX_SIZE = 16  # requests waiting for the device; more are turned away
YIELD_EVERY_S = 0.08  # stream at most this often while steps arrive (phases always stream)
# The most one ZeroGPU call asks for. ZeroGPU refuses longer requests ("The requested GPU
# duration is larger than the maximum allowed"); its limit is not documented, and 300 s is
# what signed-in visitors are reported to get. A longer benchmark is split into calls.
GPU_CALL_MAX_S = int(os.environ.get("ASSISTED_GPU_CALL_MAX_S", "300"))


@dataclass(frozen=True)
class AppConfig:
    """What one app instance serves. Registry pairs are trusted (the operator chose them);
    custom ids come from visitors and may name local folders only with `allow_local`."""

    registry: dict[str, PairSpec] = field(default_factory=lambda: dict(PAIRS))
    default_pair: str = DEFAULT_PAIR
    device: str = "auto"
    dtype: str = "auto"
    allow_local: bool = False
    allow_custom: bool = True
    # On ZeroGPU the GPU work runs in forked processes that ZeroGPU schedules: the handlers
    # never load a pair or touch CUDA, and visitors do not queue for one device.
    zerogpu: bool = False

    @classmethod
    def from_env(cls) -> "AppConfig":
        registry = offered_pairs(os.environ.get("ASSISTED_PAIRS", ""))
        device = os.environ.get("ASSISTED_DEVICE", "auto")
        # On ZeroGPU the main process sees CUDA as ZeroGPU emulates it: its default is a
        # GPU pair, as every call runs on a GPU.
        default = default_pair_for(pairs.choose_device(device).type, registry)
        return cls(
            registry=registry,
            default_pair=default,
            device=device,
            dtype=os.environ.get("ASSISTED_DTYPE", "auto"),
            allow_local=os.environ.get("ASSISTED_ALLOW_LOCAL", "") == "1",
            allow_custom=os.environ.get("ASSISTED_ALLOW_CUSTOM", "1") != "0",
            zerogpu=SpacesConfig.zero_gpu,
        )


def offered_pairs(names: str) -> dict[str, PairSpec]:
    """The registry pairs named in a comma list (ASSISTED_PAIRS), in its order; empty: all."""
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in PAIRS]
    if unknown:
        raise ValueError(
            f"ASSISTED_PAIRS names unknown pairs: {', '.join(unknown)}; "
            f"known pairs: {', '.join(PAIRS)}"
        )
    return {name: PAIRS[name] for name in chosen} if chosen else dict(PAIRS)


# Stop requests, by session (and tab): a Stop button sets its running request's flag, and
# the backend ends the run within one step. Files, so that a GPU worker forked by ZeroGPU
# sees them too (`assisted.ui.stop_flags`).
_stops = StopFlags()
# One request at a time uses the device, in order of arrival: timed runs, and loading pairs
# into memory, which would slow a timed run down. Requests join only once their files are
# fetched. On ZeroGPU the visitors' calls are ZeroGPU's to schedule, each on a GPU of its
# own, and the line lets everyone through (`build_demo`).
_device = DeviceQueue()
# What the GPU calls measured, for the time the next one asks ZeroGPU for.
_gpu_times = GpuTimes(GPU_CALL_MAX_S)
# The names of the pairs loaded at start-up (`preload`): a forked GPU worker finds them in
# memory. Any other pair loads inside each GPU call that needs it.
_preloaded: set[str] = set()


def _gpu_duration(spec, device, dtype, allow_local, prompt, settings, draft, stop) -> int:
    return _gpu_times.comparison(
        spec.name, settings.max_new_tokens, spec.name in _preloaded
    ).seconds


@spaces.GPU(duration=_gpu_duration)
def stream_comparison(
    spec: PairSpec,
    device: str,
    dtype: str,
    allow_local: bool,
    prompt: str,
    settings: RunSettings,
    draft: DraftSettings,
    stop: StopFlag,
) -> Iterator[CompareOutputs | CallReport]:
    """Plain then assisted, yielding every output's value (picklable) as steps arrive, and
    last what the call measured (a CallReport, which the handler keeps and does not show).

    On ZeroGPU this runs in a process forked for the call or an idle one reused: it loads
    the pair where that process does not hold it, and starts from what earlier processes
    learnt (`gpu_ready`)."""
    cold_start_s = worker_start_s()
    try:
        loading = gpu_ready(spec, device, dtype, allow_local)
        pair, load_s = yield from map_yields(idle_outputs, loading)
        prompt_ids = running.encode_prompt(pair, prompt, settings.chat_template)
        live = Live(pair, len(prompt_ids), settings, stop)
        warmed = comparison.warmed_paths(pair)
        setup = Stopwatch()
        last_yield = 0.0
        for event in comparison.compare_ids(pair, prompt_ids, settings, draft, stop=stop):
            live.add(event)
            if isinstance(event, decoding.Phase):
                setup.mark(event.name == "warmup")
            now = time.perf_counter()
            if not isinstance(event, decoding.StepEvent) or now - last_yield >= YIELD_EVERY_S:
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
    )


def gpu_ready(
    spec: PairSpec, device: str, dtype: str, allow_local: bool
) -> Generator[str, None, tuple[pairs.LoadedPair, float | None]]:
    """The pair in this process, loaded here where it is not (a status line meanwhile),
    and the seconds loading took (None: it was in memory). Runs in the GPU call: on
    ZeroGPU nothing may touch CUDA in the main process's handler threads.

    The pair starts from what every process learnt so far: on ZeroGPU this process was
    forked from the main one, which holds what it read at start-up only, or it is an idle
    worker reused, which holds what it learnt itself; the file holds what all of them
    kept (`assisted.models.learnt_store`)."""
    pair = pairs.loaded(spec, device, dtype)
    load_s = None
    if pair is None:
        yield f"**Loading** `{spec.name}` inside this GPU call…"
        started = time.perf_counter()
        pair = pairs.load_pair(spec, device, dtype, allow_local=allow_local)
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


def _bench_gpu_duration(
    spec,
    device,
    dtype,
    allow_local,
    examples,
    variants,
    settings,
    repeats,
    stop,
    acceptance,
    check=None,
) -> int:
    preloaded = spec.name in _preloaded
    return _gpu_times.benchmark(
        spec.name, len(examples), len(variants), settings, repeats, preloaded, check
    ).seconds


@spaces.GPU(duration=_bench_gpu_duration)
def stream_benchmark(
    spec: PairSpec,
    device: str,
    dtype: str,
    allow_local: bool,
    examples: list[Example],
    variants: list[bench.Variant],
    settings: RunSettings,
    repeats: int,
    stop: StopFlag,
    acceptance: LearntSnapshot | None = None,
    check: CheckSettings | None = None,
) -> Iterator[bench.Progress | bench.Finished | CallReport]:
    """`assisted.bench.benchmark` on the pair: its Progress events, Finished, then what the
    call measured (a CallReport). `acceptance` is what the prompts before these left (a
    benchmark split into several GPU calls); None starts from none. `check`: the sampling
    check after the timed runs (`assisted.bench.sampling_check`); None runs none.

    Stop ends the run in progress within one step, and the benchmark without a report."""
    started = time.perf_counter()
    cold_start_s = worker_start_s()
    try:
        loading = gpu_ready(spec, device, dtype, allow_local)
        pair, load_s = yield from map_yields(lambda line: bench.Progress(0, 0, line), loading)
    except pairs.PairError as error:
        raise refusal(f"Could not load {spec.name}: {error}", title="Pair not loaded") from error
    except Exception as error:  # a failure inside loading: say so, never hang
        raise gr.Error(f"Benchmark failed: {type(error).__name__}: {error}") from error
    events = bench.benchmark(
        pair, examples, variants, settings, repeats, stop=stop, acceptance=acceptance, check=check
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
    yield CallReport(spec.name, load_s, setup_s, plain, assisted, cold_start_s)


# -- the app -------------------------------------------------------------------------------


class GpuCalls(NamedTuple):
    """The GPU entry points the tabs call: this module's, or (in tests) the same functions
    wrapped as ZeroGPU wraps them."""

    compare: StreamComparison
    benchmark: StreamBenchmark


def build_demo(config: AppConfig | None = None, gpu: GpuCalls | None = None) -> gr.Blocks:
    """The app's Blocks. Nothing loads until a page opens or a request arrives."""
    config = config or AppConfig.from_env()
    gpu = gpu or GpuCalls(stream_comparison, stream_benchmark)
    if config.default_pair not in config.registry:
        raise ValueError(f"default pair {config.default_pair!r} is not in the registry")
    examples: list[Example] = load_folder()
    queue = DeviceQueue(one_at_a_time=False) if config.zerogpu else _device
    loader = PairLoader(config, queue, _gpu_times, _preloaded)
    with gr.Blocks(title=page.TITLE) as demo:
        gr.Markdown(page.HEADER)
        with gr.Tabs():
            with gr.Tab("Compare", id="compare", elem_id="tab-compare"):
                build_compare_tab(demo, loader, _stops, gpu.compare, examples)
            with gr.Tab("Benchmark", id="benchmark", elem_id="tab-benchmark") as tab:
                build_benchmark_tab(tab, loader, _stops, gpu.benchmark, examples)
        with gr.Accordion("What is assisted generation?", open=False):
            gr.Markdown(page.EXPLANATION)
    demo.queue(max_size=QUEUE_MAX_SIZE)
    quiet_component_refusals(demo)
    return demo


# Gradio 6 takes the page's style and script at launch, not in `gr.Blocks`.
LAUNCH_KWARGS = {"css": page.CSS, "js": page.JS, "theme": gr.themes.Soft()}


def preload(config: AppConfig) -> None:
    """Load the default pair now, printing progress (start-up of a server or a Space).

    On ZeroGPU the default pair alone: at the launch `spaces` packs what is loaded, and
    every fresh GPU worker moves all of it onto the GPU before its task starts, inside the
    visitor's time, so a pair preloaded beside the default would slow every cold start
    for the few who choose it. The other offered pairs are fetched ahead, in a thread
    behind the start (`_fetch_ahead`), and load inside each call that needs them. This runs
    in the thread that imported `spaces`, where ZeroGPU emulates CUDA."""

    def report(message: str, fraction: float | None) -> None:
        print(f"{message}" + (f" ({fraction:.0%})" if fraction is not None else ""), flush=True)

    spec = config.registry[config.default_pair]
    print(f"Preloading {spec.name}", flush=True)
    try:
        pairs.load_pair(spec, config.device, config.dtype, progress=report, allow_local=True)
    except Exception as error:
        if not config.zerogpu:
            raise
        # The Space stays up: the GPU call loads the pair and says what fails there.
        print(f"{spec.name}: loads inside each GPU call (at start-up: {error})", flush=True)
    else:
        _preloaded.add(spec.name)
    if not config.zerogpu:
        return
    if spec.name in _preloaded:  # what the GPU calls count on finding, and ask no time to load
        pairs.pin(spec)
    _gpu_times.preloaded(pairs.memory_in_use())  # what each fresh worker moves at its start
    ahead = [other for name, other in config.registry.items() if name != config.default_pair]
    for other in ahead:
        print(f"{other.name}: loads inside each GPU call (fetched ahead)", flush=True)
    if ahead:
        global _fetching_ahead
        _fetching_ahead = threading.Thread(
            target=_fetch_ahead, args=(ahead, report), name="fetch ahead", daemon=True
        )
        _fetching_ahead.start()


# The start-up's fetch ahead of the pairs that load inside the GPU calls (`_fetch_ahead`).
_fetching_ahead: threading.Thread | None = None


def _fetch_ahead(specs: list[PairSpec], report: Callable[[str, float | None], None]) -> None:
    """Put the files of `specs` on disk, one pair after another, behind the app's start:
    the first visitor to choose one then waits for no download (a request fetches before
    its GPU call either way). A pair that would leave too little disk for a visitor's own,
    or fails, is left to the first request for it, which says why it fails."""
    for spec in specs:
        try:
            if (full := pairs.disk_too_full_for(spec)) is not None:
                print(f"{spec.name}: not fetched ahead: {full}", flush=True)
                continue
            pairs.fetch_pair(spec, report, allow_local=True)
        except Exception as error:
            print(f"{spec.name}: not fetched ahead ({error})", flush=True)


demo = build_demo()

# ZeroGPU wants the models in memory before the launch packs them. A Space runs `python
# app.py`, which preloads in `main`; imported on a Space (Gradio's reload mode), the app
# preloads here. Once a process either way.
if os.environ.get("SPACE_ID") and __name__ != "__main__":
    preload(AppConfig.from_env())


def main() -> None:
    preload(AppConfig.from_env())
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), **LAUNCH_KWARGS)


if __name__ == "__main__":
    main()
