"""What the Compare tab shows of a comparison, as plain strings: the coloured run text of
its chunks (`assisted.ui.compare.chunks`), stat cards and the summary.
Imports neither torch nor gradio; the charts' rows are `compare.charts`'.

Every figure comes from `assisted.analysis.stats` (a `summarize`/`compare_runs`/`report`
dict, or its functions of a record); this module only formats.

**Its request** (`ComparisonRequest`): what its GPU call (`compare.gpu`) takes, a frozen
dataclass of plain values, as every call's request is (`assisted.ui.requests`).

**Its outputs, by name** (`CompareOutputs`, and `ReplayOutputs` for the race replay). The
NamedTuple is the one place that orders the tab's outputs: the tab lists its components
for Gradio in the order of the fields (`assisted.ui.tabs.in_order`), and every handler yields an
instance built by field name, so adding an output means adding a field. The values are
plain (strings, data frames, dicts), and the classes are defined at module level, so an
instance pickles: the values are made in the GPU process on ZeroGPU
(`app.stream_comparison`) and cross its process boundary.

**A sampled assisted run's draws**: each drafted token's p, q and min(1, p/q) in its
step's details, and the marks of the target's corrected and bonus tokens; the terms are
`assisted.analysis.stats`'s.

Under sampling the target's own token is not simply "the target's": after a rejection it
is drawn from max(0, p − q), renormalised, which is what keeps assisted sampling exactly
the target's distribution; after a fully accepted draft it comes free, drawn from p. The
text marks the two apart, so a reader sees where the mechanism corrected a draft.
"""

from __future__ import annotations

import enum
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from assisted.analysis import divergence, oracle, sampling, stats
from assisted.analysis.sampling import BONUS, CORRECTED, TARGET, accept_prob
from assisted.core.record import sentence
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings
from assisted.models import learnt_store
from assisted.ui.compare.chunks import Chunk, Draw, source_label
from assisted.ui.numbers import number, percent
from assisted.ui.requests import PairPlace, StopFlag

if TYPE_CHECKING:
    import pandas as pd


class Held(enum.Enum):
    """An output that a streaming update leaves as it was (`live.HELD`): the tab gives
    Gradio `gr.skip()` for it. An enum, so it is itself again across a pickle."""

    UNCHANGED = "unchanged"


UNCHANGED = Held.UNCHANGED


class CompareOutputs(NamedTuple):
    """The Compare tab's outputs. All but `race` are the /compare endpoint's outputs, in
    this order and under these names (the components' labels); the last value an API user
    receives carries the JSON `result`. `race` is the page's state for Replay race (the
    finished runs' chunks, `live.Live.outputs`), which Gradio keeps out of the API.
    While the runs stream, the charts and the result may be `UNCHANGED`."""

    status: str  # Markdown
    plain_text: str  # HTML (`compare.format.run_html`)
    assisted_text: str
    plain_stats: str  # HTML (`compare.format.stat_card_html`)
    assisted_stats: str
    summary: str  # Markdown
    tokens_over_time: pd.DataFrame  # the charts' rows (`compare.charts`)
    accept_histogram: pd.DataFrame
    acceptance_by_position: pd.DataFrame
    time_per_step: pd.DataFrame
    draft_length_per_step: pd.DataFrame
    result: dict | None  # `stats.report(...)`, the CLI's --json schema
    race: dict | None


class ReplayOutputs(NamedTuple):
    """The Compare outputs that Replay race updates, by the same names. A subset rather
    than every output with the rest skipped: Gradio rebuilds the component of each skipped
    output on every update, and the replay updates twenty times a second."""

    status: str
    plain_text: str
    assisted_text: str


# The kinds of the target's own token that the text marks, each by a class of its own.
MARKED = (CORRECTED, BONUS)
# What the step's details say of the target's own token, by its kind.
OWN_KINDS = {
    CORRECTED: "corrected: after the rejection, drawn from max(0, p − q), renormalised",
    BONUS: "a bonus: every candidate was accepted, so drawn from p at no extra step",
    TARGET: "drawn from p, as plain sampling does",
}
LEGEND_HTML = (
    'Sampling: the target\'s token <span class="tok own corrected">corrected</span> after a '
    'rejection, from max(0, p − q), or a <span class="tok own bonus">bonus</span> after a '
    "whole draft, from p."
)


