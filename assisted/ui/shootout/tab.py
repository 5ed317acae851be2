"""The Shoot-out tab: every drafter this target has on this device, raced on one prompt
against one plain baseline, ranked (`assisted.bench.shootout`); its last output is the
ranking that `python -m assisted PROMPT --shootout --json` prints.

`build_shootout_tab` lays the tab out and wires its events; its handlers are
`ShootoutHandlers`' methods.

The Shoot-out tab's components, laid out: the prompt, the pair, how much, and the
outputs. `shootout.tab.build_shootout_tab` wires their events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import gradio as gr

from assisted.bench import Progress, shootout
from assisted.bench.measuring import Streamed
from assisted.bench.shootout import MAX_NEW_TOKENS, MAX_REPEATS
from assisted.core.settings import RunSettings, SettingsError, validate_prompt
from assisted.ui.errors import refusal
from assisted.ui.gpu_calls import GpuEvents, TabHandlers, gpu_turn, stop_key
from assisted.ui.pair_access import Config
from assisted.ui.shootout.format import (
    ShootoutOutputs,
    ShootoutRequest,
    lanes_markdown,
    progress_markdown,
    race_frame,
    ranking_frame,
    sweep_frame,
    why_markdown,
)
from assisted.ui.shootout.gpu import stream_shootout
from assisted.ui.tabs import (
    TICKS,
    Tab,
    TabState,
    by_field,
    folded_json,
    int_if_whole,
    on_device,
    on_stop,
    prompt_box,
    tokens_and_rounds,
    updating_only,
)

DEFAULT_NEW_TOKENS = 64


def input_components(config: Config) -> tuple[gr.Textbox, gr.Dropdown, gr.Slider, gr.Slider]:
    """The prompt, the pair whose target the lanes share, new tokens a lane and rounds."""
    prompt = prompt_box("One prompt every drafter races on…", "shootout-prompt", lines=4)
    with gr.Row():
        pair = gr.Dropdown(
            list(config.registry),
            value=config.default_pair,
            label="Model pair (its target; the lanes are every drafter it has here)",
            elem_id="shootout-pair",
        )
        rounds = "Rounds (a plain run and a run a lane each; three give medians)"
        sizes = tokens_and_rounds(
            MAX_NEW_TOKENS, DEFAULT_NEW_TOKENS, MAX_REPEATS, rounds, "shootout"
        )
    return prompt, pair, *sizes


def output_components() -> dict[str, gr.components.Component]:
    """The tab's outputs, laid out, by their names in `ShootoutOutputs`."""
    status = gr.Markdown(
        "Press **Run shoot-out**; progress shows here.", elem_id="shootout-status", label="status"
    )
    why = gr.Markdown(elem_id="shootout-why", label="why")
    ranking = gr.Dataframe(
        ranking_frame(None),
        label="Ranking",
        interactive=False,
        wrap=True,
        elem_id="shootout-ranking",
    )
    # A chart a row: the legend is one line of up to eight lanes, wider than half a page.
    race = _lines(
        "race",
        "seconds",
        "tokens",
        "The race: new tokens over time, each lane's median run",
        ("seconds since the run started", "new tokens"),
    )
    sweep = _lines(
        "sweep",
        "γ",
        "speedup",
        "Speedup at a constant γ, replayed from the runs' own costs (modelled)",
        ("γ, candidates a step", "speedup (modelled)"),
    )
    with gr.Accordion("The lanes as they run", open=True):
        lanes = gr.Markdown(elem_id="shootout-lanes", label="lanes")
    result = folded_json("Ranking as JSON (python -m assisted --shootout --json's)", "result")
    return by_field(ShootoutOutputs, locals())


def steps_in_json() -> gr.Checkbox:
    """Whether the ranking's JSON keeps each lane's runs' steps (`per_step`), under it."""
    return gr.Checkbox(
        False,
        label="Keep each lane's steps in the JSON (per_step: hundreds of kB on long runs)",
        elem_id="shootout-steps",
    )


def _lines(label: str, x: str, y: str, title: str, axes: tuple[str, str]) -> gr.LinePlot:
    """A chart of a line per lane, empty until a ranking. Its title names it; the label,
    its output's name, stays hidden, as the chart is drawn its full height below it and
    the legend, at its foot, would be cut off.

    Gradio's chart builds its drawing from the first frame it gets (each axis's type from
    its column's, the colours and the legend from the lanes in it) and later only swaps
    the rows in; an empty frame would fix no lanes, and an untyped one categories for
    axes. So the chart holds no frame until a ranking, and each run clears it first
    (`shootout.tab`): every ranking's chart is drawn from its own lanes."""
    return gr.LinePlot(
        None,
        x=x,
        y=y,
        color="lane",
        title=title,
        label=label,
        show_label=False,
        x_title=axes[0],
        y_title=axes[1],
        height=300,
        x_axis_format=TICKS,
        elem_id=f"shootout-{label}",
    )


NOTE = f"""
Races every drafter this target has on this device on your prompt: its assistant under
`auto`, under Transformers' own defaults and heuristic schedule, at a constant γ, at each
other precision the device runs, and prompt lookup. One **plain baseline** runs each round;
each lane runs **alone, in turn**, the order flipped from round to round, greedy. Then the
lanes are **ranked** by speedup over that baseline, with what explains each. At most
{shootout.MAX_LANES} lanes and {shootout.MAX_NEW_TOKENS} new tokens a lane.
"""

NAME = "shootout"  # its id: its element's, its GPU call's key, its requests' Stop key
YIELD_EVERY_S = 0.1  # the live lanes' refresh while steps stream

