"""What the web UI shows, as plain strings and rows: coloured run text, stat cards, the
summary, chart rows and the race replay's timeline. Imports neither torch nor gradio.

Every figure comes from `assisted.stats` (a `summarize`/`compare`/`report` dict); this
module only formats. The one thing it derives itself is where a step's text splits into
the accepted candidates and the target's own token, because a `Step` carries the text of
the whole step only (see `StepSplitter`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from assisted.record import Step

Decode = Callable[[list[int]], str]
"""Token ids → text, as the run's own detokeniser decodes them (special tokens skipped)."""


@dataclass(frozen=True)
class Chunk:
    """One step's text, split: candidates the target accepted, then its own token."""

    t_s: float
    accepted_text: str
    own_text: str
    tokens: int
    drafted: int
    accepted: int

    @property
    def text(self) -> str:
        return self.accepted_text + self.own_text

    def to_dict(self) -> dict:
        return asdict(self)


class StepSplitter:
    """Splits each step's text at the boundary between accepted candidates and the target's
    own token, by decoding the run's ids up to that boundary.

    A step emits `accepted + 1` tokens (fewer only where EOS or the length limit cuts it);
    its text is one delta for all of them, so the split needs the tokenizer. A multi-byte
    character spread over the boundary goes to the own token's side.
    """

    def __init__(self, decode: Decode):
        self.decode = decode
        self.ids: list[int] = []
        self.emitted = 0  # characters of the run's text so far

    def add(self, step: Step) -> Chunk:
        cut = 0
        if step.accepted > 0:
            head = self.decode(self.ids + list(step.token_ids[: step.accepted]))
            cut = len(head.rstrip("\ufffd")) - self.emitted
            cut = min(max(cut, 0), len(step.text))
        self.ids.extend(step.token_ids)
        self.emitted += len(step.text)
        return Chunk(
            step.t_s,
            step.text[:cut],
            step.text[cut:],
            len(step.token_ids),
            step.drafted,
            step.accepted,
        )


# -- run text ------------------------------------------------------------------------------

LEGEND_HTML = (
    '<div class="legend">'
    '<span class="tok acc">drafted by the assistant, accepted by the target</span> '
    '<span class="tok own">the target\'s own token (one per step)</span> '
    "— each step is one target forward pass; tokens in one box landed together"
    "</div>"
)


def run_html(
    chunks: Sequence[Chunk],
    mode: str,
    *,
    running: bool = False,
    stopped: bool = False,
    placeholder: str = "",
) -> str:
    """The run's text as HTML. Assisted runs show each step as a box: accepted candidates,
    then the target's own token. Plain runs show plain text."""
    if not chunks and not running:
        return f'<div class="run-text empty">{html.escape(placeholder)}</div>'
    parts = []
    for chunk in chunks:
        if mode == "assisted":
            accepted = (
                f'<span class="acc">{html.escape(chunk.accepted_text)}</span>'
                if chunk.accepted_text
                else ""
            )
            parts.append(
                f'<span class="step">{accepted}'
                f'<span class="own">{html.escape(chunk.own_text)}</span></span>'
            )
        else:
            parts.append(html.escape(chunk.text))
    if running:
        parts.append('<span class="cursor">▍</span>')
    if stopped:
        parts.append('<span class="badge stopped">■ stopped</span>')
    return f'<div class="run-text {mode}">{"".join(parts)}</div>'


# -- stat cards ----------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def _number(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def stat_rows(summary: dict) -> list[tuple[str, str]]:
    """(label, value) pairs for one run, from `stats.summarize(record)`."""
    rows = [
        ("time to first token", _seconds(summary.get("ttft_s"))),
        ("tokens/s", _number(summary.get("tokens_per_s"), 2)),
        ("total time", _seconds(summary.get("total_s"))),
        ("target steps", str(summary.get("steps", 0))),
        ("new tokens", str(summary.get("new_tokens", 0))),
    ]
    if "drafted" in summary:
        rows += [
            ("drafted", str(summary["drafted"])),
            ("accepted", str(summary["accepted"])),
            ("acceptance rate", _percent(summary.get("acceptance_rate"))),
            ("tokens per step", _number(summary.get("tokens_per_step"), 2)),
        ]
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

SPEEDUP_GAP = 0.15  # relative gap under which measured and predicted speedups "agree"