def _probability(value: float) -> str:
    return f"{value:.3g}"


def draw_lines(draws: Sequence[Draw], accepted: int, visible: Callable[[str], str]) -> list[str]:
    """A line per drafted token of a sampled step: its text (through `visible`), p, q and
    min(1, p/q), and what became of it: accepted, rejected (the first refused), or never
    tested, after the rejection."""
    lines = []
    for i, (text, p, q) in enumerate(draws):
        if i < accepted:
            fate = "accepted"
        elif i == accepted:
            fate = "rejected"
        else:
            fate = "after the rejection"
        lines.append(
            f"“{visible(text)}”: p {_probability(p)} · q {_probability(q)} · "
            f"min(1, p/q) {_probability(accept_prob(p, q))} · {fate}"
        )
    return lines


def own_class(kind: str | None) -> str:
    """The class of the target's own token's span: "own", and its kind where marked."""
    return f"own {kind}" if kind in MARKED else "own"


# The toggle is a plain checkbox that the page's style sheet reads: hiding the rejected
# drafts re-runs nothing and needs no round trip, and it holds through streaming and replay.
LEGEND_HTML = (
    '<div class="legend">'
    '<span class="tok acc">drafted, accepted</span> '
    '<span class="tok rej">drafted, rejected</span> '
    '<span class="tok own">the target\'s own token</span> '
    "— one box per target step; hover over a step for its details, or tab to the text "
    "and move between steps with the arrow keys.<br>"
    f"{LEGEND_HTML}<br>"
    '<label class="toggle"><input type="checkbox" id="show-rejected" checked> '
    "show rejected drafts</label>"
    "</div>"
)
# A rejected remainder is shown up to this many characters, about four tokens of code: enough
# to see what the assistant guessed, short enough not to bury the text the target wrote.
# The step's details show all of it.
REJECTED_SHOWN_CHARS = 24


def _visible(text: str) -> str:
    """Text that was never committed, on one line: a newline shows as ↵ instead of
    breaking the committed text around it."""
    return text.replace("\n", "↵")


def step_details(step_number: int, chunk: Chunk) -> list[str]:
    """Lines about one assisted step: its number, counts and time, under `auto` the γ the
    policy chose and where the candidates came from, its whole rejected draft, and the
    target's own token."""
    timing = f"{chunk.step_s * 1000:.0f} ms"
    if chunk.draft_s is not None:
        timing += f" ({chunk.draft_s * 1000:.0f} ms drafting)"
    lines = [f"step {step_number} · drafted {chunk.drafted} · accepted {chunk.accepted} · {timing}"]
    if chunk.chosen is not None:
        choice = f"auto chose γ = {chunk.chosen}"
        if chunk.drafted:
            source = source_label(chunk)
            by_assistant = source == DrafterKind.ASSISTANT.label
            choice += f", drafted by {'the assistant' if by_assistant else source}"
        lines.append(choice)
    if chunk.drafted == 0:
        lines.append("nothing drafted: the target alone")
    elif chunk.accepted == chunk.drafted:
        lines.append("every candidate accepted")
    else:
        rejected = chunk.drafted - chunk.accepted
        lines.append(f"rejected {rejected}: “{_visible(chunk.rejected_text)}”")
    lines += draw_lines(chunk.draws, chunk.accepted, _visible)
    if chunk.own_text:
        own = f"then the target's own token: “{_visible(chunk.own_text)}”"
        kind = OWN_KINDS.get(chunk.own_kind)
        lines.append(f"{own}, {kind}" if kind else own)
    if chunk.diverged is not None:
        lines.append(DIVERGED_HERE)
    return lines


DIVERGED_HERE = "the runs first differ at the marked token (see the summary)"


def _marked(text: str, offset: int, span: Sequence[int] | None) -> str:
    """`text` as HTML, with the characters of `span` marked: the token where the runs first
    differ. `span` counts from the start of the chunk's text and `text` starts `offset`
    characters into it."""
    if span is None:
        return html.escape(text)
    start, end = max(span[0] - offset, 0), min(span[1] - offset, len(text))
    if start >= end:
        return html.escape(text)
    return (
        f'{html.escape(text[:start])}<mark class="diverged" title="{DIVERGED_HERE}">'
        f"{html.escape(text[start:end])}</mark>{html.escape(text[end:])}"
    )


