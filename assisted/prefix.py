"""The shared prefix of two sequences: of ids (a draft and what a step committed, a cache's
ids and the committed ones) or of text. No torch here."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix_length(a: Sequence, b: Sequence) -> int:
    """How many leading items `a` and `b` share."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))
