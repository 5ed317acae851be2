"""The Shoot-out tab's components, laid out: the prompt, the pair, how much, and the
outputs. `shootout.tab.build_shootout_tab` wires their events."""

from __future__ import annotations

import gradio as gr

from assisted.bench.shootout import MAX_NEW_TOKENS, MAX_REPEATS
from assisted.ui.pair_access import Config
from assisted.ui.shootout.format import ranking_frame
from assisted.ui.shootout.outputs import ShootoutOutputs
from assisted.ui.tabs import TICKS, by_field, folded_json, prompt_box, tokens_and_rounds

DEFAULT_NEW_TOKENS = 64


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
