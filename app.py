"""Plain and assisted decoding of one prompt, side by side, streamed live (Gradio app); a
Benchmark tab times the examples set by category (`assisted.bench`), and a Shoot-out tab
races every drafter on one prompt against one plain baseline (`assisted.bench.shootout`).

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import gradio as gr
from spaces.config import Config as SpacesConfig

from assisted.core.settings import load_examples_folder
from assisted.models import pairs
from assisted.models.registry import DEFAULT_PAIR, PAIRS, PairSpec, default_pair_for
from assisted.ui.errors import quiet_component_refusals
from assisted.ui.gpu_time import GpuTimes, Paces
from assisted.ui.pair_access import CUSTOM as CUSTOM  # re-exported: the custom pair's choice
from assisted.ui.pair_access import DeviceQueue, PairAccess
from assisted.ui.requests import GpuRequest, StopFlags
from assisted.ui.tabs import CSS, EXPLANATION, HEADER, JS, TITLE, GpuWork, Tab, TabState, registry

QUEUE_MAX_SIZE = 16  # requests waiting for the device; more are turned away
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
# sees them too (`assisted.ui.requests`).
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


def _gpu_duration(request: GpuRequest) -> int:
    """The seconds a tab's GPU call asks ZeroGPU for (`assisted.ui.gpu_time`)."""
    return _gpu_times.estimate(request, request.pair.spec.name in _preloaded).seconds


# -- the app -------------------------------------------------------------------------------

# The page's tabs, in order, each its folder's `tab.TAB` (`assisted.ui.tabs.Tab`): a new tab
# is a folder under `assisted/ui/` and its name here.
TABS = registry("compare", "benchmark", "shootout")

# Each tab's GPU call by its id, wrapped at import as ZeroGPU wants them, with the one
# function that sizes every request's duration. The tests' ZeroGPU harness wraps the same
# calls from `TABS` as `spaces` wraps them on a Space (`tests/zerogpu.py`).
GPU_CALLS: dict[str, GpuWork] = {
    tab.name: spaces.GPU(duration=_gpu_duration)(tab.gpu) for tab in TABS
}


def build_demo(
    config: AppConfig | None = None,
    gpu: Mapping[str, GpuWork] = GPU_CALLS,
    tabs: Sequence[Tab] = TABS,
) -> gr.Blocks:
    """The app's Blocks: `tabs`, each with its GPU call in `gpu` (by its id). Nothing loads
    until a page opens or a request arrives."""
    config = config or AppConfig.from_env()
    if config.default_pair not in config.registry:
        raise ValueError(f"default pair {config.default_pair!r} is not in the registry")
    queue = DeviceQueue(one_at_a_time=False) if config.zerogpu else _device
    access = PairAccess(config, queue, _gpu_times, _preloaded)
    shared = TabState(access, _stops, Paces(), _gpu_times, load_examples_folder())
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(HEADER)
        with gr.Tabs():
            for made in tabs:
                with gr.Tab(made.title, id=made.name, elem_id=f"tab-{made.name}") as tab:
                    made.build(demo, tab, shared, gpu[made.name])
        with gr.Accordion("What is assisted generation?", open=False):
            gr.Markdown(EXPLANATION)
    demo.queue(max_size=QUEUE_MAX_SIZE)
    quiet_component_refusals(demo)
    return demo


# Gradio 6 takes the page's style and script at launch, not in `gr.Blocks`.
LAUNCH_KWARGS = {"css": CSS, "js": JS, "theme": gr.themes.Soft()}


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
