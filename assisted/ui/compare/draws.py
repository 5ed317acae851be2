"""What the Compare tab shows of a sampled assisted run's draws, as plain strings: each
drafted token's p, q and min(1, p/q) in its step's details, and the marks of the target's
corrected and bonus tokens. Imports neither torch nor gradio; the terms are
`assisted.analysis.stats`'s.

Under sampling the target's own token is not simply "the target's": after a rejection it
is drawn from max(0, p − q), renormalised, which is what keeps assisted sampling exactly
the target's distribution; after a fully accepted draft it comes free, drawn from p. The
text marks the two apart, so a reader sees where the mechanism corrected a draft.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from assisted.analysis.sampling import BONUS, CORRECTED, TARGET, accept_prob
from assisted.ui.compare.chunks import Draw

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
