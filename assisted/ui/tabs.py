"""What every tab is built with: what each tab's folder exports (`Tab`) and the registry
that finds them (`registry`), the app's state each is handed (`TabState`), the arguments
every tab's builder takes (`BuildTab`), how many of its visitors run at once, and the
helpers its layout and handlers share.

A tab's outputs are a NamedTuple (each tab's `outputs`), the one place that orders them:
the tab lists its components for Gradio in the order of the fields (`in_order`), and every
handler yields an instance built by field name, so adding an output means adding a field.
"""

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import gradio as gr

from assisted.core.examples import Example
from assisted.ui.gpu_time import GpuTimes
from assisted.ui.pace import Paces
from assisted.ui.pair_access import PairAccess
from assisted.ui.stop_flags import StopFlags

# Requests past Gradio's queue at once. Each fetches its pair's files, then waits for its
# turn on the device, so a download holds up no one whose pair is in memory.
VISITORS_AT_ONCE = 8

Stops = StopFlags
"""Stop requests by key (the session, and the tab): a Stop button sets its request's flag,
and the backend ends the run within one step, in whichever process it runs."""

# A chart's axis ticks as Vega's default (",f" to as many decimals as the tick step needs),
# less trailing zeros ("~"): a chart with nothing to show yet has axes that span nothing, no
# step to take the decimals from, and the default then labels its one tick "0.000000"; and
# a fixed ",.0f" labels ticks 0.1 s apart "0", half a γ apart "1", "2", "2".
# Not "~g", which takes significant digits from the step: ticks of 20 read "2e+1".
TICKS = ",~f"


@dataclass(frozen=True)
class TabState:
    """What the app hands each tab: the way to a pair on the device, the Stop flags, how
    fast each pair decoded in the tabs' runs (for the benchmark's estimate), what the GPU
    calls measured (for the time the next one asks for), and the example prompts."""

    pairs: PairAccess
    stops: Stops
    paces: Paces
    gpu_times: GpuTimes
    examples: list[Example]


BuildTab = Callable[[gr.Blocks, gr.Tab, TabState, Callable[[Any], Iterator[Any]]], None]
"""A tab's builder (each tab's `build_..._tab`): its components and events, inside the
`gr.Tab` of the page (`gr.Blocks`) where the caller builds it, from the app's state and
the tab's GPU entry point. Every tab's takes the same arguments, so that `app.py` builds
them all alike; each uses what it needs of them (the page's load, the tab's select)."""


GpuWork = Callable[[Any], Iterator[Any]]
"""A tab's GPU call, a generator function of one request (each tab's `gpu` module): `app.py`
wraps it with `spaces.GPU`, so on ZeroGPU it runs in a forked worker."""


@dataclass(frozen=True)
class Tab:
    """A tab of the page, as its folder exports it (`TAB` in its `tab` module): its title,
    its id (its element's id after "tab-", and its GPU call's key in `app.GPU_CALLS`), its
    builder and its GPU call. Every call's duration is the app's one estimate of the
    request (`assisted.ui.gpu_time`), which each request's `timed_tokens` and
    `drafting_cap` size."""

    title: str
    name: str
    build: BuildTab
    gpu: GpuWork


def registry(*names: str) -> tuple[Tab, ...]:
    """The tabs of the folders `names` (`assisted.ui.NAME`, each its `tab.TAB`), in the
    page's order: a new tab is a folder, and its name here."""
    return tuple(importlib.import_module(f"assisted.ui.{name}.tab").TAB for name in names)


Outputs = TypeVar("Outputs", bound=NamedTuple)


def in_order(
    outputs: type[NamedTuple], components: Mapping[str, gr.components.Component]
) -> list[gr.components.Component]:
    """The components of a tab's outputs (each tab's `outputs`), named by field, in the
    order of the fields: the order in which Gradio pairs a handler's values with them.
    `components` may hold more than these."""
    return [components[name] for name in outputs._fields]


def updating_only(outputs: type[Outputs], **values: Any) -> Outputs:
    """A tab's outputs with `values` for the fields they name and `gr.skip()`, which leaves
    an output as it is, for every other field."""
    skipped = outputs._make([gr.skip()] * len(outputs._fields))
    return skipped._replace(**values)


def int_if_whole(value):
    """Sliders and the client send floats; whole ones become ints, others fail validation."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def whole_slider(maximum: int, value: int, label: str, **options: Any) -> gr.Slider:
    """A slider of whole numbers from 1 to `maximum`: a count or a size that a tab's
    settings take."""
    return gr.Slider(1, maximum, value=value, step=1, precision=0, label=label, **options)


def folded_json(title: str, label: str) -> gr.JSON:
    """A run's whole result as JSON, folded away under `title`: the page shows it read,
    and an API caller gets the same value under `label`."""
    with gr.Accordion(title, open=False):
        return gr.JSON(label=label)


def on_device(
    trigger: Callable,
    handler: Callable,
    inputs: list[gr.components.Component],
    outputs: type[NamedTuple],
    components: Mapping[str, gr.components.Component],
    api_name: str,
) -> Any:
    """Wire `trigger` (a button's `click`) to a `handler` that takes its turn on the
    device, as the endpoint `api_name` with `outputs` (each tab's NamedTuple): many at once,
    each fetching its files and then waiting for its turn, with one progress display, on
    the status line (ten spinners would be noise, and a browser on the server's own CPU
    would repaint them while runs are timed). Returns the event, for a `.then`."""
    return trigger(
        handler,
        inputs=inputs,
        outputs=in_order(outputs, components),
        api_name=api_name,
        concurrency_limit=VISITORS_AT_ONCE,
        concurrency_id="visitors",
        show_progress="minimal",
        show_progress_on=components["status"],
    )


def on_stop(button: gr.Button, handler: Callable, cancels: list | None = None) -> None:
    """Wire a Stop `button` to its tab's `handler`, which sets its running request's flag:
    at once, beside the runs, and no part of the API."""
    button.click(
        handler,
        cancels=cancels,
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )


def prompt_box(placeholder: str, elem_id: str, lines: int = 6) -> gr.Textbox:
    """The prompt a tab runs, as every tab asks for it."""
    return gr.Textbox(
        label="Prompt", lines=lines, max_lines=16, placeholder=placeholder, elem_id=elem_id
    )


def tokens_and_rounds(
    most_tokens: int, tokens: int, most_rounds: int, rounds: str, prefix: str
) -> tuple[gr.Slider, gr.Slider]:
    """The new tokens a run and the rounds of a tab that times runs (the Benchmark's,
    the Shoot-out's): one slider each, `rounds` labelling the second; their elements'
    ids start with `prefix`."""
    max_new_tokens = whole_slider(
        most_tokens, tokens, "Max new tokens", elem_id=f"{prefix}-max-new-tokens"
    )
    return max_new_tokens, whole_slider(most_rounds, 1, rounds, elem_id=f"{prefix}-repeats")


def by_field(outputs: type[NamedTuple], scope: Mapping[str, Any]) -> dict[str, Any]:
    """The components a layout made for `outputs` (each tab's NamedTuple), from `scope`
    (its names), by field."""
    return {name: scope[name] for name in outputs._fields}
