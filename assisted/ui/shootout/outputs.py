"""The Shoot-out tab's outputs, by name, in the order of the /shootout endpoint's (as
`compare.outputs` orders Compare's). Imports neither torch nor gradio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

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
