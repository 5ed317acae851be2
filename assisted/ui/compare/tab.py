"""The Compare tab: one prompt through plain decoding, then assisted generation, streamed
side by side with their statistics; Replay race replays both at their recorded pace.

`build_compare_tab` places the tab's components (`compare.layout`) and wires their events.
The handlers that need the app's shared state are `CompareHandlers`' methods; the others
are plain functions.
"""

import dataclasses
import time
from collections.abc import Callable, Iterator

import gradio as gr

from assisted.core.drafters import DrafterKind
from assisted.core.settings import (
    AUTO_CAP,
    DraftSettings,
    RunSettings,
    SettingsError,
    validate_prompt,
)
from assisted.models.pairs import PairSpec
from assisted.ui.compare import layout
from assisted.ui.compare.chunks import chunks_from_dicts, race_timeline
from assisted.ui.compare.format import run_html
from assisted.ui.compare.gpu import stream_comparison
from assisted.ui.compare.layout import DRAFT_CAP_LABEL, DRAFT_LENGTH_LABEL, draft_length_default
from assisted.ui.compare.live import MODES, idle_outputs
from assisted.ui.compare.outputs import UNCHANGED, CompareOutputs, ReplayOutputs
from assisted.ui.compare.request import ComparisonRequest
from assisted.ui.errors import refusal
from assisted.ui.gpu_calls import GpuEvents
from assisted.ui.gpu_turn import TabHandlers, gpu_turn, stop_key
from assisted.ui.pair_access import CUSTOM
from assisted.ui.tabs import (
    VISITORS_AT_ONCE,
    Tab,
    TabState,
    in_order,
    int_if_whole,
    on_device,
    on_stop,
    updating_only,
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
            prompt, buttons = layout.prompt_column(shared.examples)
        with gr.Column(scale=2):
            picker = layout.pair_picker(access)
            settings = layout.settings_accordion(access.config.registry[access.config.default_pair])
    outputs = {**layout.outputs(), "race": gr.State(None)}
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
    demo: gr.Blocks, handlers: CompareHandlers, picker: layout.PairPicker, settings: layout.Settings
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
