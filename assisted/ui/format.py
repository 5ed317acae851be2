"""What the web UI shows, as plain strings and rows: coloured run text, stat cards, the
summary, chart rows and the race replay's timeline. Imports neither torch nor gradio.

Every figure comes from `assisted.stats` (a `summarize`/`compare`/`report` dict, or its
functions of a record); this module only formats.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from assisted import stats
from assisted.drafters import DrafterKind
from assisted.record import RunRecord
from assisted.settings import WARMUP_TOKENS
from assisted.ui.pace import Pace


@dataclass(frozen=True)
class Chunk:
    """One step as the UI shows it: the candidates the target accepted, the rest of the
    draft (rejected), then the target's own token.

    The text splits where the step's draft does (`Step.accepted_text` is the start of the
    step's text). `step_s` and `draft_s` are the step's time and its drafting time
    (`stats.step_s`, `Step.draft_s`); `chosen` and `source` are `Step.chosen` (the γ the
    `auto` policy asked for) and `Step.source` (where the candidates came from). Chunks are
    plain values, so a finished run keeps them in the page's state for the race replay."""

    t_s: float
    accepted_text: str
    own_text: str
    tokens: int
    drafted: int
    accepted: int
    rejected_text: str = ""
    step_s: float = 0.0
    draft_s: float | None = None
    chosen: int | None = None
    source: str | None = None

    @property
    def text(self) -> str:
        return self.accepted_text + self.own_text

    def to_dict(self) -> dict:
        return asdict(self)


def chunks_of(record: RunRecord | None) -> list[Chunk]:
    """A chunk per step of the run (none before its first step)."""
    if record is None:
        return []
    return [
        Chunk(
            step.t_s,
            step.accepted_text,
            step.text[len(step.accepted_text) :],
            len(step.token_ids),
            step.drafted,
            step.accepted,
            step.rejected_text,
            seconds,
            step.draft_s,
            step.chosen,
            step.source,
        )
        for step, seconds in zip(record.steps, stats.step_s(record), strict=True)
    ]


# -- run text ------------------------------------------------------------------------------

