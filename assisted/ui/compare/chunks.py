"""A run's steps as the Compare tab shows them: one `Chunk` a step, plain values that the
page's state keeps for the race replay, and the race's timeline. Imports neither torch nor
gradio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from assisted.analysis import stats
from assisted.analysis.sampling import kinds
from assisted.core.drafters import DrafterKind
from assisted.core.record import RunRecord, Step

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
