"""Do two sets of samples come from one distribution? A permutation test on total variation.

Numbers in, numbers out: no models here (numpy only). The sampling check
(`assisted.bench.sampling_check`) asks it of plain and assisted samples of a prompt's first
tokens.

- **TV** (total-variation distance) between two sets of samples a and b of sizes n_a and
  n_b: ½ Σ_x |a(x)/n_a − b(x)/n_b|, over every outcome x (here: a sequence of token ids).
  It is biased upward: two sets drawn from one distribution are some distance apart, the
  further the more outcomes it spreads over and the smaller the sets. So a TV says
  nothing alone; the **bound** says how far apart such sets fall.
- **The bound**, a permutation test's. If both sets come from one distribution, the
  n_a + n_b samples are exchangeable: relabelling them at random (B times) draws from the
  TV's own distribution under that hypothesis, at these sizes and on these outcomes. The
  test flags when p = (1 + #{permuted TV ≥ TV}) / (B + 1) ≤ α, that is when the TV exceeds
  the bound, the ⌊α(B + 1)⌋-th largest permuted TV. It is exact: its **false-alarm rate**
  is at most α whatever the distribution and the sizes (below α where TV takes few values
  and ties are many). Concentration bounds were the alternative, and weaker: McDiarmid's
  (one sample moves TV by at most 1/n) bounds TV's excess over its mean by
  √(ln(1/α)/n), 0.17 at n = 100 and α = 5%, but that mean, the finite-sample bias, is
  unknown and grows with the distribution's spread; DKW needs outcomes in an order, which
  sequences of tokens lack. The permutation test needs neither and is as tight as the
  data allow.
- **Power** (`detectable_tv`): the TV from the reference distribution that the test flags
  with probability `POWER`, estimated by simulation. Both sets' empirical distributions
  stand in for the true ones, and the alternatives are their mixtures
  (1 − ε)·reference + ε·other, whose TV from the reference is ε·TV(reference, other).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

PERMUTATIONS = 1000  # relabellings that make the bound (p-values to 1/1001)
POWER = 0.8  # the detection probability `detectable_tv` reports the TV for
# Power is simulated on this many pairs of sets per mixture, each tested with this many
# relabellings: the estimated probability is within about ±0.06 (two standard errors at 0.8).
POWER_TRIALS = 200
POWER_PERMUTATIONS = 200
MIXTURE_STEPS = 20  # ε = 0.05, 0.10, … 1.0


@dataclass(frozen=True)
class Verdict:
    """A permutation test of two sets: their TV, the bound it is held against, the p-value
    and whether the test flags them as drawn from different distributions."""

    tv: float
    bound: float
    p_value: float
    flagged: bool


def tv_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """The TV between the empirical distributions of `a` and `b` (neither empty)."""
    codes, outcomes = _codes(a, b)
    return float(_tvs(codes[None, :], len(a), outcomes)[0]) / (2 * len(a) * len(b))


def permutation_test(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    alpha: float,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> Verdict:
    """Whether `a` and `b` look drawn from different distributions: their TV against the
    bound of `permutations` random relabellings (the module's note), at level `alpha`."""
    codes, outcomes = _codes(a, b)
    rng = np.random.default_rng(seed)
    return _test(codes, len(a), outcomes, alpha, permutations, rng)


def detectable_tv(
    reference: Sequence[Hashable],
    other: Sequence[Hashable],
    n: int,
    alpha: float,
    power: float = POWER,
    seed: int = 0,
) -> float | None:
    """The smallest TV from `reference`'s distribution at which the test flags `n` samples
    against `n` of the reference with probability `power` or more, among the mixtures
    (1 − ε)·reference + ε·other for ε = 0.05, 0.10, … 1 (empirical distributions taken as
    true; the module's note). None where not even `other` itself is flagged that often."""
    codes, outcomes = _codes(reference, other)
    split = len(reference)
    p = np.bincount(codes[:split], minlength=outcomes) / split
    q = np.bincount(codes[split:], minlength=outcomes) / len(other)
    full = 0.5 * float(np.abs(p - q).sum())
    rng = np.random.default_rng(seed)
    for step in range(1, MIXTURE_STEPS + 1):
        eps = step / MIXTURE_STEPS
        mixture = (1 - eps) * p + eps * q
        flagged = 0
        for _ in range(POWER_TRIALS):
            drawn = np.concatenate(
                [rng.choice(outcomes, n, p=p), rng.choice(outcomes, n, p=mixture)]
            )
            verdict = _test(drawn, n, outcomes, alpha, POWER_PERMUTATIONS, rng)
            flagged += verdict.flagged
        if flagged >= power * POWER_TRIALS:
            return eps * full
    return None


def _codes(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """`a` then `b` as one array of small integers, one per distinct outcome, and how many
    outcomes there are."""
    if not a or not b:
        raise ValueError("both sets need at least one sample")
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(x, len(index)) for x in [*a, *b]], dtype=np.int64)
    return codes, len(index)


def _tvs(rows: np.ndarray, n_a: int, outcomes: int) -> np.ndarray:
    """For each row of codes (its first `n_a` one set, the rest the other), 2·n_a·n_b·TV,
    an integer, so that ties between relabellings compare exactly."""
    count, n_b = rows.shape[0], rows.shape[1] - n_a
    offsets = (np.arange(count) * outcomes)[:, None]

    def counts(part: np.ndarray) -> np.ndarray:
        flat = (part + offsets).ravel()
        return np.bincount(flat, minlength=count * outcomes).reshape(count, outcomes)

    return np.abs(counts(rows[:, :n_a]) * n_b - counts(rows[:, n_a:]) * n_a).sum(axis=1)


def _test(
    codes: np.ndarray,
    n_a: int,
    outcomes: int,
    alpha: float,
    permutations: int,
    rng: np.random.Generator,
) -> Verdict:
    scale = 2 * n_a * (codes.size - n_a)
    observed = int(_tvs(codes[None, :], n_a, outcomes)[0])
    relabelled = rng.permuted(np.tile(codes, (permutations, 1)), axis=1)
    permuted = np.sort(_tvs(relabelled, n_a, outcomes))[::-1]
    p_value = (1 + int((permuted >= observed).sum())) / (permutations + 1)
    # The test flags when at most `allowed` permuted TVs reach the observed one, that is
    # when the observed TV exceeds the (allowed + 1)-th largest: the bound. The small
    # addition keeps α(B + 1) whole where floating point leaves it a hair below.
    allowed = math.floor(alpha * (permutations + 1) + 1e-9) - 1
    if allowed < 0:  # too few relabellings for a p-value as small as α
        return Verdict(observed / scale, math.inf, p_value, False)
    bound = int(permuted[allowed])
    return Verdict(observed / scale, bound / scale, p_value, observed > bound)