def _step_html(step_number: int, chunk: Chunk) -> str:
    """An assisted step as a box: accepted candidates, the rejected remainder (struck
    through, clipped), the target's own token, and its details, shown on hover and focus.

    Only the first step is a Tab stop: a run has hundreds of steps, so the text is one stop
    and the arrow keys move between its steps (a roving tabindex, `page.JS`)."""
    parts = []
    if chunk.accepted_text:
        accepted = _marked(chunk.accepted_text, 0, chunk.diverged)
        parts.append(f'<span class="acc">{accepted}</span>')
    if chunk.rejected_text:
        shown = _visible(chunk.rejected_text)
        if len(shown) > REJECTED_SHOWN_CHARS:
            shown = shown[:REJECTED_SHOWN_CHARS] + "…"
        parts.append(f'<s class="rej">{html.escape(shown)}</s>')
    own = _marked(chunk.own_text, len(chunk.accepted_text), chunk.diverged)
    parts.append(f'<span class="{own_class(chunk.own_kind)}">{own}</span>')
    details = "<br>".join(html.escape(line) for line in step_details(step_number, chunk))
    parts.append(f'<span class="tip" role="tooltip">{details}</span>')
    tabindex = 0 if step_number == 1 else -1
    return f'<span class="step" tabindex="{tabindex}">{"".join(parts)}</span>'


def chunk_html(mode: str, step_number: int, chunk: Chunk) -> str:
    """One step of a run's text as HTML: a box in an assisted run (`_step_html`), plain
    text in a plain one."""
    if mode == "assisted":
        return _step_html(step_number, chunk)
    return _marked(chunk.text, 0, chunk.diverged)


def run_html(
    chunks: Sequence[Chunk],
    mode: str,
    *,
    running: bool = False,
    stopped: bool = False,
    placeholder: str = "",
) -> str:
    """The run's text as HTML: each chunk's `chunk_html`, in `run_html_of`."""
    parts = [chunk_html(mode, n, chunk) for n, chunk in enumerate(chunks, start=1)]
    return run_html_of(parts, mode, running=running, stopped=stopped, placeholder=placeholder)


def run_html_of(
    parts: Sequence[str],
    mode: str,
    *,
    running: bool = False,
    stopped: bool = False,
    placeholder: str = "",
) -> str:
    """The run's text as HTML, from each step's `chunk_html`.

    The box sits in a positioned wrapper outside the scrolling text, so a step's details
    show just below the box: positioned from the wrapper, they escape the text's scroll
    clipping, which the step's own position would not.

    A running text is left open, its cursor drawn by the page's style sheet: each update's
    HTML then starts with the last one's, and Gradio sends a streaming output's new value
    as an append to the old (`gradio.utils.diff`), so an update carries its new steps
    alone, however long the run. The browser closes the open tags."""
    if not parts and not running:
        body = f'<div class="run-text empty">{html.escape(placeholder)}</div>'
        return f'<div class="run-box">{body}</div>'
    if running:
        return f'<div class="run-box"><div class="run-text {mode} running">{"".join(parts)}'
    badge = '<span class="badge stopped">■ stopped</span>' if stopped else ""
    return f'<div class="run-box"><div class="run-text {mode}">{"".join(parts)}{badge}</div></div>'


# -- stat cards ----------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def stat_rows(summary: dict) -> list[tuple[str, str]]:
    """(label, value) pairs for one run, from `stats.summarize(record)`."""
    rows = [
        ("time to first token", _seconds(summary.get("ttft_s"))),
        ("tokens/s", number(summary.get("tokens_per_s"), 2)),
        ("total time", _seconds(summary.get("total_s"))),
        ("target steps", str(summary.get("steps", 0))),
        ("new tokens", str(summary.get("new_tokens", 0))),
    ]
    if "drafted" in summary:
        rows += [
            ("drafted", str(summary["drafted"])),
            ("accepted", str(summary["accepted"])),
            ("acceptance rate", percent(summary.get("acceptance_rate"))),
            ("tokens per step", number(summary.get("tokens_per_step"), 2)),
        ]
    if "expected_acceptance_rate" in summary:  # sampled: from the drafts' p and q
        rows.append(("expected acceptance", percent(summary["expected_acceptance_rate"])))
    if summary.get("assistant_precision"):
        rows.append(("assistant precision", summary["assistant_precision"]))
    return rows


