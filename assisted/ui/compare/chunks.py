"""A run's steps as the Compare tab shows them: one `Chunk` a step, plain values that the
page's state keeps for the race replay, and the race's timeline. Imports neither torch nor
gradio.

The Compare tab's charts as data: rows from a run's chunks and `assisted.analysis.stats`, and the
typed data frames the charts take. Imports neither torch nor gradio.

Gradio's charts fix their axis types and their colour legend from the first value they
get, so every frame has typed columns even when empty, and names every series from the
start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import pandas as pd

from assisted.analysis import stats
from assisted.analysis.sampling import kinds
from assisted.core.record import RunRecord, Step
from assisted.core.settings import DrafterKind
from assisted.ui.numbers import number

# One drafted token of a sampled step: its text, p and q.
Draw = tuple[str, float, float]


@dataclass(frozen=True)
class Chunk:
    """One step as the UI shows it: the candidates the target accepted, the rest of the
    draft (rejected), then the target's own token.

    The text splits where the step's draft does (`Step.accepted_text` is the start of the
    step's text). `step_s` and `draft_s` are the step's time and its drafting time
    (`stats.step_s`, `Step.draft_s`); `chosen` and `source` are `Step.chosen` (the γ the
    `auto` policy asked for) and `Step.source` (where the candidates came from).
    `diverged` is where the token at which the two runs first differ sits in `text`, as
    (start, end) characters; None in every other step. In a sampled run, `draws` are the
    drafted tokens' (text, p, q), and `own_kind` the kind of the target's own token
    (`assisted.analysis.sampling.KINDS`; None without one). Chunks are plain values, so a finished
    run keeps them in the page's state for the race replay."""

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
    diverged: tuple[int, int] | None = None
    draws: tuple[Draw, ...] = ()
    own_kind: str | None = None

    @property
    def text(self) -> str:
        return self.accepted_text + self.own_text

    def to_dict(self) -> dict:
        return asdict(self)


def chunks_of(
    record: RunRecord | None, draft_texts: Sequence[Sequence[str]] | None = None
) -> list[Chunk]:
    """A chunk per step of the run (none before its first step); in a sampled run, with
    the text of each drafted token from `draft_texts`, a list per step (else its id)."""
    if record is None:
        return []
    draws = shows_draws(record)
    return [
        chunk_of(step, seconds, draws, draft_texts[index] if draft_texts else None)
        for index, (step, seconds) in enumerate(
            zip(record.steps, stats.step_s(record), strict=True)
        )
    ]


def shows_draws(record: RunRecord) -> bool:
    """Whether the run's chunks show their draws: an assisted run that sampled."""
    return record.sampled and record.mode == "assisted"


