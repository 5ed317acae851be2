"""The Compare tab: one prompt through plain decoding, then assisted generation, streamed
side by side with their statistics; Replay race replays both at their recorded pace.

`build_compare_tab` places the tab's components (below) and wires their events.
The handlers that need the app's shared state are `CompareHandlers`' methods; the others
are plain functions.

The Compare tab's layout: the prompt and its buttons, the pair picker, the settings, and
the outputs (both runs' text and stat cards, the summary, the charts, the JSON result).

The builders only place components and return them; `compare.tab` wires their events.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import gradio as gr

from assisted.core.settings import (
    ASSISTANT_QUANTS,
    AUTO_CAP,
    MAX_DRAFT_TOKENS,
    MAX_NEW_TOKENS_CAP,
    SCHEDULES,
    DrafterKind,
    DraftSettings,
    Example,
    RunSettings,
    SettingsError,
    validate_prompt,
)
from assisted.models.pairs import PairSpec
from assisted.ui.compare.chunks import (
    HEADROOM,
    NOTHING_DRAFTED,
    ORACLE,
    chunks_from_dicts,
    draft_length_frame,
    histogram_frame,
    position_frame,
    race_timeline,
    step_time_frame,
    timeline_frame,
)
from assisted.ui.compare.format import (
    LEGEND_HTML,
    UNCHANGED,
    CompareOutputs,
    ComparisonRequest,
    ReplayOutputs,
    run_html,
    stat_card_html,
)
from assisted.ui.compare.gpu import stream_comparison
from assisted.ui.compare.live import MODES, idle_outputs
from assisted.ui.errors import refusal
from assisted.ui.gpu_calls import GpuEvents, TabHandlers, gpu_turn, stop_key
from assisted.ui.pair_access import CUSTOM, PairAccess
from assisted.ui.tabs import (
    TICKS,
    VISITORS_AT_ONCE,
    Tab,
    TabState,
    folded_json,
    in_order,
    int_if_whole,
    on_device,
    on_stop,
    prompt_box,
    updating_only,
    whole_slider,
)

DEFAULT_MAX_NEW_TOKENS = 64
DRAFT_LENGTH_LABEL = "Draft length γ (candidates per step)"
DRAFT_CAP_LABEL = "Draft length cap (auto chooses γ from 0 to this)"


def draft_length_default(spec: PairSpec | None) -> int:
    """The draft length slider's value for a pair: its drafter's own length setting."""
    draft = spec.draft if spec else DraftSettings()
    if spec and spec.drafter is DrafterKind.PROMPT_LOOKUP:
        return draft.prompt_lookup_num_tokens
    return draft.num_assistant_tokens


# Why the default differs by device, in the words a visitor needs (docs/space.md).
PAIR_INFO = (
    "On ZeroGPU's half of an RTX PRO 6000 Blackwell a small model's eager step costs about "
    "its layers' kernel launches, so the assistant's drafts replay as CUDA graphs (a 0.5B: "
    "4.2 ms a token, measured on an H200); a 7B target's step moves 15 GB, about 17 ms "
    "there (estimated), so a drafted token costs a small share of it: the 7B is the GPU "
    "default."
)


@dataclass
class Buttons:
    compare: gr.Button
    stop: gr.Button
    replay: gr.Button


@dataclass
class PairPicker:
    pair: gr.Dropdown
    custom_group: gr.Group
    custom_target: gr.Textbox
    custom_assistant: gr.Textbox
    load: gr.Button
    status: gr.Markdown


@dataclass
class Settings:
    max_new_tokens: gr.Slider
    decoding_mode: gr.Radio
    sampling_row: gr.Row
    temperature: gr.Slider
    top_p: gr.Slider
    seed: gr.Number
    draft_length: gr.Slider
    schedule: gr.Radio
    confidence_threshold: gr.Slider
    assistant_quant: gr.Radio
    chat_template: gr.Checkbox


def prompt_column(examples: list[Example]) -> tuple[gr.Textbox, Buttons]:
    placeholder = "Ask for code, an edit, a summary, or an answer from a passage…"
    prompt = prompt_box(placeholder, "prompt")
    with gr.Row():
        buttons = Buttons(
            compare=gr.Button("Compare", variant="primary", elem_id="compare"),
            stop=gr.Button("Stop", variant="stop", elem_id="stop"),
            replay=gr.Button("Replay race", interactive=False, elem_id="replay"),
        )
    gr.Examples(
        examples=[[example.prompt] for example in examples],
        inputs=[prompt],
        example_labels=[example.label for example in examples],
        label="Example prompts (inputs that answers copy from are accepted most)",
        cache_examples=False,
        # Short labels: every kind fits on one page, rather than the first few of 24.
        examples_per_page=len(examples),
    )
    return prompt, buttons


def pair_picker(access: PairAccess) -> PairPicker:
    config = access.config
    choices = [(name, name) for name in config.registry]
    # Without the choice, Gradio itself refuses "custom" from API clients, naming the choices.
    if config.allow_custom:
        choices.append(("custom: enter target / assistant ids", CUSTOM))
    pair = gr.Dropdown(
        choices,
        value=config.default_pair,
        label="Model pair",
        info=PAIR_INFO,
        elem_id="pair",
    )
    with gr.Group(visible=False) as custom_group:
        custom_target = gr.Textbox("", label="Target model id", placeholder="owner/name")
        custom_assistant = gr.Textbox(
            "",
            label="Assistant model id (empty: prompt lookup)",
            placeholder="owner/name, same tokenizer as the target",
        )
        load = gr.Button("Load pair", size="sm")
    status = gr.Markdown("Loading the model pair…", elem_id="pair-status")
    return PairPicker(pair, custom_group, custom_target, custom_assistant, load, status)


def settings_accordion(spec: PairSpec) -> Settings:
    """The Settings accordion, set to the pair's own draft settings."""
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        max_new_tokens = whole_slider(
            MAX_NEW_TOKENS_CAP, DEFAULT_MAX_NEW_TOKENS, "Max new tokens", elem_id="max-new-tokens"
        )
        decoding_mode = gr.Radio(["greedy", "sampling"], value="greedy", label="Decoding")
        with gr.Row(visible=False) as sampling_row:
            temperature = gr.Slider(0.05, 2.0, value=0.7, step=0.05, label="Temperature")
            top_p = gr.Slider(0.05, 1.0, value=0.9, step=0.05, label="Top-p")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Seed")
        draft_length = whole_slider(
            MAX_DRAFT_TOKENS,
            draft_length_default(spec),
            DRAFT_CAP_LABEL if spec.draft.schedule == "auto" else DRAFT_LENGTH_LABEL,
        )
        schedule = gr.Radio(
            list(SCHEDULES),
            value=spec.draft.schedule,
            label="Draft length schedule",
            info="heuristic: +2 after a fully accepted step, −1 otherwise; "
            "auto: γ per step from measured costs, the draft length its cap",
            elem_id="schedule",
        )
        confidence_threshold = gr.Slider(
            0.0,
            0.95,
            value=spec.draft.confidence_threshold,
            step=0.05,
            label="Assistant confidence threshold (0: off)",
            info="the assistant stops a draft early when unsure (under auto, greedy: where "
            "its next candidate stops paying)",
        )
        assistant_quant = gr.Radio(
            list(ASSISTANT_QUANTS),
            value=spec.draft.assistant_quant,
            label="Assistant precision (the target's never changes)",
            info="int8: int8 weights and activations · int8-wo: int8 weights only · "
            "int4-wo: 4-bit weights only · none: the pair's dtype · auto: int4-wo on a bf16 "
            "CPU, int8 on an fp32 one, the pair's dtype on a GPU",
            elem_id="assistant-quant",
        )
        chat_template = gr.Checkbox(value=True, label="Wrap the prompt in the chat template")
    return Settings(
        max_new_tokens,
        decoding_mode,
        sampling_row,
        temperature,
        top_p,
        seed,
        draft_length,
        schedule,
        confidence_threshold,
        assistant_quant,
        chat_template,
    )


