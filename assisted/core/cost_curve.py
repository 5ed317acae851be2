"""T(k), the target's seconds to verify k rows, fitted from measured (rows, seconds) pairs:
the one fit the policy runs on, the calibration checks its rows against, and the oracle is
priced by.

Two facts make the fit robust on a shared machine, where other work slows passes at
random and only ever adds time:
- **Monotone.** Verifying more rows never costs less, so each row's estimate is at most
  any larger row's (the curve is the suffix minimum of the rows' estimates). A patch of
  slow timings on some rows (a hump: T(3)…T(8) at 0.45–0.74 s between T(2) at 0.18 s
  and T(9) at 0.21 s, in a learnt file written while a test job shared the cores) is cut
  down to the larger rows' cost instead of pricing those lengths out for good.
- **Medians.** A row measured several times takes the median of its timings, and rows
  not measured follow the prior curve at the level the measured rows set (the median of
  their ratios to it): a few slow passes move neither.

A prior (the calibration, or what earlier runs kept) counts as `prior_weight` timings of
each of its rows and of the level: the run's own timings overrule it after a few steps.

No torch here: numbers in, numbers out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from assisted.core.figures import median


def fit(
    measured: Mapping[int, Sequence[float]],
    rows: Iterable[int],
    prior: Mapping[int, float] | None = None,
    prior_weight: int = 0,
) -> dict[int, float]:
    """T(k) for each k in `rows` (the module's note) from the `measured` timings per row
    and a `prior` curve worth `prior_weight` timings. A row with neither is interpolated
    between its neighbours' estimates, or extended along the last two past the top.
    Refused where nothing is known at all."""
    prior = dict(prior or {})
    known = {k: list(times) for k, times in measured.items() if times}
    if not known and not prior:
        raise ValueError("no verification was timed, and no prior curve was given")
    ratios = [t / prior[k] for k, times in known.items() if k in prior for t in times]
    level = median(ratios + [1.0] * prior_weight) if ratios else 1.0
    estimates = {}
    for k in known.keys() | prior.keys():
        if k in known:
            weight = prior_weight if k in prior else 0
            estimates[k] = median(known[k] + [prior.get(k, 0.0)] * weight)
        else:
            estimates[k] = prior[k] * level
    wanted = sorted(set(rows))
    curve = {k: _between(estimates, k) for k in sorted(estimates.keys() | set(wanted))}
    ceiling = float("inf")
    for k in sorted(curve, reverse=True):
        ceiling = curve[k] = min(curve[k], ceiling)
    return {k: curve[k] for k in wanted}


def dearer_than_fit(points: Mapping[int, float], noise: float) -> list[int]:
    """The rows of `points` that some disturbance slowed: dearer, by more than the share
    `noise`, than the monotone fit of all of them (a larger row was timed cheaper), or than
    as many one-row passes (one pass over k rows never costs more than k passes over one:
    it reads the weights once)."""
    if not points:
        return []
    curve = fit({k: [t] for k, t in points.items()}, points)
    one_row = curve.get(1, float("inf"))
    return sorted(k for k, t in points.items() if t > (1.0 + noise) * min(curve[k], k * one_row))


def _between(points: Mapping[int, float], k: int) -> float:
    """The value at `k`: its own, linear between the nearest points around it, the lowest
    point's below them, and along the last two points past them (never below the last)."""
    if k in points:
        return points[k]
    lower = [x for x in points if x < k]
    higher = [x for x in points if x > k]
    if not lower:
        return points[min(higher)]
    low = max(lower)
    if higher:
        high = min(higher)
        return points[low] + (points[high] - points[low]) * (k - low) / (high - low)
    below = max((x for x in lower if x < low), default=None)
    if below is None:
        return points[low]
    slope = max((points[low] - points[below]) / (low - below), 0.0)
    return points[low] + slope * (k - low)
