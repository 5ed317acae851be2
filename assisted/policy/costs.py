"""The `auto` policy's cost model: how long a step takes, by source and draft length, as the
run is paying it.

cost(γ) = call_s + drafter_s·γ + T(γ + 1), plus catch_up_s for an assistant model that
skipped the steps before (its cache then lacks the tokens it did not see). A plain step
(γ = 0) costs T(1).
- T(k) is the target's time to verify k rows (the last committed token + k − 1
  candidates), fitted monotone in k from the run's own timed verifications, robustly
  (`fit`, below: medians, the level of the rows not yet verified set by the ratios of
  those verified, every row at most any larger row's).
- drafter_s is a source's time per drafted token. Prompt lookup's is 0: its n-gram search
  runs at every step whatever is chosen, so choosing it costs only the verification.
  Where the model source's drafts were timed by length (replayed CUDA graphs: a short
  draft pays the launch and the read a long one pays), a draft of γ costs
  drafter_s·γ·shape(γ), shape(γ) its time per token over the longest draft's, so that it
  starts at its own timing; each draft is a timing of drafter_s once divided by its
  shape, so every length moves alike.
- call_s is the assistant's time per drafting call outside its forward passes (its own
  generate() loop); catch_up_s what reading the skipped steps' tokens adds to a call.
- prefill_s is the assistant's time per token of context it reads before its first draft,
  and prices any read of tokens it has not seen (`read_s`: its first read of the prompt,
  its catch-up after skipped steps); the policy weighs that read before starting or
  resuming the assistant at all (`assisted.policy.choice`).

**The costs a decision uses are the costs the run is paying.** Each figure starts from a
prior (the calibration, refined by earlier runs: `assisted.policy.learnt`) that counts as
`PRIOR_WEIGHT` timings, and each of the run's own timings joins a window of the latest
`WINDOW`; the figure is the median of the window and the prior's copies. Three timings of
the run overrule any prior, however wrong: a learnt file written while another job shared
the cores once priced the first read 3× and T(3)…T(8) 2.5× above what the machine paid,
and an average that moved 4% a timing (the model this replaced) kept the assistant from
drafting for dozens of runs (docs/lab-notes.md). A median also ignores the odd slow
pass, which an average carries for many steps.

The assistant shares the machine with the target, so a neighbour that slows one slows the
other: until the run has timed the assistant itself, its priors (time per drafted token,
per token read) follow the level the target's passes set against their prior
(`level`). A run on a machine slowed as a whole then decides as it would on a
quiet one, where priors taken as they stand would price the read, timed on a quiet moment,
as cheap against busy steps, or, timed on a busy one, as dear against quiet priors.

A plain run's own steps set T(1) for the pair's next runs, the median of its passes
(`PlainSteps`).

What a run keeps is only what it measured (`measured_verify`): the median and count of
each row it verified, never a row fitted between them, so the next calibration sees
measurements, not its own interpolation.

**T(k)'s fit** (`fit`), from measured (rows, seconds) pairs, is the one fit the policy
runs on, the calibration checks its rows against, and the oracle is priced by. Two facts
make it robust on a shared machine, where other work slows passes at
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

No torch here: seconds in, seconds out.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from assisted.core.record import median
from assisted.core.settings import DrafterKind
from assisted.policy.acceptance import PRIOR_WEIGHT

# How many of the latest observations an estimate keeps: a cost's timings in the run (its
# median is taken over them and `PRIOR_WEIGHT` copies of its prior), the fewest of a plain
# run's passes whose median sets T(1), the pair's reads whose median prices the next, the
# pair's answers, and the steps the floor weighs (`assisted.policy.choice.Floor`): enough to
# ride out a few slow passes or bursts, few enough to follow a neighbour that starts or stops
# mid-run within a dozen steps.
WINDOW = 12


@dataclass
class Estimate:
    """One cost: the median of the run's latest `WINDOW` timings and `PRIOR_WEIGHT` copies of
    its prior (the module's note). A prior of None counts for nothing."""

    prior: float | None
    timings: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def observe(self, seconds: float) -> None:
        self.timings.append(seconds)

    def value(self, level: float = 1.0) -> float:
        """The figure, its prior taken at `level` (the module's note)."""
        copies = [self.prior * level] * PRIOR_WEIGHT if self.prior is not None else []
        return median([*self.timings, *copies]) or 0.0


class CostModel:
    """Seconds per step by source and γ, as the run's own steps time them."""

    def __init__(
        self,
        cap: int,
        verify_s: dict[int, float],
        drafter_s: dict[DrafterKind, float],
        model_source: DrafterKind | None = None,
        prefill_s: float = 0.0,
        draft_shape: dict[int, float] | None = None,
    ):
        """`verify_s` maps rows k to the target's seconds to verify them, for k = 1 … cap + 1;
        `drafter_s` maps each source to its seconds per drafted token; `model_source` names
        the source that runs a model with a cache of its own (it pays a call overhead, a
        prefill before its first draft and a catch-up after skipped steps), and `prefill_s`
        is that model's seconds per token of context it prefills. `draft_shape` maps γ to
        the model source's time per token in a draft of γ over its `drafter_s` (the
        module's note; None: 1 at every γ). All are the priors."""
        missing = [k for k in range(1, cap + 2) if k not in verify_s]
        if missing:
            raise ValueError(f"verification times are missing for rows {missing}")
        self.prior_verify_s = dict(verify_s)
        self.verify_timings: dict[int, deque[float]] = {}
        self.verify_counts: dict[int, int] = {}
        self.verify_s = fit({}, verify_s, self.prior_verify_s, PRIOR_WEIGHT)
        self.drafter_s = dict(drafter_s)
        self.model_source = model_source
        self.drafting = Estimate(drafter_s.get(model_source))
        self.level = 1.0  # the target's passes against the prior (`observe_verify`)
        self.prefill = Estimate(prefill_s or None)  # 0: never timed
        self.prefill_s = prefill_s
        self.draft_shape = dict(draft_shape or {})
        self.catch_up = Estimate(None)
        self.catch_up_s = 0.0
        self.call = Estimate(None)
        self.call_s = 0.0  # the model source's seconds per drafting call beyond its passes
        self.last_call_s = 0.0  # the wall time of the latest drafting call

    def cost_s(self, source: DrafterKind | None, gamma: int, catch_up: bool = False) -> float:
        """cost(γ): seconds of a step where `source` drafts `gamma` candidates, after first
        reading the tokens of the steps it skipped where `catch_up`."""
        if source is None or gamma == 0:
            return self.verify_s[1]
        cost = self.drafting_s(source, gamma) + self.verify_s[gamma + 1]
        if source == self.model_source:
            cost += self.call_s
        if catch_up:
            cost += self.catch_up_s
        return cost

    def drafting_s(self, source: DrafterKind, gamma: int) -> float:
        """Seconds `source` takes to draft `gamma` candidates (the module's note)."""
        return self.drafter_s[source] * gamma * self._shape(source, gamma)

    def _shape(self, source: DrafterKind, gamma: int) -> float:
        return self.draft_shape.get(gamma, 1.0) if source == self.model_source else 1.0

    def observe_verify(self, rows: int, seconds: float) -> None:
        """The target verified `rows` rows (last committed token + candidates) in `seconds`:
        the row's window takes it, and T(k) is fitted again (the module's note)."""
        if rows not in self.verify_s:
            return
        self.verify_timings.setdefault(rows, deque(maxlen=WINDOW)).append(seconds)
        self.verify_counts[rows] = self.verify_counts.get(rows, 0) + 1
        self.verify_s = fit(self.verify_timings, self.verify_s, self.prior_verify_s, PRIOR_WEIGHT)
        # The assistant shares the machine: its priors follow the level the target's
        # passes set, until its own timings overrule them (the module's note).
        self.level = level(self.verify_timings, self.prior_verify_s, PRIOR_WEIGHT)
        if self.model_source is not None:
            self.drafter_s[self.model_source] = self.drafting.value(self.level)
            self.prefill_s = self.prefill.value(self.level)

    def read_s(self, tokens: int) -> float:
        """Seconds the model source takes to read `tokens` tokens it has not seen."""
        return self.prefill_s * max(tokens, 0)

    def observe_call(self, seconds: float) -> None:
        """The latest drafting call of the model source took `seconds` of wall time, its
        forward passes included (they are timed apart and passed to `observe_draft`)."""
        self.last_call_s = seconds

    def observe_draft(
        self, drafted: int, seconds: float, prefilled: int | None = None, catch_up: bool = False
    ) -> float:
        """The model source drafted `drafted` (at least one) candidates in `seconds` of forward
        passes; the rest of its call's wall time is a timing of `call_s`. Where the call
        first prefilled `prefilled` tokens of context, the excess over the drafting is a
        timing of the prefill time per token; a catch-up's excess one of `catch_up_s`; any
        other draft one of the time per drafted token. Returns that excess: the seconds the
        call spent reading tokens it had not seen (0 for a draft that read none)."""
        if self.last_call_s:
            self.call.observe(max(self.last_call_s - seconds, 0.0))
            self.call_s = self.call.value()
            self.last_call_s = 0.0
        per_token = self.drafter_s[self.model_source]
        shape = self._shape(self.model_source, drafted)
        extra = max(seconds - per_token * drafted * shape, 0.0)
        if prefilled is not None:
            self.prefill.observe(extra / max(prefilled, 1))
            self.prefill_s = self.prefill.value(self.level)
            return extra
        if catch_up:
            self.catch_up.observe(extra)
            self.catch_up_s = self.catch_up.value()
            return extra
        self.drafting.observe(seconds / (drafted * shape))
        self.drafter_s[self.model_source] = self.drafting.value(self.level)
        return 0.0

    def verify_curve(self) -> list[tuple[int, float]]:
        """T(k) as (rows, seconds), rows ascending."""
        return sorted(self.verify_s.items())

    def measured_read_s(self) -> float | None:
        """The median seconds per token of the reads of context this run timed (its first
        draft's, usually one), or None where it made none: what the pair keeps as the
        prior of its next runs' first read."""
        return median(list(self.prefill.timings))

    def measured_verify(self) -> dict[int, tuple[float, int]]:
        """The rows this run verified, each with the median of its latest timings and how
        many it timed: what the pair keeps (never a fitted row: the module's note)."""
        return {
            k: (statistics.median(times), self.verify_counts[k])
            for k, times in sorted(self.verify_timings.items())
        }


class PlainSteps:
    """A plain run's timed target passes (`assisted.engine.observe`), whose median sets the pair's
    T(1) once the run's clock has stopped (the module's note)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def observe_verify(self, rows: int, seconds: float) -> None:
        """The target decoded a step in `seconds` (one row: the last committed token)."""
        if rows == 1:
            self.seconds.append(seconds)

    def t1_s(self) -> float | None:
        """T(1) as the run's passes time it: their median, once they fill a `WINDOW` (a
        stopped run's few passes, or a warm-up's, paying first calls, set nothing)."""
        return statistics.median(self.seconds) if len(self.seconds) >= WINDOW else None


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
