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
"""

import spaces  # first: on ZeroGPU it must patch CUDA before anything touches it

# isort: split
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import gradio as gr

from assisted import bench, decoding, pairs
from assisted.device_queue import DeviceQueue
from assisted.examples import Example, load_folder
from assisted.registry import DEFAULT_PAIR, PAIRS, PairSpec
from assisted.settings import DraftSettings, RunSettings, SettingsError
from assisted.ui import page
from assisted.ui.benchmark_tab import build_benchmark_tab
from assisted.ui.compare_tab import build_compare_tab
from assisted.ui.live import Live
from assisted.ui.outputs import CompareOutputs
from assisted.ui.shared import CUSTOM as CUSTOM  # re-exported: the custom pair's choice
from assisted.ui.shared import PairLoader, Stops

QUEUE_MAX_SIZE = 16  # requests waiting for the device; more are turned away
YIELD_EVERY_S = 0.08  # stream at most this often while steps arrive (phases always stream)
GPU_MAX_S = 240  # ZeroGPU budget for one comparison
BENCH_GPU_MAX_S = 600  # ZeroGPU budget for one benchmark


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

    @classmethod
    def from_env(cls) -> "AppConfig":
        registry = offered_pairs(os.environ.get("ASSISTED_PAIRS", ""))
        default = DEFAULT_PAIR if DEFAULT_PAIR in registry else next(iter(registry))
        return cls(
            registry=registry,
            default_pair=default,
            device=os.environ.get("ASSISTED_DEVICE", "auto"),
            dtype=os.environ.get("ASSISTED_DTYPE", "auto"),
            allow_local=os.environ.get("ASSISTED_ALLOW_LOCAL", "") == "1",
            allow_custom=os.environ.get("ASSISTED_ALLOW_CUSTOM", "1") != "0",
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


# Stop requests, by session (and tab): a Stop button sets the event of its session's running
# request, and the backend ends the run within one step.
_stops: Stops = {}
# One request at a time uses the device, in order of arrival: timed runs, and loading pairs
# into memory, which would slow a timed run down. Requests join only once their files are
# fetched.
_device = DeviceQueue()


def _gpu_duration(spec, device, dtype, allow_local, prompt, settings, draft, stop_key) -> int:
    # Warm-up plus two runs; a generous per-token allowance for a shared GPU.
    return min(GPU_MAX_S, 30 + int(0.25 * 2 * settings.max_new_tokens))


@spaces.GPU(duration=_gpu_duration)
def stream_comparison(
    spec: PairSpec,
    device: str,
    dtype: str,
    allow_local: bool,
    prompt: str,
    settings: RunSettings,
    draft: DraftSettings,
    stop_key: str,
) -> Iterator[CompareOutputs]:
    """Plain then assisted, yielding every output's value (picklable) as steps arrive."""
    pair = pairs.load_pair(spec, device, dtype, allow_local=allow_local)  # cached: loaded
    stop = _stops.setdefault(stop_key, threading.Event())
    try:
        prompt_ids = decoding.encode_prompt(pair, prompt, settings.chat_template)
        live = Live(pair, len(prompt_ids), settings, stop)
        last_yield = 0.0
        for event in decoding.compare(pair, prompt, settings, draft, stop=stop):
            live.add(event)
            now = time.perf_counter()
            if not isinstance(event, decoding.StepEvent) or now - last_yield >= YIELD_EVERY_S:
                last_yield = now
                yield live.outputs()
    except SettingsError as error:
        raise gr.Error(str(error), title="Settings") from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"Generation failed: {type(error).__name__}: {error}") from error
    yield live.outputs(done=True)


def _bench_gpu_duration(
    spec, device, dtype, allow_local, examples, variants, settings, repeats, stop_key
) -> int:
    # The same per-token allowance as a comparison, for every timed run.
    runs = len(examples) * repeats * (1 + len(variants))
    return min(BENCH_GPU_MAX_S, 30 + int(0.25 * runs * settings.max_new_tokens))


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
    stop_key: str,
) -> Iterator[bench.Progress | dict]:
    """`assisted.bench.benchmark` on the loaded pair: its Progress events, then the report.

    Stop ends the run in progress within one step, and the benchmark without a report."""
    pair = pairs.load_pair(spec, device, dtype, allow_local=allow_local)  # cached: loaded
    stop = _stops.setdefault(stop_key, threading.Event())
    events = bench.benchmark(pair, examples, variants, settings, repeats, stop=stop)
    try:
        for event in events:
            if isinstance(event, bench.Finished):
                yield event.report
                return
            yield event
    except (bench.BenchError, SettingsError) as error:
        raise gr.Error(str(error), title="Benchmark") from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"Benchmark failed: {type(error).__name__}: {error}") from error
    finally:
        events.close()


# -- the app -------------------------------------------------------------------------------


def build_demo(config: AppConfig | None = None) -> gr.Blocks:
    """The app's Blocks. Nothing loads until a page opens or a request arrives."""
    config = config or AppConfig.from_env()
    if config.default_pair not in config.registry:
        raise ValueError(f"default pair {config.default_pair!r} is not in the registry")
    examples: list[Example] = load_folder()
    loader = PairLoader(config, _device)
    with gr.Blocks(title=page.TITLE) as demo:
        gr.Markdown(page.HEADER)
        with gr.Tabs():
            with gr.Tab("Compare", id="compare", elem_id="tab-compare"):
                build_compare_tab(demo, loader, _stops, stream_comparison, examples)
            with gr.Tab("Benchmark", id="benchmark", elem_id="tab-benchmark") as tab:
                build_benchmark_tab(tab, loader, _stops, stream_benchmark, examples)
        with gr.Accordion("What is assisted generation?", open=False):
            gr.Markdown(page.EXPLANATION)
    demo.queue(max_size=QUEUE_MAX_SIZE)
    return demo


# Gradio 6 takes the page's style and script at launch, not in `gr.Blocks`.
LAUNCH_KWARGS = {"css": page.CSS, "js": page.JS, "theme": gr.themes.Soft()}


def preload(config: AppConfig) -> None:
    """Load the default pair now, printing progress (start-up of a server or a Space)."""

    def report(message: str, fraction: float | None) -> None:
        print(f"{message}" + (f" ({fraction:.0%})" if fraction is not None else ""), flush=True)

    spec = config.registry[config.default_pair]
    pairs.load_pair(spec, config.device, config.dtype, progress=report, allow_local=True)


demo = build_demo()

if os.environ.get("SPACE_ID"):  # ZeroGPU wants the models loaded at import
    preload(AppConfig.from_env())


def main() -> None:
    preload(AppConfig.from_env())
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), **LAUNCH_KWARGS)


if __name__ == "__main__":
    main()