def stat_card_html(summary: dict | None, *, state: str = "", empty: str = "no run yet") -> str:
    """A card of one run's figures; `state` is a short word such as "running" or "stopped"."""
    if summary is None:
        body = f'<div class="stat-empty">{html.escape(empty)}</div>'
    else:
        body = "".join(
            f'<div class="stat"><div class="value">{html.escape(value)}</div>'
            f'<div class="label">{html.escape(label)}</div></div>'
            for label, value in stat_rows(summary)
        )
    badge = f'<span class="badge {html.escape(state)}">{html.escape(state)}</span>' if state else ""
    return f'<div class="stat-card">{badge}<div class="stats">{body}</div></div>'


# -- summary -------------------------------------------------------------------------------

SPEEDUP_GAP = 0.15  # relative gap under which the measured speedup and a model's "agree"

# Only Leviathan et al.'s model can leave a run without a prediction: the policy's needs
# one step only.
NO_PREDICTION = (
    "No fitted speedup: the run was too short to measure the drafter's cost ratio c (it needs at "
    "least two drafting passes and two plain steps)."
)
# Why the measured speedup differs from the predicted one, by the model that predicted it
# (`stats.LEVIATHAN`, `stats.POLICY`) and by how they compare.
WHY_PREDICTION_DIFFERS = {
    stats.LEVIATHAN: {
        "agree": "They agree within 15%: verification and overheads cost about what the "
        "model assumes here.",
        "below": "Measured is below the fit: the model counts verifying γ + 1 tokens as one "
        "ordinary target step, but a wider verification pass costs more (most on CPUs), and "
        "the prefill and per-step overheads are in the measured time.",
        "above": "Measured is above the fit: α and c are estimates from this one run (c "
        "from timing single assistant passes), and short runs are noisy.",
    },
    stats.POLICY: {
        "agree": "They agree within 15%: the policy's steps committed and cost about what it "
        "expected when it chose them.",
        "below": "Measured is below predicted: the policy's steps committed fewer tokens, or "
        "took longer, than it expected when it chose them; and the prompt's prefill, in both "
        "runs' measured time but not in the prediction, pulls the measured speedup towards 1.",
        "above": "Measured is above predicted: the policy's steps committed more tokens, or "
        "took less time, than it expected when it chose them (its estimates learn as the run "
        "goes); and the prompt's prefill, in both runs' measured time but not in the "
        "prediction, pulls the measured speedup towards 1.",
    },
}


def why_prediction_differs(
    measured: float | None, predicted: float | None, prediction: str = stats.LEVIATHAN
) -> str:
    """One sentence on why the measured speedup differs from the predicted one, as
    `prediction` (the model that made it) explains the gap."""
    if measured is None or predicted is None:
        return NO_PREDICTION
    if abs(measured - predicted) <= SPEEDUP_GAP * predicted:
        case = "agree"
    else:
        case = "below" if measured < predicted else "above"
    return WHY_PREDICTION_DIFFERS[prediction][case]


# A heuristic reading of the auto schedule's cost curve, by what each row past the first
# adds, as a share of a one-row (plain) step: up to CHEAP_ROW, long drafts cost little to
# verify (a GPU, or bf16 on a CPU with native bf16); from COSTLY_ROW, a candidate costs a
# good part of a plain step (fp32 on a CPU), and only a short draft that is mostly
# accepted pays.
CHEAP_ROW = 0.15
COSTLY_ROW = 0.4


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 0.01 else f"{seconds * 1000:.0f} ms"


def cost_model_line(assisted: dict) -> str | None:
    """One line on the `auto` run's cost curve (`verify_cost_s`): what verifying a draft
    costs in plain steps here, and so how the policy drafts. None without a curve.

    It quotes the rows of `stats.reference_rows`: the median draft the policy chose, + 1,
    or 4 rows where it mostly chose not to draft."""
    curve = [(int(k), s) for k, s in assisted.get("verify_cost_s") or []]
    chosen = [step["chosen"] for step in assisted.get("per_step") or [] if "chosen" in step]
    rows = stats.reference_rows(chosen, curve)
    ratio = stats.verify_cost_ratio(curve, rows) if rows else None
    if ratio is None:
        return None
    seconds = dict(curve)
    median = math.ceil(stats.median(chosen)) if chosen else None
    candidates = f"{rows - 1} candidate{'s' if rows > 2 else ''}"
    if median == rows - 1:
        which = f"the median draft the policy chose, {candidates}, + 1"
    else:
        which = f"a draft of {candidates} + 1"
    per_row = (ratio - 1) / (rows - 1)
    if per_row <= CHEAP_ROW:
        verdict = "so long drafts are cheap"
    elif per_row < COSTLY_ROW:
        verdict = "so a draft pays off only where most of it is accepted"
    else:
        verdict = "so the policy drafts short or not at all"
    return (
        f"**Cost model:** verifying {rows} rows ({which}) costs {ratio:.1f}× one row here "
        f"({_ms(seconds[rows])} against {_ms(seconds[1])}), {verdict}."
    )


