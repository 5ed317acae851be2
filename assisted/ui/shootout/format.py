"""The Shoot-out tab's values: its lanes as they run, the ranking as a table, and the
race and the γ sweep as chart rows. Imports neither torch nor gradio.

Its request (`ShootoutRequest`): what its GPU call (`shootout.gpu`) takes, a frozen
dataclass of plain values, as every call's request is (`assisted.ui.requests`).

Its outputs, by name, in the order of the /shootout endpoint's (`ShootoutOutputs`, as
`compare.format.CompareOutputs` orders Compare's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import pandas as pd

from assisted.analysis import oracle
from assisted.bench.shootout import range_text
from assisted.core.settings import RunSettings
from assisted.ui.numbers import number, percent
from assisted.ui.requests import PairPlace, StopFlag

if TYPE_CHECKING:
    import pandas as pd


class ShootoutOutputs(NamedTuple):
    """The Shoot-out tab's outputs: the /shootout endpoint's, in this order. `lanes` moves
    as the runs stream; the table, the why, the charts and the result come with the last
    value."""

    status: str  # Markdown
    lanes: str  # Markdown: each lane's latest run, the one running as it streams
    ranking: pd.DataFrame  # `format.RANKING_HEADERS`
    why: str  # Markdown: why the winner won
    race: pd.DataFrame | None  # tokens over time, a line per lane: seconds, tokens, lane
    sweep: pd.DataFrame | None  # modelled speedup by constant γ: γ, speedup, lane
    result: dict | None  # `assisted.bench.shootout.rank(...)`, what the CLI's --json prints


RANKING_HEADERS = [
    "#",
    "lane",
    "speedup",
    "rounds (= tied)",
    "accepted",
    "tokens / step",
    "drafting / target step",
    "oracle",
    "share of the oracle",
    "output",
]
RACE_COLUMNS = ["seconds", "tokens", "lane"]
SWEEP_COLUMNS = ["γ", "speedup", "lane"]
# How much of a lane's text the live view shows: the end, where the tokens arrive.
SHOWN_CHARS = 600


def lanes_markdown(latest: dict[str, str], running: str | None, speeds: dict[str, float]) -> str:
    """Each lane's latest run: its text so far (the running one's as it streams) and, once
    a run of it finished, its tokens per second."""
    if not latest:
        return "Each lane's run shows here as it streams: plain first, then each lane in turn."
    parts = []
    for lane, text in latest.items():
        state = "running" if lane == running else f"{number(speeds.get(lane), 1)} tok/s"
        shown = text if len(text) <= SHOWN_CHARS else "…" + text[-SHOWN_CHARS:]
        fenced = shown.replace("```", "`‵`")  # a fence in the text would end the block
        parts.append(f"**{lane}** · {state}\n\n```\n{fenced}\n```")
    return "\n\n".join(parts)


def progress_markdown(done: int, total: int, label: str) -> str:
    return f"**Running** {done} of {total} timed runs · {label}"


def ranking_rows(result: dict) -> list[list]:
    """A row per lane, best first (`RANKING_HEADERS`)."""
    return [
        [
            place,
            lane["lane"],
            number(lane["speedup"], 2, "×"),
            range_text(lane).replace("x", "×"),
            percent(lane["acceptance_rate"]),
            number(lane["tokens_per_step"], 2),
            "free"
            if lane["drafting_s_per_token"] == 0.0
            else number(lane["drafting_cost_ratio"], 2),
            number(lane["oracle_speedup"], 2, "×"),
            "—" if lane["measured_share"] is None else oracle.share_text(lane["measured_share"]),
            lane["outcome"],
        ]
        for place, lane in enumerate(result["lanes"], start=1)
    ]


def ranking_frame(result: dict | None) -> pd.DataFrame:
    rows = ranking_rows(result) if result else []
    return pd.DataFrame(rows, columns=RANKING_HEADERS)


def why_markdown(result: dict) -> str:
    """The winner and why, then what the sweep is and how the baseline ran."""
    plain = result["plain"]
    lines = [
        f"**{result['why']}**" if result["why"] else "No lane finished a round.",
        f"One plain baseline: {plain['runs']} run{'s' * (plain['runs'] != 1)} at "
        f"{number(plain['tokens_per_s'], 2)} tokens/s, on {result['device']} in "
        f"{result['dtype']}; each lane ran alone, in turn, the order flipped from round to "
        "round.",
        "Each lane's rounds: the lowest and highest of its rounds' speedups, each over its "
        "round's plain run; = marks a lane whose rounds reach the winner's, which this "
        "shoot-out cannot rank against it.",
        f"The γ sweep is {result['sweep']['basis']}.",
    ]
    if result["stopped"]:
        lines.insert(0, "**Stopped**: the ranking covers the rounds that finished.")
    return "\n\n".join(lines)


def race_frame(result: dict) -> pd.DataFrame:
    """Tokens over time, a line per lane and plain. Typed, as the chart takes its axes'
    types from the columns' (an untyped column is a category, each value a tick)."""
    rows = [
        [seconds, tokens, lane]
        for lane, points in result["race"].items()
        for seconds, tokens in [[0.0, 0], *points]
    ]
    frame = pd.DataFrame(rows, columns=RACE_COLUMNS)
    return frame.astype({"seconds": float, "tokens": int, "lane": str})


def sweep_frame(result: dict) -> pd.DataFrame:
    """Modelled speedup by constant γ, a line per lane swept; typed as `race_frame`."""
    rows = [
        [int(gamma), speedup, lane]
        for lane, by_gamma in result["sweep"]["curves"].items()
        for gamma, speedup in by_gamma.items()
    ]
    frame = pd.DataFrame(rows, columns=SWEEP_COLUMNS)
    return frame.astype({"γ": int, "speedup": float, "lane": str})


@dataclass(frozen=True)
class ShootoutRequest:
    """One shoot-out: `prompt` raced `repeats` times, plain once a round and each of the
    `lanes` that apply (`assisted.bench.shootout.lanes_for`, counted before the call so that
    its time is priced from them), under `settings`; the ranking keeps each lane's runs'
    `per_step` only where `per_step` asks."""

    pair: PairPlace
    prompt: str
    settings: RunSettings
    repeats: int
    lanes: int
    stop: StopFlag
    per_step: bool = False

    def timed_tokens(self) -> tuple[int, int]:
        """The new tokens the call times: one plain run and one run a lane, each round."""
        tokens = self.repeats * self.settings.max_new_tokens
        return tokens, tokens * self.lanes

    def drafting_cap(self) -> int:
        """The pair's cap: its `auto` lane's, the longest any lane drafts."""
        return self.pair.spec.draft.num_assistant_tokens