StreamShootout = Callable[[ShootoutRequest], GpuEvents[Progress | Streamed | dict]]
"""`app.stream_shootout`, the GPU work: the request → Progress, each run's steps and the
ranking, within the call's events (`assisted.ui.gpu_calls`)."""


def _idle(status: str) -> ShootoutOutputs:
    """Every output's value without a ranking: before one exists, or when none will. The
    charts hold nothing, so that the next ranking's are drawn afresh (`_lines`)."""
    return ShootoutOutputs(
        status=status,
        lanes=lanes_markdown({}, None, {}),
        ranking=ranking_frame(None),
        why="",
        race=None,
        sweep=None,
        result=None,
    )


class _Lanes:
    """The lanes' latest runs as they stream: each one's text, the running one, and each
    finished run's tokens per second."""

    def __init__(self) -> None:
        self.latest: dict[str, str] = {}
        self.running: str | None = None
        self.speeds: dict[str, float] = {}

    def step(self, item: Streamed) -> None:
        lane = item.drafter or "plain"
        if item.event.index == 0 or lane != self.running:  # a new run of the lane
            self.latest[lane] = ""
        self.running = lane
        self.latest[lane] += item.event.step.text

    def finished(self, item: Progress) -> None:
        run = item.run
        self.running = None
        self.speeds[run.drafter or "plain"] = len(run.record.token_ids) / run.record.total_s

    def markdown(self) -> str:
        return lanes_markdown(self.latest, self.running, self.speeds)


class ShootoutHandlers(TabHandlers):
    """The tab's handlers: run and stop a shoot-out."""

    tab = NAME

    def run_shootout(
        self,
        prompt: str,
        pair: str,
        max_new_tokens: float,
        repeats: float,
        request: gr.Request,
        per_step: bool = False,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (Gradio's injection idiom)
    ) -> Iterator[ShootoutOutputs]:
        """Race every lane on `prompt`; the lanes stream as they run, and the last yield
        carries the ranking, its charts and the JSON result (each lane's runs with their
        `per_step` only where `per_step` asks)."""
        access = self.shared.pairs
        registry = access.config.registry
        if pair not in registry:
            raise refusal(f"Unknown pair {pair!r}; choose one of {', '.join(registry)}.", "Pair")
        spec = registry[pair]
        try:
            validate_prompt(prompt or "")
            settings = RunSettings(max_new_tokens=int_if_whole(max_new_tokens)).validate()
            rounds = int_if_whole(repeats)
            if not isinstance(rounds, int):
                raise SettingsError(f"rounds must be a whole number, not {repeats}")
            shootout.check(settings, rounds)
        except SettingsError as error:
            raise refusal(str(error), title="Shoot-out") from error
        lanes = len(shootout.lanes_for(spec, access.device_type(), "float32"))  # counted only
        yield _idle(f"**Loading** `{spec.name}`…")
        with gpu_turn(self.shared, spec, True, stop_key(request, NAME)) as turn:
            if not (yield from turn.waited(progress, _idle, "no ranking")):
                return
            call = ShootoutRequest(
                turn.place, prompt, settings, rounds, lanes, turn.stop, bool(per_step)
            )

            def status(line: str) -> ShootoutOutputs:
                return updating_only(ShootoutOutputs, status=line)

            yield from self._followed(turn.call(self.stream, call, ShootoutOutputs, status))

    def _followed(self, items: Iterator) -> Iterator[ShootoutOutputs]:
        """The call's yields as the tab's values: status lines, the lanes as they stream
        (at most every `YIELD_EVERY_S`), then every output with the ranking."""
        lanes, status, shown_at, result = _Lanes(), "", 0.0, None
        for item in items:
            if isinstance(item, ShootoutOutputs):  # a status line (`GpuTurn.call`)
                yield item
            elif isinstance(item, dict):
                result = item
            elif isinstance(item, Streamed):
                lanes.step(item)
                if time.perf_counter() - shown_at >= YIELD_EVERY_S:
                    shown_at = time.perf_counter()
                    yield updating_only(ShootoutOutputs, status=status, lanes=lanes.markdown())
            else:
                if item.run is not None:
                    lanes.finished(item)
                status = progress_markdown(item.done, item.total, item.label)
                yield updating_only(ShootoutOutputs, status=status, lanes=lanes.markdown())
        if result is None:
            yield _idle("The shoot-out ended without a ranking.")
            return
        done = "**Stopped**" if result["stopped"] else "**Done**"
        yield ShootoutOutputs(
            status=f"{done}: {len(result['lanes'])} lanes ranked against one plain baseline.",
            lanes=lanes.markdown(),
            ranking=ranking_frame(result),
            why=why_markdown(result),
            race=race_frame(result),
            sweep=sweep_frame(result),
            result=result,
        )


def build_shootout_tab(
    demo: gr.Blocks, tab: gr.Tab, shared: TabState, stream: StreamShootout
) -> None:
    """The tab's components and events, inside the caller's `tab` (`tabs.BuildTab`)."""
    handlers = ShootoutHandlers(shared, stream)
    gr.Markdown(NOTE)
    prompt, pair, max_new_tokens, repeats = input_components(shared.pairs.config)
    with gr.Row():
        run = gr.Button("Run shoot-out", variant="primary", elem_id="shootout-run")
        stop = gr.Button("Stop", variant="stop", elem_id="shootout-stop")
    outputs = output_components()
    # The steps last: API users who leave them out get the ranking without them.
    inputs = [prompt, pair, max_new_tokens, repeats, steps_in_json()]
    on_device(run.click, handlers.run_shootout, inputs, ShootoutOutputs, outputs, "shootout")
    on_stop(stop, handlers.request_stop)


# What `app.py`'s registry finds (`assisted.ui.tabs.registry`).
TAB = Tab("Shoot-out", NAME, build_shootout_tab, stream_shootout)