def output_components() -> dict[str, gr.components.Component]:
    """The tab's outputs, laid out, by their names in `CompareOutputs` (the race replay's
    state is the tab's to add)."""
    status = gr.Markdown(
        "Runs are sequential on one device for honest timing: plain first, then assisted.",
        elem_id="status",
        label="status",
    )
    with gr.Row(equal_height=False):
        with gr.Column():
            gr.Markdown("### Plain")
            gr.HTML('<div class="legend">the target alone: one token per step</div>')
            plain_text = gr.HTML(
                run_html([], "plain", placeholder="Plain decoding output appears here."),
                elem_id="plain-text",
                label="plain_text",
            )
            plain_stats = gr.HTML(stat_card_html(None), elem_id="plain-card", label="plain_stats")
        with gr.Column():
            gr.Markdown("### Assisted")
            gr.HTML(LEGEND_HTML)
            assisted_text = gr.HTML(
                run_html([], "assisted", placeholder="Assisted generation output appears here."),
                elem_id="assisted-text",
                label="assisted_text",
            )
            assisted_stats = gr.HTML(
                stat_card_html(None), elem_id="assisted-card", label="assisted_stats"
            )
    summary = gr.Markdown(elem_id="summary", label="summary")
    charts = _charts()
    result = folded_json("Result as JSON (the CLI's --json schema)", "result")
    return {
        "status": status,
        "plain_text": plain_text,
        "assisted_text": assisted_text,
        "plain_stats": plain_stats,
        "assisted_stats": assisted_stats,
        "summary": summary,
        **charts,
        "result": result,
    }


