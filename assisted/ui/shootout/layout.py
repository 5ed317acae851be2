"""The Shoot-out tab's components, laid out: the prompt, the pair, how much, and the
outputs. `shootout.tab.build_shootout_tab` wires their events."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from assisted.bench.shootout import MAX_NEW_TOKENS, MAX_REPEATS
from assisted.ui.pair_access import Config
from assisted.ui.shootout.format import race_frame, ranking_frame, sweep_frame
from assisted.ui.shootout.outputs import ShootoutOutputs
from assisted.ui.tabs import by_field, folded_json, prompt_box, tokens_and_rounds

DEFAULT_NEW_TOKENS = 64
TICKS = ",.0f"


def inputs(config: Config) -> tuple[gr.Textbox, gr.Dropdown, gr.Slider, gr.Slider]:
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


def outputs() -> dict[str, gr.components.Component]:
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
    with gr.Row():
        race = _lines(
            "race",
            race_frame(None),
            "seconds",
            "tokens",
            "The race: new tokens over time, each lane's median run",
            ("seconds since the run started", "new tokens"),
        )
        sweep = _lines(
            "sweep",
            sweep_frame(None),
            "γ",
            "speedup",
            "Speedup at a constant γ, replayed from the runs' own costs (modelled)",
            ("γ, candidates a step", "speedup (modelled)"),
        )
    with gr.Accordion("The lanes as they run", open=True):
        lanes = gr.Markdown(elem_id="shootout-lanes", label="lanes")
    result = folded_json("Ranking as JSON (python -m assisted --shootout --json's)", "result")
    return by_field(ShootoutOutputs, locals())


def _lines(
    label: str, frame: pd.DataFrame, x: str, y: str, title: str, axes: tuple[str, str]
) -> gr.LinePlot:
    """A chart of a line per lane, labelled with its output's name."""
    return gr.LinePlot(
        frame,
        x=x,
        y=y,
        color="lane",
        title=title,
        label=label,
        x_title=axes[0],
        y_title=axes[1],
        height=280,
        x_axis_format=TICKS,
    )
