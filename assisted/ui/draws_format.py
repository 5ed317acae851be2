"""What the Compare tab shows of a sampled assisted run's draws, as plain strings: each
drafted token's p, q and min(1, p/q) in its step's details, and the marks of the target's
corrected and bonus tokens. Imports neither torch nor gradio; the terms are
`assisted.stats`'s.

Under sampling the target's own token is not simply "the target's": after a rejection it
is drawn from max(0, p − q), renormalised, which is what keeps assisted sampling exactly
the target's distribution; after a fully accepted draft it comes free, drawn from p. The
text marks the two apart, so a reader sees where the mechanism corrected a draft.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from assisted.record import RunRecord
from assisted.sampling import BONUS, CORRECTED, TARGET, accept_prob, kinds

if TYPE_CHECKING:
    from assisted.ui.compare_format import Chunk

# One drafted token of a sampled step: its text, p and q.
Draw = tuple[str, float, float]

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


def with_draws(
    chunks: list[Chunk], record: RunRecord, draft_texts: Sequence[Sequence[str]] | None
) -> list[Chunk]:
    """`chunks`, a chunk per step of `record`, with each step's draws and the kind of its
    own token where the run sampled (unchanged otherwise). A drafted token's text comes
    from `draft_texts`, a list per step, else it shows as its id."""
    if not record.sampled or record.mode != "assisted":
        return chunks
    shown = []
    for index, (chunk, step) in enumerate(zip(chunks, record.steps, strict=True)):
        texts = draft_texts[index] if draft_texts else [f"#{t}" for t in step.draft_ids]
        draws = tuple(zip(texts, step.draft_p, step.draft_q, strict=False))
        own = kinds(step)[step.accepted :]
        shown.append(replace(chunk, draws=draws, own_kind=own[0] if own else None))
    return shown


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
