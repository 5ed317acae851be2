"""The Shoot-out tab's components, laid out: the prompt, the pair, how much, and the
outputs. `shootout.tab.build_shootout_tab` wires their events."""

from __future__ import annotations

import gradio as gr

from assisted.bench.shootout import MAX_NEW_TOKENS, MAX_REPEATS
from assisted.ui.pair_access import Config
from assisted.ui.shootout.format import race_frame, ranking_frame, sweep_frame
from assisted.ui.tabs import folded_json, whole_slider

DEFAULT_NEW_TOKENS = 64
TICKS = ",.0f"


def inputs(config: Config) -> tuple[gr.Textbox, gr.Dropdown, gr.Slider, gr.Slider]:
    """The prompt, the pair whose target the lanes share, new tokens a lane and rounds."""
    prompt = gr.Textbox(
        label="Prompt",
        lines=4,
        max_lines=12,
        placeholder="One prompt every drafter races on…",
        elem_id="shootout-prompt",
    )
    with gr.Row():
        pair = gr.Dropdown(
            list(config.registry),
            value=config.default_pair,
            label="Model pair (its target; the lanes are every drafter it has here)",
            elem_id="shootout-pair",
        )
        max_new_tokens = whole_slider(
            MAX_NEW_TOKENS, DEFAULT_NEW_TOKENS, "New tokens a lane", elem_id="shootout-tokens"
        )
        repeats = whole_slider(
            MAX_REPEATS,
            1,
            "Rounds (one plain run and one run a lane each; three give medians)",
            elem_id="shootout-repeats",
        )
    return prompt, pair, max_new_tokens, repeats


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
    common = {"height": 280, "x_axis_format": TICKS}
    with gr.Row():
        race = gr.LinePlot(
            race_frame(None),
            x="seconds",
            y="tokens",
            color="lane",
            title="The race: new tokens over time, each lane's median run",
            label="race",
            x_title="seconds since the run started",
            y_title="new tokens",
            **common,
        )
        sweep = gr.LinePlot(
            sweep_frame(None),
            x="γ",
            y="speedup",
            color="lane",
            title="Speedup at a constant γ, replayed from the runs' own costs (modelled)",
            label="sweep",
            x_title="γ, candidates a step",
            y_title="speedup (modelled)",
            **common,
        )
    with gr.Accordion("The lanes as they run", open=True):
        lanes = gr.Markdown(elem_id="shootout-lanes", label="lanes")
    result = folded_json("Ranking as JSON (python -m assisted --shootout --json's)", "result")
    return {
        "status": status,
        "lanes": lanes,
        "ranking": ranking,
        "why": why,
        "race": race,
        "sweep": sweep,
        "result": result,
    }
