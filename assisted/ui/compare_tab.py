"""The Compare tab: one prompt through plain decoding, then assisted generation, streamed
side by side with their statistics; Replay race replays both at their recorded pace.

`build_compare_tab` lays the tab out and wires its events. The handlers that need the
app's shared state are `Comparing`'s methods; the others are plain functions.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import gradio as gr

from assisted.drafters import DrafterKind
from assisted.examples import Example
from assisted.pairs import PairSpec
from assisted.settings import (
    ASSISTANT_QUANTS,
    AUTO_CAP,
    MAX_DRAFT_TOKENS,
    MAX_NEW_TOKENS_CAP,
    SCHEDULES,
    DraftSettings,
    RunSettings,
    SettingsError,
    validate_prompt,
)
from assisted.ui.compare_charts import (
    HEADROOM,
    draft_length_frame,
    histogram_frame,
    position_frame,
    step_time_frame,
    timeline_frame,
)
from assisted.ui.compare_format import (
    LEGEND_HTML,
    NOTHING_DRAFTED,
    chunks_from_dicts,
    race_timeline,
    run_html,
    stat_card_html,
)
from assisted.ui.live import MODES, idle_frame, result_of
from assisted.ui.shared import CUSTOM, VISITORS_AT_ONCE, PairLoader, Stops, whole

DEFAULT_MAX_NEW_TOKENS = 64
REPLAY_FRAME_S = 0.05

StreamComparison = Callable[
    [PairSpec, str, str, bool, str, RunSettings, DraftSettings, str], Iterator[tuple]
]
"""`app.stream_comparison`, the GPU work: (spec, device, dtype, allow_local, prompt, settings,
draft, stop_key) → every output's value, as steps arrive."""


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
            max_new_tokens=whole(max_new_tokens),
            sample=decoding_mode == "sampling",
            temperature=float(temperature),
            top_p=float(top_p),
            seed=whole(seed),
            chat_template=bool(chat_template),
        ).validate()
    except SettingsError as error:
        raise gr.Error(str(error), title="Settings") from error


def draft_settings(
    spec: PairSpec,
    draft_length: float,
    schedule: str,
    confidence_threshold: float,
    assistant_quant: str,
) -> DraftSettings:
    """The drafter's settings from the tab's inputs. The draft length slider sets the
    candidates per step of whichever drafter the pair has."""
    length = whole(draft_length)
    lookup = spec.drafter is DrafterKind.PROMPT_LOOKUP
    try:
        return DraftSettings(
            num_assistant_tokens=spec.draft.num_assistant_tokens if lookup else length,
            schedule=schedule,
            confidence_threshold=float(confidence_threshold),
            prompt_lookup_num_tokens=length if lookup else spec.draft.prompt_lookup_num_tokens,
            max_matching_ngram_size=spec.draft.max_matching_ngram_size,
            assistant_quant=assistant_quant,
        ).validate_for(spec.drafter)
    except SettingsError as error:
        raise gr.Error(str(error), title="Settings") from error


def draft_length_default(spec: PairSpec | None) -> int:
    draft = spec.draft if spec else DraftSettings()
    if spec and spec.drafter is DrafterKind.PROMPT_LOOKUP:
        return draft.prompt_lookup_num_tokens
    return draft.num_assistant_tokens