def chunk_of(
    step: Step, seconds: float, draws: bool = False, draft_texts: Sequence[str] | None = None
) -> Chunk:
    """The chunk of one step, which took `seconds` (`stats.step_s`). With `draws`
    (`shows_draws` of its run), the step's draws and the kind of its own token: a drafted
    token's text comes from `draft_texts`, else it shows as its id."""
    chunk = Chunk(
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
    if not draws:
        return chunk
    texts = draft_texts if draft_texts is not None else [f"#{t}" for t in step.draft_ids]
    drawn = tuple(zip(texts, step.draft_p, step.draft_q, strict=False))
    own = kinds(step)[step.accepted :]
    return replace(chunk, draws=drawn, own_kind=own[0] if own else None)


def chunks_from_dicts(items: Sequence[dict]) -> list[Chunk]:
    """Chunks back from the page's state (`Chunk.to_dict`), for the race replay."""
    return [Chunk(**item) for item in items]


# Where a step's candidates came from (`Step.source`), or nothing drafted: its details and
# the draft-length chart's series say it alike.
NOTHING_DRAFTED = "none"  # the note under the chart: a plain step, the target alone


def source_label(chunk: Chunk) -> str:
    if chunk.drafted == 0:
        return NOTHING_DRAFTED
    # A drafting step that names no source drafted with the assistant.
    return DrafterKind(chunk.source or DrafterKind.ASSISTANT).label


def race_timeline(runs: dict[str, Sequence[Chunk]]) -> list[tuple[float, str, int]]:
    """(t_s, run, chunks shown) in time order: both runs start together at 0 s."""
    events = [
        (chunk.t_s, name, index + 1)
        for name, chunks in runs.items()
        for index, chunk in enumerate(chunks)
    ]
    return sorted(events)


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


# The oracle's schedule, overlaid on the run's steps in the draft-length chart.
ORACLE = "oracle, in hindsight"
# The draft-length chart's series: where a step's candidates came from, or nothing drafted,
# then the oracle's choices. Early exit last: a phone's legend has room for four.
DRAFT_SOURCES = (
    DrafterKind.ASSISTANT.label,
    DrafterKind.PROMPT_LOOKUP.label,
    NOTHING_DRAFTED,
    ORACLE,
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


def draft_length_rows(chunks: Sequence[Chunk], oracle: dict | None = None) -> list[dict]:
    """Rows (step, candidates, source, drafted, accepted) of an assisted run, a row per step:
    `candidates` is the γ the `auto` policy chose (0: a plain step, the target alone), or
    under the other schedules the count drafted; `source` names where the candidates came
    from (`DRAFT_SOURCES`). Then, where the JSON's `oracle` has a schedule, a row per step
    of it (`ORACLE`): the γ the oracle would have drafted at its step of that number.

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
            "step": step_number,
            "candidates": chunk.drafted if chunk.chosen is None else chunk.chosen,
            "source": source_label(chunk),
            "drafted": chunk.drafted,
            "accepted": chunk.accepted,
        }
        for step_number, chunk in enumerate(chunks, start=1)
    ]
    steps += [
        {
            "step": step_number,
            "candidates": move["gamma"],
            "source": ORACLE,
            "drafted": move["gamma"],
            "accepted": move["committed"] - 1,
        }
        for step_number, move in enumerate((oracle or {}).get("schedule") or [], start=1)
    ]
    top = max((row["candidates"] for row in steps), default=0)
    headroom = {
        "step": max(max((row["step"] for row in steps), default=0), HEADROOM_STEPS) + 0.5,
        "candidates": max(top, HEADROOM_CANDIDATES) + 0.5,
        "source": HEADROOM,
    }
    return [*rows, {**headroom, "drafted": 0, "accepted": 0}, *steps]


def step_time_label(run: str, tokens_per_step: float | None) -> str:
    """A run's name in the time-per-step chart, with what its steps commit: the bar shows
    what a step costs, the name what it buys."""
    return f"{run}: {number(tokens_per_step, 2)} tokens/step"


# -- data frames ---------------------------------------------------------------------------


def timeline_frame(chunks: dict[str, list[Chunk]]) -> pd.DataFrame:
    frame = pd.DataFrame(timeline_rows(chunks), columns=["run", "t_s", "tokens"])
    return frame.astype({"run": str, "t_s": float, "tokens": int})


def histogram_frame(histogram: list[int]) -> pd.DataFrame:
    frame = pd.DataFrame(histogram_rows(histogram), columns=["accepted", "steps"])
    return frame.astype({"accepted": str, "steps": int})


def position_frame(position_acceptance: list[float]) -> pd.DataFrame:
    frame = pd.DataFrame(position_rows(position_acceptance), columns=["position", "accepted"])
    return frame.astype({"position": str, "accepted": float})


def step_time_frame(runs: dict[str, RunRecord | None]) -> pd.DataFrame:
    """Each run's steps, split into drafting and the target's part, under the run's name
    and tokens per step (the chart shows each run's mean step).

    A run without steps yet shows zero bars of both parts: Gradio's bar chart fixes its
    colours from its first value, which must name every part."""
    times = {
        step_time_label(mode, stats.tokens_per_step(record) if record else None): (
            stats.step_times(record) if record else [(0.0, 0.0)]
        )
        for mode, record in runs.items()
    }
    frame = pd.DataFrame(step_time_rows(times), columns=["run", "step", "part", "s"])
    return frame.astype({"run": str, "step": int, "part": str, "s": float})


def draft_length_frame(chunks: list[Chunk], oracle: dict | None = None) -> pd.DataFrame:
    columns = ["step", "candidates", "source", "drafted", "accepted"]
    frame = pd.DataFrame(draft_length_rows(chunks, oracle), columns=columns)
    # Float steps and counts: the rows that only name a series hold NaN, which no chart draws.
    types = {"step": float, "candidates": float, "source": str, "drafted": int, "accepted": int}
    return frame.astype(types)