def why_prediction_differs(measured: float | None, predicted: float | None) -> str:
    """One sentence on why the measured speedup differs from the predicted one."""
    if measured is None or predicted is None:
        return (
            "No prediction: the run was too short to measure the drafter's cost ratio c "
            "(it needs at least two drafting passes and two plain steps)."
        )
    if abs(measured - predicted) <= SPEEDUP_GAP * predicted:
        return (
            "They agree within 15%: verification and overheads cost about what the model "
            "assumes here."
        )
    if measured < predicted:
        return (
            "Measured is below predicted: the model counts verifying γ + 1 tokens as one "
            "ordinary target step, but a wider verification pass costs more (most on CPUs), "
            "and the prefill and per-step overheads are in the measured time."
        )
    return (
        "Measured is above predicted: α and c are estimates from this one run (c from "
        "timing single assistant passes), and short runs are noisy."
    )


def summary_markdown(result: dict, *, sample: bool = False) -> str:
    """The comparison's verdict, from `stats.report(...)`."""
    plain, assisted = result.get("plain"), result.get("assisted")
    if not plain or not assisted:
        which = "plain" if plain else "neither run"
        return f"Both runs are needed for a comparison; {which} finished."
    measured, predicted = result.get("speedup"), result.get("predicted_speedup")
    lines = [
        f"**Measured speedup: {_number(measured, 2, '×')}** "
        f"(assisted tokens/s ÷ plain tokens/s) · "
        f"**predicted: {_number(predicted, 2, '×')}** from acceptance rate "
        f"{_percent(assisted.get('acceptance_rate'))} (α ≈ {_number(result.get('alpha'), 2)}), "
        f"mean draft length γ = {_number(result.get('mean_drafted'), 1)} and cost ratio "
        f"c = {_number(result.get('cost_ratio'), 2)} (Leviathan et al. 2023).",
        why_prediction_differs(measured, predicted),
    ]
    divergence = result.get("first_divergence")
    if result.get("identical"):
        lines.append("**Identical**: the assisted run reproduced the plain run token for token.")
    elif sample:
        lines.append(
            f"**Diverged at token {divergence}**: with sampling each run draws its own random "
            "numbers, so the texts differ; both follow the target's distribution."
        )
    else:
        lines.append(
            f"**Diverged at token {divergence}**. Greedy assisted generation reproduces the "
            "target's choices, but verifying several tokens in one pass rounds differently; "
            "in bf16 or fp16 that can flip a near-tie between two candidates."
        )
    if plain.get("stopped") or assisted.get("stopped"):
        lines.append("Stopped: the figures cover what was produced before the stop.")
    return "\n\n".join(lines)


# -- charts --------------------------------------------------------------------------------


def timeline_rows(runs: dict[str, Sequence[Chunk]]) -> list[dict]:
    """Rows (run, t_s, tokens) of new tokens produced over time: a staircase per run, one
    riser per step, so the tokens one step committed together rise together.

    Every series starts at (0 s, 0 tokens), even before its run starts: Gradio's line chart
    fixes its colour legend from the series present in its first value.
    """
    rows = []
    for name, chunks in runs.items():
        rows.append({"run": name, "t_s": 0.0, "tokens": 0})
        count = 0
        for chunk in chunks:
            t_s = round(chunk.t_s, 4)
            rows.append({"run": name, "t_s": t_s, "tokens": count})
            count += chunk.tokens
            rows.append({"run": name, "t_s": t_s, "tokens": count})
    return rows


def histogram_rows(accept_histogram: Sequence[int]) -> list[dict]:
    """Rows (accepted, steps) from `stats.accept_histogram`; `accepted` is a label so the
    chart shows one bar per count."""
    return [{"accepted": str(k), "steps": n} for k, n in enumerate(accept_histogram)]


# -- race replay ---------------------------------------------------------------------------


def race_timeline(runs: dict[str, Sequence[Chunk]]) -> list[tuple[float, str, int]]:
    """(t_s, run, chunks shown) in time order: both runs start together at 0 s."""
    events = [
        (chunk.t_s, name, index + 1)
        for name, chunks in runs.items()
        for index, chunk in enumerate(chunks)
    ]
    return sorted(events)


def chunks_from_dicts(items: Sequence[dict]) -> list[Chunk]:
    return [Chunk(**item) for item in items]
