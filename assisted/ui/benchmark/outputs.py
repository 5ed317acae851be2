"""The Benchmark tab's outputs, by name, in the order of the /benchmark endpoint's (as
`compare.outputs` orders Compare's). Imports neither torch nor gradio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the chart is a figure, drawn by `assisted.bench`
    import pandas as pd
    from matplotlib.figure import Figure


class BenchmarkOutputs(NamedTuple):
    """The Benchmark tab's outputs: the /benchmark endpoint's, in this order. The tables,
    headline, chart and report come with the last value; until then only `status` moves."""

    status: str  # Markdown
    categories: pd.DataFrame  # "Per category" (`benchmark.format.CATEGORY_HEADERS`)
    prompts: pd.DataFrame  # "Per prompt" (`benchmark.format.PROMPT_HEADERS`)
    overall: str  # Markdown
    chart: Figure | None  # "Speedup per category" (`assisted.bench.draw_chart`)
    report: dict | None  # `assisted.bench.report(...)`, what `python -m assisted.bench` prints