# The charts' colours, as in the text: green for the assisted run and its drafting, lilac
# for plain decoding and the target's own work.
RUN_COLORS = {"plain": "#6366f1", "assisted": "#10b981"}


def _charts() -> dict[str, gr.LinePlot | gr.BarPlot | gr.ScatterPlot]:
    """Tokens over time and accepted per step; acceptance by draft position and the time of
    a step, with its drafting stacked under the target's part; the draft length of each
    step, coloured by where its candidates came from."""
    parts = {"drafting": RUN_COLORS["assisted"], "target": RUN_COLORS["plain"]}
    common = {"show_label": False, "height": 260}
    with gr.Row():
        timeline = gr.LinePlot(
            timeline_frame({mode: [] for mode in MODES}),
            x="t_s",
            y="tokens",
            color="run",
            color_map=RUN_COLORS,
            title="New tokens over time",
            label="tokens_over_time",
            x_title="seconds since the run started",
            y_title="new tokens",
            x_axis_format=TICKS,
            y_axis_format=TICKS,
            **common,
        )
        histogram = gr.BarPlot(
            histogram_frame([]),
            x="accepted",
            y="steps",
            title="Accepted candidates per step (assisted)",
            label="accept_histogram",
            x_title="accepted in the step",
            y_title="steps",
            y_lim=[0, None],
            **common,
        )
    with gr.Row():
        positions = gr.BarPlot(
            position_frame([]),
            x="position",
            y="accepted",
            title="Acceptance by draft position (assisted)",
            label="acceptance_by_position",
            x_title="candidate's position in the draft",
            y_title="steps that accepted it",
            y_lim=[0, 1],
            y_axis_format=".0%",
            **common,
        )
        step_times = gr.BarPlot(
            step_time_frame(dict.fromkeys(MODES)),
            x="run",
            y="s",
            color="part",
            color_map=parts,
            y_aggregate="mean",
            sort="-x",  # plain first: its name sorts after "assisted"
            title="Time per step: what a step costs, and what it commits",
            label="time_per_step",
            x_title="the first step includes the prefill",
            y_title="mean seconds per step",
            y_lim=[0, None],
            y_axis_format=TICKS,
            **common,
        )
    with gr.Row():
        draft_lengths = _draft_length_chart(common)
    gr.Markdown(DRAFT_LENGTH_NOTE, elem_classes="chart-note")
    return {
        "tokens_over_time": timeline,
        "accept_histogram": histogram,
        "acceptance_by_position": positions,
        "time_per_step": step_times,
        "draft_length_per_step": draft_lengths,
    }


DRAFT_LENGTH_NOTE = (
    "**Draft length per step.** Under the *auto* schedule, the γ the policy chose at each "
    "step: 0 is a plain step, the target alone, and the colour says where the candidates "
    "came from (grey, *none*: the step drafted nothing). Under the other schedules, the "
    "candidates each step drafted. In purple, once a greedy run ends: the oracle's schedule, "
    "the fastest the run's own costs allowed in hindsight (its step 1, 2, … against the "
    "run's). Hover over a point for what the step drafted and accepted."
)


