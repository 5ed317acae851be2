"""T(k), the target's seconds to verify k rows, fitted from measured (rows, seconds) pairs:
the one fit the policy runs on, the calibration checks its rows against, and the oracle is
priced by.

Two facts make the fit robust on a shared machine, where other work slows passes at
random and only ever adds time:
- **Monotone.** Verifying more rows never costs less, so each row's estimate is at most
  any larger row's of the same kind of evidence (a suffix minimum), the rows of most
  timings standing where they disagree (`_monotone`). A patch of slow
  timings on some rows of the prior (a hump: T(3)…T(8) at 0.45–0.74 s between T(2) at
  0.18 s and T(9) at 0.21 s, in a learnt file written while a test job shared the cores)
  is cut down to the larger rows' cost instead of pricing those lengths out for good; so
  is a measured row that a larger measured row was timed below.
- **Medians.** A row measured several times takes the median of its timings, and rows
  not measured follow the (monotone) prior at the level the measured rows set (the
  median of their ratios to it): a few slow passes move neither.

A row no one measured is never evidence against one that was: it is an interpolation of
the prior, kept between the measured rows around it. A prior row cheaper than what the run
pays now (timed on a quiet moment, the cores busy since) would otherwise cut every smaller
measured row down to it, however often measured: on a shared EPYC, a prior T(9) of 0.20 s
held a run's T(1) at 0.20 s through 126 passes of 0.56 s, and the floor, priced by it,
stopped an assistant that ran twice plain's pace (docs/lab-notes.md).

A prior (the calibration, or what earlier runs kept) counts as `prior_weight` timings of
each of its rows and of the level: the run's own timings overrule it after a few steps.

No torch here: numbers in, numbers out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from assisted.core.record import median


def fit(
    measured: Mapping[int, Sequence[float]],
    rows: Iterable[int],
    prior: Mapping[int, float] | None = None,
    prior_weight: int = 0,
    counts: Mapping[int, int] | None = None,
) -> dict[int, float]:
    """T(k) for each k in `rows` (the module's note) from the `measured` timings per row
    and a `prior` curve worth `prior_weight` timings. A row with neither is interpolated
    between its neighbours' estimates, or extended along the last two past the top.
    `counts` says how many timings a measured row stands for where its list is a summary
    (a learnt row: its median, of that many); else each timing counts once.
    Refused where nothing is known at all."""
    prior = _suffix_min(dict(prior or {}))
    known = {k: list(times) for k, times in measured.items() if times}
    if not known and not prior:
        raise ValueError("no verification was timed, and no prior curve was given")
    level = _level(known, prior, prior_weight)
    weights = {}
    for k, times in known.items():
        copies = prior_weight if k in prior else 0
        weights[k] = (counts or {}).get(k, len(times)) + copies
        known[k] = times + [prior.get(k, 0.0)] * copies
    points = {k: median(times) for k, times in known.items()}
    followed = {k: t * level for k, t in prior.items() if k not in points}
    for k in (followed.keys() | set(rows)) - points.keys():
        # An interpolation is no evidence: weighing nothing, it is placed last, between
        # the measured rows around it.
        weights[k] = 0
        points[k] = (
            _between(followed, k) if followed else _between({j: points[j] for j in known}, k)
        )
    curve = _monotone(points, weights)
    return {k: curve[k] for k in sorted(set(rows))}


def level(
    measured: Mapping[int, Sequence[float]],
    prior: Mapping[int, float],
    prior_weight: int = 0,
) -> float:
    """The level the `measured` timings set against the (monotone) `prior` curve: the median
    of their ratios to it, the prior counting as `prior_weight` ratios of 1. What a cost
    that shares the machine with the target, and that the run has not timed yet, is scaled
    by (`assisted.policy.costs`)."""
    return _level(measured, _suffix_min(prior), prior_weight)


def _level(
    measured: Mapping[int, Sequence[float]], prior: Mapping[int, float], prior_weight: int
) -> float:
    ratios = [t / prior[k] for k, times in measured.items() if k in prior for t in times]
    return median(ratios + [1.0] * prior_weight) if ratios else 1.0


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


def _monotone(points: Mapping[int, float], weights: Mapping[int, int]) -> dict[int, float]:
    """`points` made monotone, the row of the most timings first (the module's note): each
    row in turn, the cheaper first among equals, is kept between the rows placed before it
    (at least any smaller one's, at most any larger one's). Among rows of equal weight this
    is the suffix minimum: a larger row timed cheaper cuts a smaller one. A row timed three
    times by a calibration never cuts one a run timed 177 times: on a shared EPYC, a
    calibrated T(2) of 0.15 s cut such a T(1) of 0.23 s, priced verification 1.7x steeper
    than it was, and held the assistant back all run (docs/lab-notes.md)."""
    curve: dict[int, float] = {}
    for k in sorted(points, key=lambda k: (-weights[k], points[k])):
        floor = max((t for j, t in curve.items() if j < k), default=0.0)
        ceiling = min((t for j, t in curve.items() if j > k), default=float("inf"))
        curve[k] = min(max(points[k], floor), ceiling)
    return dict(sorted(curve.items()))


def _suffix_min(points: Mapping[int, float]) -> dict[int, float]:
    """`points` with each value at most any larger key's (verifying more rows never costs
    less): `_monotone` with every row of equal weight."""
    return _monotone(points, dict.fromkeys(points, 1))
