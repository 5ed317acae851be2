"""How a figure reads on both tabs: a number to a fixed number of digits, a share as a
percentage, and a dash for a figure a run could not measure. Imports neither torch nor
gradio."""

from __future__ import annotations


def number(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"
