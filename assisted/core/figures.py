"""The one rounding and the one median that every figure is made with."""

from __future__ import annotations

from collections.abc import Sequence

DIGITS = 4  # decimals a figure keeps in the JSON


def rounded(value: float | None, digits: int = DIGITS) -> float | None:
    """`value` to `digits` decimals; None stays None."""
    return None if value is None else round(value, digits)


def median(values: Sequence[float | None]) -> float | None:
    """The median of the values that are not None (the mean of the two middle ones for an
    even count); None where there are none."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
