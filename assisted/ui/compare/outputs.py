"""The Compare tab's outputs, by name. Imports neither torch nor gradio.

The NamedTuple is the one place that orders the tab's outputs: the tab lists its components
for Gradio in the order of the fields (`assisted.ui.tabs.in_order`), and every handler yields an
instance built by field name, so adding an output means adding a field. The values are
plain (strings, data frames, dicts), and the classes are defined at module level, so an
instance pickles: the values are made in the GPU process on ZeroGPU
(`app.stream_comparison`) and cross its process boundary.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NamedTuple

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
