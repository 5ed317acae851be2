"""What every tab is built with: what each tab's folder exports (`Tab`) and the registry
that finds them (`registry`), the app's state each is handed (`TabState`), the arguments
every tab's builder takes (`BuildTab`), how many of its visitors run at once, and the
helpers its layout and handlers share.

A tab's outputs are a NamedTuple (each tab's `format`), the one place that orders them:
the tab lists its components for Gradio in the order of the fields (`in_order`), and every
handler yields an instance built by field name, so adding an output means adding a field.

The page around the tabs: its title, header, the explanation under the tabs, and the
style sheet and script (passed to `launch()`, as Gradio 6 takes them).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import gradio as gr

from assisted.core.settings import Example
from assisted.ui.gpu_time import GpuTimes, Paces
from assisted.ui.pair_access import PairAccess
from assisted.ui.requests import StopFlags

TITLE = "Assisted generation, side by side"
HEADER = (
    "# Assisted generation, side by side\n"
    "A small **assistant** model drafts tokens; the large **target** verifies them in "
    "one pass. Type a prompt and press **Compare**: plain decoding runs first, then "
    "assisted generation, and both stream here with their statistics. The "
    "**Benchmark** tab times the example prompts by category."
)
EXPLANATION = """
**Assisted generation** (speculative decoding) pairs the large *target* model with a small
*assistant*. Each step, the assistant drafts a few tokens (γ) one by one; the target then
checks all of them in **one** forward pass, keeps the longest prefix it agrees with
(*accepted*) and adds one token of its own. With greedy decoding the output is exactly the
target's own output; with sampling it follows the target's distribution.

**Why it helps.** Generating one token with a large model is limited by memory bandwidth:
every step streams all the weights through the processor to do little arithmetic. Checking
γ + 1 positions at once costs about the same as one step, so each accepted token is nearly
free, and the small assistant drafts cheaply.

**When it does not.** When the assistant guesses badly (low acceptance rate: open chat,
creative text), the drafting time is wasted. On CPUs, verification of several positions is
*not* free: compute, not bandwidth, dominates, so long drafts cost real time. Prompts whose
answers copy from the input (editing given code, summarising or answering from a passage)
accept the most. The stat cards and the speedup Leviathan et al.'s model fits to the run
(under the `auto` schedule, the speedup the policy predicted) show which case a run is in.

**Quantize the assistant, not the target.** The target checks every drafted token, so an
int8 assistant can only change how many drafts are accepted and how fast they come, never
the output: it stays the target's own. Quantizing the target would change the answer
itself, because its rounding decides which token wins; on a CPU an int8 or 4-bit assistant drafts
about twice as fast as a bf16 one, and the cost ratio c shows it.
"""
CSS = """
.run-text { white-space: pre-wrap; word-break: break-word; font-family: var(--font-mono);
  font-size: 0.9rem; line-height: 1.7; min-height: 12rem; max-height: 28rem; overflow-y: auto;
  padding: 0.6rem 0.8rem; border: 1px solid var(--border-color-primary);
  border-radius: var(--radius-md); background: var(--background-fill-secondary); }
.run-text.empty { color: var(--body-text-color-subdued); font-family: var(--font); }
.run-text .step { border-radius: 3px; box-shadow: inset 0 0 0 1px rgba(16, 122, 87, 0.35);
  margin-right: 1px; }
.run-text .step:hover, .run-text .step:focus { outline: 2px solid var(--color-accent);
  outline-offset: 1px; }
.run-text .acc, .legend .acc { background: rgba(16, 185, 129, 0.30); }
.run-text .own, .legend .own { background: rgba(99, 102, 241, 0.16); }
/* Under sampling, the target's token after a rejection (corrected) and after a fully
   accepted draft (bonus): two underlines, apart from the red of a greedy divergence. */
.run-text .own.corrected, .legend .own.corrected { text-decoration: underline wavy #d97706;
  text-decoration-thickness: 1.5px; text-underline-offset: 3px; }
.run-text .own.bonus, .legend .own.bonus { text-decoration: underline double #0284c7;
  text-underline-offset: 3px; }
.run-text .rej, .legend .rej { text-decoration: line-through;
  color: var(--body-text-color-subdued); }