class Comparing:
    """The tab's handlers that use the app's shared state: its pairs, the line for the
    device, the stop events and the GPU entry point."""

    def __init__(self, loader: PairLoader, stops: Stops, stream: StreamComparison):
        self.loader = loader
        self.stops = stops
        self.stream = stream

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
    ) -> Iterator[tuple]:
        """Run plain decoding, then assisted generation, on one prompt; stream both.

        Every yield carries all outputs; the last one carries the JSON result (the schema
        of the CLI's --json)."""
        if not (prompt or "").strip():
            if event.target is None:  # an API call, not a click: an error, like any bad input
                raise gr.Error(
                    "the prompt is empty: type something to generate from", title="Settings"
                )
            gr.Warning("Type a prompt first: nothing was run.", title="Empty prompt")
            skipped = [gr.skip()] * (len(idle_frame("")) - 1)
            yield ("Nothing ran: the prompt is empty.", *skipped)
            return
        settings = run_settings(
            prompt, max_new_tokens, decoding_mode, temperature, top_p, seed, chat_template
        )
        spec, allow_local = self.loader.spec_for(pair, custom_target, custom_assistant)
        draft = draft_settings(spec, draft_length, schedule, confidence_threshold, assistant_quant)
        key = request.session_hash or str(id(request))
        with self.loader.request(self.stops, key) as (turn, stop):
            for status in self.loader.until_ready(spec, allow_local, turn, stop):
                yield idle_frame(status)
            if stop.is_set():
                yield idle_frame("**Stopped** before the timed runs started.")
                return
            self.loader.load(spec, allow_local, progress)
            device, dtype = self.loader.config.device, self.loader.config.dtype
            frames = self.stream(spec, device, dtype, allow_local, prompt, settings, draft, key)
            frame = None
            for frame in frames:
                yield frame
            if frame is not None and result_of(frame):  # the pair's pace, for the benchmark
                self.loader.paces.note_comparison(spec.target, spec.name, result_of(frame))

    def request_stop(self, request: gr.Request) -> None:
        event = self.stops.get(request.session_hash or "")
        if event is not None:
            event.set()

    def on_pair_change(self, pair: str) -> tuple:
        """Show the custom inputs for a custom pair; set the draft settings to the pair's."""
        spec = self.loader.config.registry.get(pair)
        draft = spec.draft if spec else DraftSettings()
        label = DRAFT_CAP_LABEL if draft.schedule == "auto" else DRAFT_LENGTH_LABEL
        return (
            gr.update(visible=pair == CUSTOM),
            gr.update(value=draft_length_default(spec), label=label),
            draft.schedule,
            draft.confidence_threshold,
            draft.assistant_quant,
        )


def replay(race: dict | None) -> Iterator[tuple]:
    """Both finished runs again, started together, each step shown at its recorded time."""
    if not race:
        gr.Warning("Run a comparison first: the race replays a finished one.")
        yield gr.skip(), gr.skip(), gr.skip()
        return
    runs = {mode: chunks_from_dicts(race[mode]["chunks"]) for mode in MODES}
    timeline = race_timeline(runs)
    shown = dict.fromkeys(MODES, 0)
    start = time.perf_counter()
    position = 0

    def frame(finished: bool) -> tuple:
        counts = ", ".join(f"{mode} {shown[mode]}/{len(runs[mode])} steps" for mode in MODES)
        status = (
            "**Race replayed** at the recorded pace: both runs started together."
            if finished
            else f"**Replaying** both runs at their recorded pace: {counts}."
        )
        texts = (
            run_html(
                runs[mode][: shown[mode]],
                mode,
                running=not finished and shown[mode] < len(runs[mode]),
                stopped=finished and race[mode]["stopped"],
                placeholder="Not run.",
            )
            for mode in MODES
        )
        return (status, *texts)

    yield frame(False)
    while position < len(timeline):
        elapsed = time.perf_counter() - start
        while position < len(timeline) and timeline[position][0] <= elapsed:
            _, mode, count = timeline[position]
            shown[mode] = count
            position += 1
        yield frame(False)
        time.sleep(REPLAY_FRAME_S)
    yield frame(True)


def toggle_sampling(mode: str) -> dict:
    return gr.update(visible=mode == "sampling")


DRAFT_LENGTH_LABEL = "Draft length γ (candidates per step)"
DRAFT_CAP_LABEL = "Draft length cap (auto chooses γ from 0 to this)"


def on_schedule_change(schedule: str, length: float) -> dict:
    """Under `auto` the draft length is the policy's cap: picking auto raises it to at
    least the default cap, and the label says what the number means under each schedule."""
    if schedule == "auto":
        return gr.update(value=max(whole(length), AUTO_CAP), label=DRAFT_CAP_LABEL)
    return gr.update(label=DRAFT_LENGTH_LABEL)


# -- layout --------------------------------------------------------------------------------


@dataclass
class _Buttons:
    compare: gr.Button
    stop: gr.Button
    replay: gr.Button


@dataclass
class _PairPicker:
    pair: gr.Dropdown
    custom_group: gr.Group
    custom_target: gr.Textbox
    custom_assistant: gr.Textbox
    load: gr.Button
    status: gr.Markdown