def _draft_length_chart(common: dict) -> gr.ScatterPlot:
    """γ per step: under `auto` what the policy chose, a point at 0 for a plain step;
    under the other schedules what was drafted. One point per step, so the plain steps show."""
    # Grey for nothing drafted, like the muted rejected drafts; the assistant's green.
    sources = {
        DrafterKind.ASSISTANT.label: RUN_COLORS["assisted"],
        DrafterKind.PROMPT_LOOKUP.label: "#f59e0b",
        NOTHING_DRAFTED: "#9ca3af",
        ORACLE: "#7c3aed",
        DrafterKind.EARLY_EXIT.label: "#0ea5e9",
    }
    return gr.ScatterPlot(
        draft_length_frame([]),
        x="step",
        y="candidates",
        color="source",
        color_map={**sources, HEADROOM: "transparent"},
        colors_in_legend=list(sources),
        title="Draft length per step (assisted)",
        label="draft_length_per_step",
        x_title="step",
        y_title="γ (candidates)",
        color_title="candidates from",
        x_lim=[0, None],
        y_lim=[-0.5, None],  # the plain steps' points whole, above the bottom edge
        x_axis_format=TICKS,  # "3", not "3.0"; 100 steps, not "1e+2"
        y_axis_format=TICKS,
        tooltip=["drafted", "accepted"],
        elem_id="draft-length-chart",
        **common,
    )


NAME = "compare"  # its id: its element's, its GPU call's key, its requests' Stop key
REPLAY_EVERY_S = 0.05  # the race replay's update interval

StreamComparison = Callable[[ComparisonRequest], GpuEvents[CompareOutputs]]
"""`app.stream_comparison`, the GPU work: a comparison's request → every output's value, as
steps arrive, within the call's events (`assisted.ui.gpu_calls`)."""


def run_settings(
    prompt: str,
    max_new_tokens: float,
    decoding_mode: str,
    temperature: float,
    top_p: float,
    seed: float,
    chat_template: bool,
) -> RunSettings:
    """The run's settings from the tab's inputs; a gr.Error names what is wrong."""
    try:
        validate_prompt(prompt)
        return RunSettings(
            max_new_tokens=int_if_whole(max_new_tokens),
            sample=decoding_mode == "sampling",
            temperature=float(temperature),
            top_p=float(top_p),
            seed=int_if_whole(seed),
            chat_template=bool(chat_template),
        ).validate()
    except SettingsError as error:
        raise refusal(str(error), title="Settings") from error


def draft_settings(
    spec: PairSpec,
    draft_length: float,
    schedule: str,
    confidence_threshold: float,
    assistant_quant: str,
) -> DraftSettings:
    """The drafter's settings from the tab's inputs, over the pair's own: the draft length
    slider sets the candidates per step of whichever drafter the pair has, and settings the
    tab has no input for (the cumulative threshold, the lookup) stay the pair's."""
    length = int_if_whole(draft_length)
    lookup = spec.drafter is DrafterKind.PROMPT_LOOKUP
    inputs = {"prompt_lookup_num_tokens" if lookup else "num_assistant_tokens": length}
    try:
        return dataclasses.replace(
            spec.draft,
            schedule=schedule,
            confidence_threshold=float(confidence_threshold),
            assistant_quant=assistant_quant,
            **inputs,
        ).validate_for(spec.drafter)
    except SettingsError as error:
        raise refusal(str(error), title="Settings") from error