# The toggle is a plain checkbox that the page's style sheet reads: hiding the rejected
# drafts re-runs nothing and needs no round trip, and it holds through streaming and replay.
LEGEND_HTML = (
    '<div class="legend">'
    '<span class="tok acc">drafted, accepted</span> '
    '<span class="tok rej">drafted, rejected</span> '
    '<span class="tok own">the target\'s own token</span> '
    "— one box per target step; hover over or tab to a step for its details.<br>"
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


def step_details(number: int, chunk: Chunk) -> list[str]:
    """Lines about one assisted step: its number, counts and time, under `auto` the γ the
    policy chose and where the candidates came from, its whole rejected draft, and the
    target's own token."""
    timing = f"{chunk.step_s * 1000:.0f} ms"
    if chunk.draft_s is not None:
        timing += f" ({chunk.draft_s * 1000:.0f} ms drafting)"
    lines = [f"step {number} · drafted {chunk.drafted} · accepted {chunk.accepted} · {timing}"]
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
    if chunk.own_text:
        lines.append(f"then the target's own token: “{_visible(chunk.own_text)}”")
    return lines


def _step_html(number: int, chunk: Chunk) -> str:
    """An assisted step as a box: accepted candidates, the rejected remainder (struck
    through, clipped), the target's own token, and its details, shown on hover and focus."""
    parts = []
    if chunk.accepted_text:
        parts.append(f'<span class="acc">{html.escape(chunk.accepted_text)}</span>')
    if chunk.rejected_text:
        shown = _visible(chunk.rejected_text)
        if len(shown) > REJECTED_SHOWN_CHARS:
            shown = shown[:REJECTED_SHOWN_CHARS] + "…"
        parts.append(f'<s class="rej">{html.escape(shown)}</s>')
    parts.append(f'<span class="own">{html.escape(chunk.own_text)}</span>')
    details = "<br>".join(html.escape(line) for line in step_details(number, chunk))
    parts.append(f'<span class="tip" role="tooltip">{details}</span>')
    return f'<span class="step" tabindex="0">{"".join(parts)}</span>'


def run_html(
    chunks: Sequence[Chunk],
    mode: str,
    *,
    running: bool = False,
    stopped: bool = False,
    placeholder: str = "",
) -> str:
    """The run's text as HTML. Assisted runs show each step as a box (`_step_html`); plain
    runs show plain text.

    The box sits in a positioned wrapper outside the scrolling text, so a step's details
    show just below the box: positioned from the wrapper, they escape the text's scroll
    clipping, which the step's own position would not."""
    if not chunks and not running:
        body = f'<div class="run-text empty">{html.escape(placeholder)}</div>'
        return f'<div class="run-box">{body}</div>'
    if mode == "assisted":
        parts = [_step_html(number, chunk) for number, chunk in enumerate(chunks, start=1)]
    else:
        parts = [html.escape(chunk.text) for chunk in chunks]
    if running:
        parts.append('<span class="cursor">▍</span>')
    if stopped:
        parts.append('<span class="badge stopped">■ stopped</span>')
    return f'<div class="run-box"><div class="run-text {mode}">{"".join(parts)}</div></div>'


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
    median = sorted(chosen)[len(chosen) // 2] if chosen else None
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
        f"c = {_number(result.get('cost_ratio'), 2)}{_precision_note(result)} "
        "(Leviathan et al. 2023).",
        why_prediction_differs(measured, predicted),
    ]
    cost = cost_model_line(assisted)
    if cost:
        lines.append(cost)
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


def position_rows(position_acceptance: Sequence[float]) -> list[dict]:
    """Rows (position, accepted) from `stats.position_acceptance`: the share of steps whose
    candidate at that position of the draft was accepted; `position` is a label, 1 first."""
    return [
        {"position": str(i + 1), "accepted": share} for i, share in enumerate(position_acceptance)
    ]


def step_time_rows(runs: dict[str, Sequence[tuple[float | None, float]]]) -> list[dict]:
    """Rows (run, step, part, s) from `stats.step_times` of each run, a row per part of a
    step: "drafting" where drafting was timed apart, then "target" (the rest of the step).
    The time-per-step chart stacks each run's mean parts."""
    rows = []
    for name, times in runs.items():
        for index, (draft_s, target_s) in enumerate(times):
            if draft_s is not None:
                rows.append({"run": name, "step": index + 1, "part": "drafting", "s": draft_s})
            rows.append({"run": name, "step": index + 1, "part": "target", "s": target_s})
    return rows


# The draft-length chart's series: where a step's candidates came from (`Step.source`), or
# nothing drafted.
NOTHING_DRAFTED = "none"  # the note under the chart: a plain step, the target alone
# Early exit last: a phone's legend has room for three.
DRAFT_SOURCES = (
    DrafterKind.ASSISTANT.label,
    DrafterKind.PROMPT_LOOKUP.label,
    NOTHING_DRAFTED,
    DrafterKind.EARLY_EXIT.label,
)
# An undrawn point (transparent, out of the legend) half a step after the last step and half
# a candidate above the longest draft: the chart clips its points at its edges, so without
# it the last step and the longest drafts would show as halves. It spans at least
# HEADROOM_STEPS steps and HEADROOM_CANDIDATES candidates: over a shorter span the chart's
# axes tick every half step.
HEADROOM = "headroom"
HEADROOM_STEPS = 20
HEADROOM_CANDIDATES = 3


def source_label(chunk: Chunk) -> str:
    if chunk.drafted == 0:
        return NOTHING_DRAFTED
    # Records made before steps kept their source drafted with the run's drafter.
    return DrafterKind(chunk.source or DrafterKind.ASSISTANT).label


def draft_length_rows(chunks: Sequence[Chunk]) -> list[dict]:
    """Rows (step, candidates, source, drafted, accepted) of an assisted run, a row per step:
    `candidates` is the γ the `auto` policy chose (0: a plain step, the target alone), or
    under the other schedules the count drafted; `source` names where the candidates came
    from (`DRAFT_SOURCES`).

    First comes a row without a step or a count for every source, which the chart does not
    draw: Gradio's charts fix their colours from their first value, which must name every
    series. Then a `HEADROOM` row, which the chart draws transparent, half a step after the
    last step and half a candidate above the longest draft (at least 20 steps by 3)."""
    rows = [
        {"step": None, "candidates": None, "source": source, "drafted": 0, "accepted": 0}
        for source in DRAFT_SOURCES
    ]
    steps = [
        {
            "step": number,
            "candidates": chunk.drafted if chunk.chosen is None else chunk.chosen,
            "source": source_label(chunk),
            "drafted": chunk.drafted,
            "accepted": chunk.accepted,
        }
        for number, chunk in enumerate(chunks, start=1)
    ]
    top = max((row["candidates"] for row in steps), default=0)
    headroom = {
        "step": max(len(steps), HEADROOM_STEPS) + 0.5,
        "candidates": max(top, HEADROOM_CANDIDATES) + 0.5,
        "source": HEADROOM,
    }
    return [*rows, {**headroom, "drafted": 0, "accepted": 0}, *steps]


def step_time_label(run: str, tokens_per_step: float | None) -> str:
    """A run's name in the time-per-step chart, with what its steps commit: the bar shows
    what a step costs, the name what it buys."""
    return f"{run}: {_number(tokens_per_step, 2)} tokens/step"


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


# -- benchmark -----------------------------------------------------------------------------

# The guess before a pair's pace is measured (`assisted.ui.pace`): the embedded pair on a
# 2-core CPU, where a plain run of 128 new tokens takes about a minute.
CPU_SECONDS_PER_TOKEN = 0.5

CATEGORY_HEADERS = [
    "category", "drafter", "prompts", "speedup", "acceptance rate", "tokens per step",
    "predicted speedup", "identical",
]  # fmt: skip
PROMPT_HEADERS = [
    "category", "prompt", "drafter", "plain tok/s", "assisted tok/s", "speedup",
    "acceptance rate", "tokens per step", "predicted speedup", "identical",
]  # fmt: skip


def bench_runs(prompts: int, drafters: int, repeats: int) -> int:
    """Timed runs of a benchmark: per prompt and repeat, one plain run and one per drafter."""
    return prompts * repeats * (1 + drafters)


def bench_estimate_s(
    prompts: int,
    drafters: int,
    repeats: int,
    max_new_tokens: int,
    s_per_token: float = CPU_SECONDS_PER_TOKEN,
) -> float:
    """Seconds a benchmark takes at `s_per_token` (the pair's measured pace, or the guess):
    the timed runs plus each prompt's short untimed warm-up in every mode, every token at the
    plain pace. A rough figure, for a warning."""
    runs = bench_runs(prompts, drafters, repeats)
    warmup_tokens = prompts * (1 + drafters) * min(WARMUP_TOKENS, max_new_tokens)
    return (runs * max_new_tokens + warmup_tokens) * s_per_token


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{round(seconds / 60)} min"


def _per_token(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 0.1 else f"{seconds * 1000:.2g} ms"


def _estimate(prompts: int, drafters: int, repeats: int, tokens: int, pace: Pace | None) -> str:
    """ "about N min", with where the pace per token comes from."""
    if pace is None:
        estimate = bench_estimate_s(prompts, drafters, repeats, tokens)
        return (
            f"about **{_duration(estimate)}**, but no run has been measured on this pair yet: "
            f"that is a rough guess of ≈{CPU_SECONDS_PER_TOKEN} s per token, the embedded "
            "pair on a 2-core CPU (far less on a GPU). A comparison on this pair measures it"
        )
    estimate = bench_estimate_s(prompts, drafters, repeats, tokens, pace.s_per_token)
    return (
        f"about **{_duration(estimate)}** at ≈{_per_token(pace.s_per_token)} per token, "
        f"{pace.source}"
    )


def bench_plan_markdown(
    prompts: int, drafters: int, repeats: int, max_new_tokens: int, pace: Pace | None = None
) -> str:
    """What a benchmark will run and about how long that takes at the pair's `pace`, before
    it starts."""
    if prompts < 1 or drafters < 1:
        return "Choose at least one category and one drafter."
    runs = bench_runs(prompts, drafters, repeats)
    return (
        f"**{runs} timed runs** ({prompts} prompt{'s' if prompts > 1 else ''} × {repeats} "
        f"repeat{'s' if repeats > 1 else ''} × (plain + {drafters} drafter"
        f"{'s' if drafters > 1 else ''})) of up to {max_new_tokens} new tokens, plus a short "
        f"warm-up per prompt: {_estimate(prompts, drafters, repeats, max_new_tokens, pace)}."
    )


def bench_progress_markdown(done: int, total: int, label: str, elapsed_s: float) -> str:
    """The status line while a benchmark runs: "run k of n: <label>", with time left.

    `label` names the run just finished, or the untimed warm-up starting (`assisted.bench`'s
    Progress events)."""
    timing = f"{_duration(elapsed_s)} so far"
    if done:
        timing += f", about {_duration(elapsed_s / done * (total - done))} left"
    if done == 0 or label.endswith("warm-up"):
        return f"**{done} of {total} runs done** · now: {label} (untimed)… · {timing}"
    if done == total:
        return f"**All {total} runs done** in {_duration(elapsed_s)}: computing the report…"
    return f"**Run {done} of {total} done**: {label} · {timing}"


def _identical(row: dict) -> str:
    if row.get("identical"):
        return "yes"
    divergence = row.get("first_divergence")
    return "no" if divergence is None else f"no (token {divergence})"


def bench_category_rows(report: dict) -> list[list]:
    """A row per category and drafter, from `assisted.bench.report(...)`."""
    rows = []
    for drafter, entry in report.get("drafters", {}).items():
        for category, group in entry["categories"].items():
            rows.append(
                [
                    category,
                    drafter,
                    group["prompts"],
                    _number(group["speedup"], 2, "×"),
                    _percent(group["acceptance_rate"]),
                    _number(group["tokens_per_step"], 2),
                    _number(group["predicted_speedup"], 2, "×"),
                    f"{group['identical_prompts']}/{group['prompts']}",
                ]
            )
    return rows


def bench_prompt_rows(report: dict) -> list[list]:
    """A row per prompt and drafter, from `assisted.bench.report(...)`."""
    return [
        [
            row["category"],
            row["question_id"],
            row["drafter"],
            _number(row["plain_tokens_per_s"], 1),
            _number(row["assisted_tokens_per_s"], 1),
            _number(row["speedup"], 2, "×"),
            _percent(row["acceptance_rate"]),
            _number(row["tokens_per_step"], 2),
            _number(row["predicted_speedup"], 2, "×"),
            _identical(row),
        ]
        for row in report.get("prompts", [])
    ]


def bench_overall_markdown(report: dict) -> str:
    """The headline per drafter: the geometric-mean speedup over all prompts."""
    settings = report["settings"]
    lines = [
        f"**{report['pair']}** on {report['device']} · {report['dtype']} · greedy, "
        f"{settings['max_new_tokens']} new tokens, {settings['repeats']} "
        f"repeat{'s' if settings['repeats'] > 1 else ''}. Speedup = median assisted tokens/s "
        "÷ median plain tokens/s over the repeats; a category's is the median of its prompts'."
    ]
    for drafter, entry in report.get("drafters", {}).items():
        overall = entry["overall"]
        lines.append(
            f"**Overall, {drafter}: {_number(overall['speedup_geomean'], 2, '×')}** "
            f"(geometric mean over {overall['prompts']} prompt"
            f"{'s' if overall['prompts'] != 1 else ''}; median "
            f"{_number(overall['speedup_median'], 2, '×')}) · predicted "
            f"{_number(overall['predicted_speedup'], 2, '×')} · acceptance rate "
            f"{_percent(overall['acceptance_rate'])} · "
            f"{_number(overall['tokens_per_step'], 2)} tokens per step · identical "
            f"{overall['identical_prompts']}/{overall['prompts']}"
        )
    return "\n\n".join(lines)


def bench_warning(
    prompts: int, drafters: int, repeats: int, max_new_tokens: int, pace: Pace | None = None
) -> str:
    """The toast shown as a benchmark starts (plain text)."""
    runs = bench_runs(prompts, drafters, repeats)
    if pace is None:
        estimate = bench_estimate_s(prompts, drafters, repeats, max_new_tokens)
        guess = f"≈{CPU_SECONDS_PER_TOKEN} s per token, a guess: none measured on this pair yet"
        how_long = f"about {_duration(estimate)} at {guess}"
    else:
        estimate = bench_estimate_s(prompts, drafters, repeats, max_new_tokens, pace.s_per_token)
        how_long = f"about {_duration(estimate)} at the measured pace"
    return (
        f"{runs} timed runs of up to {max_new_tokens} new tokens: {how_long}. The device is "
        "busy until it finishes; Stop ends it within one step, without a report."
    )