@dataclass
class _Settings:
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


def _prompt_column(examples: list[Example]) -> tuple[gr.Textbox, _Buttons]:
    prompt = gr.Textbox(
        label="Prompt",
        lines=6,
        max_lines=16,
        placeholder="Ask for code, an edit, a summary, or an answer from a passage…",
        elem_id="prompt",
    )
    with gr.Row():
        buttons = _Buttons(
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


def _pair_picker(loader: PairLoader) -> _PairPicker:
    config = loader.config
    choices = [(name, name) for name in config.registry]
    # Without the choice, Gradio itself refuses "custom" from API clients, naming the choices.
    if config.allow_custom:
        choices.append(("custom: enter target / assistant ids", CUSTOM))
    pair = gr.Dropdown(choices, value=config.default_pair, label="Model pair", elem_id="pair")
    with gr.Group(visible=False) as custom_group:
        custom_target = gr.Textbox("", label="Target model id", placeholder="owner/name")
        custom_assistant = gr.Textbox(
            "",
            label="Assistant model id (empty: prompt lookup)",
            placeholder="owner/name, same tokenizer as the target",
        )
        load = gr.Button("Load pair", size="sm")
    status = gr.Markdown("Loading the model pair…", elem_id="pair-status")
    return _PairPicker(pair, custom_group, custom_target, custom_assistant, load, status)


def _settings(spec: PairSpec) -> _Settings:
    """The Settings accordion, set to the pair's own draft settings."""
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        max_new_tokens = gr.Slider(
            1,
            MAX_NEW_TOKENS_CAP,
            value=DEFAULT_MAX_NEW_TOKENS,
            step=1,
            precision=0,
            label="Max new tokens",
            elem_id="max-new-tokens",
        )
        decoding_mode = gr.Radio(["greedy", "sampling"], value="greedy", label="Decoding")
        with gr.Row(visible=False) as sampling_row:
            temperature = gr.Slider(0.05, 2.0, value=0.7, step=0.05, label="Temperature")
            top_p = gr.Slider(0.05, 1.0, value=0.9, step=0.05, label="Top-p")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Seed")
        draft_length = gr.Slider(
            1,
            MAX_DRAFT_TOKENS,
            value=draft_length_default(spec),
            step=1,
            precision=0,
            label=DRAFT_CAP_LABEL if spec.draft.schedule == "auto" else DRAFT_LENGTH_LABEL,
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
            info="the assistant stops a draft early when unsure",
        )
        assistant_quant = gr.Radio(
            list(ASSISTANT_QUANTS),
            value=spec.draft.assistant_quant,
            label="Assistant precision (the target's never changes)",
            info="int8: int8 weights and activations · int8-wo: int8 weights only · none: "
            "the pair's dtype · auto: int8 on a CPU, the pair's dtype on a GPU",
            elem_id="assistant-quant",
        )
        chat_template = gr.Checkbox(value=True, label="Wrap the prompt in the chat template")
    return _Settings(
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


def _outputs() -> list[gr.components.Component]:
    """The tab's outputs, laid out, in the order of the /compare endpoint's outputs."""
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
            plain_card = gr.HTML(stat_card_html(None), elem_id="plain-card", label="plain_stats")
        with gr.Column():
            gr.Markdown("### Assisted")
            gr.HTML(LEGEND_HTML)
            assisted_text = gr.HTML(
                run_html([], "assisted", placeholder="Assisted generation output appears here."),
                elem_id="assisted-text",
                label="assisted_text",
            )
            assisted_card = gr.HTML(
                stat_card_html(None), elem_id="assisted-card", label="assisted_stats"
            )
    summary = gr.Markdown(elem_id="summary", label="summary")
    charts = _charts()
    with gr.Accordion("Result as JSON (the CLI's --json schema)", open=False):
        result = gr.JSON(label="result")
    return [status, plain_text, assisted_text, plain_card, assisted_card, summary, *charts, result]


def _charts() -> list[gr.LinePlot | gr.BarPlot | gr.ScatterPlot]:
    """Tokens over time and accepted per step; acceptance by draft position and the time of
    a step, with its drafting stacked under the target's part; the draft length of each
    step, coloured by where its candidates came from."""
    colors = {"plain": "#6366f1", "assisted": "#10b981"}
    # The same colours as the text: green for drafting, lilac for the target's own work.
    parts = {"drafting": colors["assisted"], "target": colors["plain"]}
    common = {"show_label": False, "height": 260}
    with gr.Row():
        timeline = gr.LinePlot(
            timeline_frame({mode: [] for mode in MODES}),
            x="t_s",
            y="tokens",
            color="run",
            color_map=colors,
            title="New tokens over time",
            label="tokens_over_time",
            x_title="seconds since the run started",
            y_title="new tokens",
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
            **common,
        )
    with gr.Row():
        draft_lengths = _draft_length_chart(colors["assisted"], common)
    gr.Markdown(DRAFT_LENGTH_NOTE, elem_classes="chart-note")
    return [timeline, histogram, positions, step_times, draft_lengths]


DRAFT_LENGTH_NOTE = (
    "**Draft length per step.** Under the *auto* schedule, the γ the policy chose at each "
    "step: 0 is a plain step, the target alone, and the colour says where the candidates "
    "came from (grey, *none*: the step drafted nothing). Under the other schedules, the "
    "candidates each step drafted. Hover over a point for what the step drafted and accepted."
)


def _draft_length_chart(assistant_color: str, common: dict) -> gr.ScatterPlot:
    """γ per step: under `auto` what the policy chose, a point at 0 for a plain step;
    under the other schedules what was drafted. One point per step, so the plain steps show."""
    # Grey for nothing drafted, like the muted rejected drafts; the assistant's green.
    sources = {
        DrafterKind.ASSISTANT.label: assistant_color,
        DrafterKind.PROMPT_LOOKUP.label: "#f59e0b",
        NOTHING_DRAFTED: "#9ca3af",
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
        x_axis_format="~g",  # "3", not "3.0"
        y_axis_format="~g",
        tooltip=["drafted", "accepted"],
        elem_id="draft-length-chart",
        **common,
    )


def build_compare_tab(
    demo: gr.Blocks,
    loader: PairLoader,
    stops: Stops,
    stream: StreamComparison,
    examples: list[Example],
) -> None:
    """The tab's components and events, inside the caller's `gr.Tab`; the page's load shows
    the default pair's status."""
    handlers = Comparing(loader, stops, stream)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            prompt, buttons = _prompt_column(examples)
        with gr.Column(scale=2):
            picker = _pair_picker(loader)
            settings = _settings(loader.config.registry[loader.config.default_pair])
    outputs = _outputs()
    race = gr.State(None)
    status, plain_text, assisted_text = outputs[:3]
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
    buttons.compare.click(
        handlers.compare,
        inputs=inputs,
        outputs=[*outputs, race],
        api_name="compare",
        # Many at once: each fetches its files, then takes its turn on the device.
        concurrency_limit=VISITORS_AT_ONCE,
        concurrency_id="visitors",
        # One progress display, on the status line: ten spinners would be noise, and a
        # browser on the server's own CPU would repaint them while runs are timed.
        show_progress="minimal",
        show_progress_on=status,
    ).then(
        lambda state: gr.update(interactive=bool(state)),
        inputs=race,
        outputs=buttons.replay,
        api_visibility="private",
    )
    replay_event = buttons.replay.click(
        replay,
        inputs=race,
        outputs=[status, plain_text, assisted_text],
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )
    buttons.stop.click(
        handlers.request_stop,
        cancels=[replay_event],
        api_visibility="private",
        concurrency_limit=None,
        show_progress="hidden",
    )
    _wire_pair_and_settings(demo, handlers, picker, settings)


def _wire_pair_and_settings(
    demo: gr.Blocks, handlers: Comparing, picker: _PairPicker, settings: _Settings
) -> None:
    loader = handlers.loader
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
        loader.load_chosen,
        inputs=picker.pair,
        outputs=picker.status,
        api_visibility="private",
        concurrency_id="pair-status",
        concurrency_limit=VISITORS_AT_ONCE,
    )
    picker.load.click(
        loader.load_custom,
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
        loader.load_chosen,
        inputs=picker.pair,
        outputs=picker.status,
        api_visibility="private",
        concurrency_id="pair-status",
        concurrency_limit=VISITORS_AT_ONCE,
    )