.run-text .rej { opacity: 0.75; user-select: none; }
/* The token where the two runs first differ, in both columns. */
.run-text mark.diverged { background: rgba(220, 38, 38, 0.22); color: inherit;
  box-shadow: inset 0 -2px 0 #dc2626; border-radius: 2px; }
/* "show rejected drafts" unticked: the remainders go (a step's details still name them). */
body:has(#show-rejected:not(:checked)) #assisted-text .rej { display: none; }
/* A step's details, on hover and keyboard focus: just below the text box, positioned from
   .run-box so the text's scrolling does not clip them (compare.format.run_html). */
.run-box { position: relative; }
.run-text .tip { display: none; position: absolute; z-index: 30; left: 0; right: 0;
  top: calc(100% + 0.3rem); padding: 0.4rem 0.6rem; font-family: var(--font);
  font-size: 0.8rem; line-height: 1.5; color: var(--body-text-color);
  background: var(--background-fill-primary); border: 1px solid var(--border-color-primary);
  border-radius: var(--radius-md); box-shadow: var(--shadow-drop-lg); pointer-events: none; }
.run-text .step:hover .tip, .run-text .step:focus .tip { display: block; }
/* Both legends take the assisted one's five lines, so the two texts start level. */
.legend { font-size: 0.8rem; color: var(--body-text-color-subdued); margin: 0.2rem 0 0.4rem;
  line-height: 1.7; min-height: 8.5em; }
@media (max-width: 640px) { .legend { min-height: 0; } }  /* the columns stack */
.legend .toggle { color: var(--body-text-color); cursor: pointer; }
.legend .tok { padding: 0 0.3rem; border-radius: 3px; color: var(--body-text-color); }
/* A running text's cursor, after its last step (compare.format.run_html_of). */
.run-text.running::after { content: "▍"; animation: blink 1s steps(1) infinite;
  color: var(--color-accent); }
@keyframes blink { 50% { opacity: 0; } }
.badge { display: inline-block; font-size: 0.7rem; font-family: var(--font); font-weight: 600;
  padding: 0.05rem 0.45rem; border-radius: 999px; margin-left: 0.4rem;
  background: var(--neutral-200); color: var(--neutral-800); }
.badge.stopped { background: #fde68a; color: #78350f; }
.badge.running { background: #c7d2fe; color: #312e81; }
.badge.done { background: #bbf7d0; color: #14532d; }
.stat-card { position: relative; padding: 0.2rem 0; }
.stat-card .badge { position: absolute; right: 0; top: -1.6rem; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(7.5rem, 1fr));
  gap: 0.4rem; }
.stat { border: 1px solid var(--border-color-primary); border-radius: var(--radius-md);
  padding: 0.35rem 0.55rem; background: var(--background-fill-primary); }
.stat .value { font-size: 1.05rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.stat .label { font-size: 0.72rem; color: var(--body-text-color-subdued); }
.chart-note, .chart-note p { font-size: 0.8rem; color: var(--body-text-color-subdued); }
.stat-empty { color: var(--body-text-color-subdued); font-size: 0.85rem; }
"""

# A roving tabindex over the steps of the assisted text (`compare.format._step_html`): the
# text is one Tab stop rather than hundreds, the arrow keys (and Home, End) move between its
# steps, and the focused step shows its details, as on hover. Only the current step has
# tabindex 0, so Tab leaves the text and Shift+Tab comes back to the step last visited. The
# listeners sit on the document, so they hold across every update of the text.
JS = """
() => {
  const stepOf = (node) => (node instanceof Element ? node.closest(".run-text .step") : null);
  const stepsBeside = (step) => [...step.parentElement.querySelectorAll(":scope > .step")];
  document.addEventListener("focusin", (event) => {
    const focused = stepOf(event.target);
    if (!focused) return;
    for (const step of stepsBeside(focused)) step.tabIndex = step === focused ? 0 : -1;
  });
  document.addEventListener("keydown", (event) => {
    const focused = stepOf(event.target);
    if (!focused || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const steps = stepsBeside(focused);
    const here = steps.indexOf(focused);
    const moves = { ArrowLeft: here - 1, ArrowRight: here + 1, Home: 0, End: steps.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    steps[Math.min(Math.max(moves[event.key], 0), steps.length - 1)].focus();
  });
}
"""


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
    """The components of a tab's outputs (each tab's `format`), named by field, in the
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