def _precision_note(result: dict) -> str:
    precision = (result.get("assisted") or {}).get("assistant_precision")
    if not precision:
        return ""
    return f" with the assistant in {precision} and the target in {result.get('dtype')}"


def _prediction_basis(result: dict) -> str:
    """What the predicted speedup was computed from, to follow it in the summary."""
    if result.get("prediction") == stats.POLICY:
        return (
            "from the `auto` policy's own expectations, step by step: the tokens it expected "
            "each choice to commit and the seconds it expected it to take, against a plain "
            f"step's{_precision_note(result)} (not from α, γ and c: its steps may each draft "
            "from a different source, or not at all)."
        )
    assisted = result.get("assisted") or {}
    return (
        "Leviathan et al.'s model fitted to this run, so not a forecast: "
        f"from its acceptance rate {percent(assisted.get('acceptance_rate'))} "
        f"(α ≈ {number(result.get('alpha'), 2)}), mean draft length "
        f"γ = {number(result.get('mean_drafted'), 1)} and cost ratio "
        f"c = {number(result.get('cost_ratio'), 2)}{_precision_note(result)} "
        "(Leviathan et al. 2023)."
    )


def summary_markdown(result: dict) -> str:
    """The comparison's verdict, from `decoding.report(...)`."""
    plain, assisted = result.get("plain"), result.get("assisted")
    if not plain or not assisted:
        which = "plain" if plain else "neither run"
        return f"Both runs are needed for a comparison; {which} finished."
    measured, predicted = result.get("speedup"), result.get("predicted_speedup")
    prediction = result.get("prediction") or stats.LEVIATHAN
    failed = sentence(result.get("analysis_errors") or {})
    lines = [f"**{failed}**"] if failed else []
    lines += [
        f"**Measured speedup: {number(measured, 2, '×')}** "
        f"(assisted tokens/s ÷ plain tokens/s) · "
        f"**{stats.speedup_word(prediction)}: {number(predicted, 2, '×')}** "
        f"{_prediction_basis(result)}",
        why_prediction_differs(measured, predicted, prediction),
    ]
    cost = cost_model_line(assisted)
    if cost:
        lines.append(cost)
    calibration = learnt_store.describe(assisted.get("calibration"))
    if calibration:
        lines.append(calibration)
    acceptance = sampling.describe_acceptance(assisted)
    if acceptance:
        lines.append(f"**Acceptance**: {acceptance}.")
    held_back = stats.describe(assisted)
    if held_back:
        lines.append(f"**Policy:** {held_back}")
    lines.append(_divergence_line(result))
    if result.get("oracle") is not None:
        lines.append(f"**Oracle:** {oracle.describe(result['oracle'])}")
    if plain.get("stopped") or assisted.get("stopped"):
        lines.append("Stopped: the figures cover what was produced before the stop.")
    return "\n\n".join(lines)


def _divergence_line(result: dict) -> str:
    """`divergence.describe_comparison` as the summary's last word: its first clause in
    bold."""
    head, _, rest = divergence.describe_comparison(result).partition(":")
    line = f"**{head[0].upper()}{head[1:]}**:{rest}"
    return line if line.endswith(".") else line + "."


@dataclass(frozen=True)
class ComparisonRequest:
    """One comparison: `prompt` plain, then assisted with `draft`, under `settings`."""

    pair: PairPlace
    prompt: str
    settings: RunSettings
    draft: DraftSettings
    stop: StopFlag

    def timed_tokens(self) -> tuple[int, int]:
        """The new tokens the call times: up to `max_new_tokens` plain, and as many
        assisted."""
        return self.settings.max_new_tokens, self.settings.max_new_tokens

    def drafting_cap(self) -> int:
        return self.draft.num_assistant_tokens
