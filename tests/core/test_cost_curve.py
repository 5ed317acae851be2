"""T(k)'s monotone fit (`assisted.core.cost_curve`): the rows of most timings stand."""

from __future__ import annotations

import pytest

from assisted.core import cost_curve

ROWS = range(1, 10)


def test_rows_of_equal_evidence_are_cut_to_any_larger_rows_cost():
    # A hump of slow timings between cheaper rows: verifying more rows never costs less.
    hump = {1: 0.19, 2: 0.18, 3: 0.45, 5: 0.50, 8: 0.74, 9: 0.21}
    curve = cost_curve.fit({k: [t] for k, t in hump.items()}, ROWS)
    assert curve[1] == pytest.approx(0.18) and curve[2] == pytest.approx(0.18)
    assert all(curve[k] <= 0.21 for k in range(3, 10))


def test_a_row_of_few_timings_never_cuts_a_row_of_many():
    # Kept rows: T(1) the median of 177 passes of the runs, T(2) to T(4) a calibration's
    # three. The well-measured row stands, and the rows above it rise to it.
    kept = {1: 0.23, 2: 0.15, 3: 0.16, 4: 0.17, 9: 0.26}
    counts = {1: 177, 2: 3, 3: 3, 4: 3, 9: 13}
    curve = cost_curve.fit({k: [t] for k, t in kept.items()}, ROWS, counts=counts)
    assert curve[1] == pytest.approx(0.23)
    assert [curve[k] for k in (2, 3, 4)] == pytest.approx([0.23] * 3)
    assert curve[9] == pytest.approx(0.26)
    assert list(curve.values()) == sorted(curve.values())
    # Without the counts, the cheap calibrated T(2) would cut T(1): 1.7x steeper.
    assert cost_curve.fit({k: [t] for k, t in kept.items()}, ROWS)[1] == pytest.approx(0.15)