class CompareHandlers(TabHandlers):
    """The tab's handlers that use the app's shared state: its pairs, the line for the
    device, the stop events, the paces and GPU times, and the GPU entry point."""

    tab = NAME

    def compare(
        self,
        prompt: str,
        pair: str,
        custom_target: str,
        custom_assistant: str,
        max_new_tokens: int,
        decoding_mode: str,
        temperature: float,
        top_p: float,
        seed: int,
        draft_length: int,
        schedule: str,
        confidence_threshold: float,
        chat_template: bool,
        assistant_quant: str,
        request: gr.Request,
        event: gr.EventData,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (Gradio's injection idiom)
    ) -> Iterator[CompareOutputs]:
        """Run plain decoding, then assisted generation, on one prompt; stream both.

        Every yield carries all outputs, the last one the JSON result (the schema of the
        CLI's --json). While the runs stream, the page is sent `gr.skip()` for what they
        left unchanged between rebuilds (`live.HELD`), and an API caller its last value."""
        if not (prompt or "").strip():
            if event.target is None:  # an API call, not a click: an error, like any bad input
                raise refusal(
                    "the prompt is empty: type something to generate from", title="Settings"
                )
            gr.Warning("Type a prompt first: nothing was run.", title="Empty prompt")
            yield updating_only(CompareOutputs, status="Nothing ran: the prompt is empty.")
            return
        settings = run_settings(
            prompt, max_new_tokens, decoding_mode, temperature, top_p, seed, chat_template
        )
        access = self.shared.pairs
        spec, allow_local = access.spec_for(pair, custom_target, custom_assistant)
        draft = draft_settings(spec, draft_length, schedule, confidence_threshold, assistant_quant)
        access.check_for_device(spec, draft)  # before a GPU is asked for
        key = stop_key(request, NAME)
        with gpu_turn(self.shared, spec, allow_local, key) as turn:
            if not (yield from turn.waited(progress, idle_outputs, "nothing ran")):
                return
            comparison = ComparisonRequest(turn.place, prompt, settings, draft, turn.stop)
            api_call = event.target is None  # it reads each update whole
            outputs = None
            for item in turn.call(self.stream, comparison, CompareOutputs, idle_outputs):
                if api_call:
                    outputs = filled_in(item, outputs)
                    yield outputs
                else:
                    outputs = item
                    yield skipping_unchanged(outputs)
            # The pair's pace, for the benchmark's estimate.
            if outputs is not None and isinstance(outputs.result, dict):
                self.shared.paces.note_comparison(spec.target, spec.name, outputs.result)

    def on_pair_change(self, pair: str) -> tuple:
        """Show the custom inputs for a custom pair; set the draft settings to the pair's."""
        spec = self.shared.pairs.config.registry.get(pair)
        draft = spec.draft if spec else DraftSettings()
        label = DRAFT_CAP_LABEL if draft.schedule == "auto" else DRAFT_LENGTH_LABEL
        return (
            gr.update(visible=pair == CUSTOM),
            gr.update(value=draft_length_default(spec), label=label),
            draft.schedule,
            draft.confidence_threshold,
            draft.assistant_quant,
        )


def skipping_unchanged(outputs: CompareOutputs) -> CompareOutputs:
    """`outputs` for the page: `gr.skip()` for each that streaming left unchanged."""
    return outputs._replace(
        **{name: gr.skip() for name, value in outputs._asdict().items() if value is UNCHANGED}
    )


def filled_in(outputs: CompareOutputs, last: CompareOutputs | None) -> CompareOutputs:
    """`outputs` for an API caller: the `last` value of each that streaming left unchanged
    (a comparison's first update leaves none unchanged)."""
    return outputs._replace(
        **{
            name: getattr(last, name)
            for name, value in outputs._asdict().items()
            if value is UNCHANGED and last is not None
        }
    )


def replay(race: dict | None) -> Iterator[ReplayOutputs]:
    """Both finished runs again, started together, each step shown at its recorded time."""
    if not race:
        gr.Warning("Run a comparison first: the race replays a finished one.")
        yield updating_only(ReplayOutputs)
        return
    runs = {mode: chunks_from_dicts(race[mode]["chunks"]) for mode in MODES}
    timeline = race_timeline(runs)
    shown = dict.fromkeys(MODES, 0)
    start = time.perf_counter()
    position = 0

    def replayed(finished: bool) -> ReplayOutputs:
        counts = ", ".join(f"{mode} {shown[mode]}/{len(runs[mode])} steps" for mode in MODES)
        status = (
            "**Race replayed** at the recorded pace: both runs started together."
            if finished
            else f"**Replaying** both runs at their recorded pace: {counts}."
        )
        texts = {
            mode: run_html(
                runs[mode][: shown[mode]],
                mode,
                running=not finished and shown[mode] < len(runs[mode]),
                stopped=finished and race[mode]["stopped"],
                placeholder="Not run.",
            )
            for mode in MODES
        }
        return ReplayOutputs(
            status=status, plain_text=texts["plain"], assisted_text=texts["assisted"]
        )

    yield replayed(False)
    while position < len(timeline):
        elapsed = time.perf_counter() - start
        while position < len(timeline) and timeline[position][0] <= elapsed:
            _, mode, count = timeline[position]
            shown[mode] = count
            position += 1
        yield replayed(False)
        time.sleep(REPLAY_EVERY_S)
    yield replayed(True)


def toggle_sampling(mode: str) -> dict:
    return gr.update(visible=mode == "sampling")


def on_schedule_change(schedule: str, length: float) -> dict:
    """Under `auto` the draft length is the policy's cap: picking auto raises it to at
    least the default cap, and the label says what the number means under each schedule."""
    if schedule == "auto":
        return gr.update(value=max(int_if_whole(length), AUTO_CAP), label=DRAFT_CAP_LABEL)
    return gr.update(label=DRAFT_LENGTH_LABEL)


# -- the tab --------------------------------------------------------------------------------


def build_compare_tab(
    demo: gr.Blocks, tab: gr.Tab, shared: TabState, stream: StreamComparison
) -> None:
    """The tab's components and events, inside the caller's `tab` (`tabs.BuildTab`); the
    page's load shows the default pair's status."""
    handlers = CompareHandlers(shared, stream)
    access = shared.pairs
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            prompt, buttons = prompt_column(shared.examples)
        with gr.Column(scale=2):
            picker = pair_picker(access)
            settings = settings_accordion(access.config.registry[access.config.default_pair])
    outputs = {**output_components(), "race": gr.State(None)}
    inputs = [
        prompt,
        picker.pair,
        picker.custom_target,
        picker.custom_assistant,
        settings.max_new_tokens,
        settings.decoding_mode,
        settings.temperature,
        settings.top_p,
        settings.seed,
        settings.draft_length,
        settings.schedule,
        settings.confidence_threshold,
        settings.chat_template,
        settings.assistant_quant,
    ]
    on_device(
        buttons.compare.click, handlers.compare, inputs, CompareOutputs, outputs, "compare"
    ).then(
        lambda state: gr.update(interactive=bool(state)),
        inputs=outputs["race"],
        outputs=buttons.replay,
        api_visibility="private",
    )
    replay_event = buttons.replay.click(
        replay,
        inputs=outputs["race"],
        outputs=in_order(ReplayOutputs, outputs),
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )
    on_stop(buttons.stop, handlers.request_stop, cancels=[replay_event])
    _wire_pair_and_settings(demo, handlers, picker, settings)


def _wire_pair_and_settings(
    demo: gr.Blocks, handlers: CompareHandlers, picker: PairPicker, settings: Settings
) -> None:
    access = handlers.shared.pairs
    picker.pair.change(
        handlers.on_pair_change,
        inputs=picker.pair,
        outputs=[
            picker.custom_group,
            settings.draft_length,
            settings.schedule,
            settings.confidence_threshold,
            settings.assistant_quant,
        ],
        api_visibility="private",
        queue=False,
    ).then(
        access.load_chosen,
        inputs=picker.pair,
        outputs=picker.status,
        api_visibility="private",
        concurrency_id="pair-status",
        concurrency_limit=VISITORS_AT_ONCE,
    )
    picker.load.click(
        access.load_custom,
        inputs=[picker.custom_target, picker.custom_assistant],
        outputs=picker.status,
        api_visibility="private",
        concurrency_id="pair-status",
        concurrency_limit=VISITORS_AT_ONCE,
    )
    # `input`, not `change`: a pair's own settings, set by `on_pair_change`, stay as they are.
    settings.schedule.input(
        on_schedule_change,
        [settings.schedule, settings.draft_length],
        settings.draft_length,
        api_visibility="private",
        queue=False,
    )
    settings.decoding_mode.change(
        toggle_sampling,
        settings.decoding_mode,
        settings.sampling_row,
        api_visibility="private",
        queue=False,
    )
    demo.load(
        access.load_chosen,
        inputs=picker.pair,
        outputs=picker.status,
        api_visibility="private",
        concurrency_id="pair-status",
        concurrency_limit=VISITORS_AT_ONCE,
    )


# What `app.py`'s registry finds (`assisted.ui.tabs.registry`).
TAB = Tab("Compare", NAME, build_compare_tab, stream_comparison)
