"""The benchmark's chart: speedup per category, measured beside predicted or fitted, per
drafter, drawn from the report (`assisted.bench.reporting`). Matplotlib is imported when a
chart is drawn, so the report and its card need none."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_chart(result: dict) -> Figure:
    """Speedup per category, measured (solid) beside predicted or fitted (hatched), per drafter."""
    from matplotlib.figure import Figure

    drafters = result["drafters"]
    categories = list(dict.fromkeys(c for d in drafters.values() for c in d["categories"]))
    bars = 2 * max(1, len(drafters))
    width = 0.8 / bars
    figure = Figure(figsize=(max(6.0, 1.2 * len(categories) * max(1, len(drafters))), 4.0))
    axes = figure.add_subplot()
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    for d, (name, entry) in enumerate(drafters.items()):
        colour = palette[d % len(palette)]
        for k, (key, hatch, alpha) in enumerate(
            (("speedup", None, 1.0), ("predicted_speedup", "//", 0.45))
        ):
            values = [entry["categories"].get(c, {}).get(key) or 0.0 for c in categories]
            offsets = [i - 0.4 + width * (2 * d + k + 0.5) for i in range(len(categories))]
            label = f"{name}: {'measured' if k == 0 else 'predicted / fitted'}"
            bars_drawn = axes.bar(
                offsets, values, width, color=colour, alpha=alpha, hatch=hatch, label=label
            )
            axes.bar_label(bars_drawn, fmt="%.2f", fontsize="x-small")
    axes.axhline(1.0, color="grey", linewidth=1, linestyle="--")
    axes.set_xticks(range(len(categories)), categories, rotation=20, ha="right")
    axes.set_ylabel("speedup (× plain tokens/s)")
    axes.set_title(f"{result['pair']} · {result['device']} · {result['dtype']}")
    axes.legend(fontsize="small")
    figure.tight_layout()
    return figure
