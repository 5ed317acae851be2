"""Where a greedy assisted run leaves the plain run's tokens, and whether rounding explains it.

Greedy assisted generation is lossless in exact arithmetic: the target keeps its own top
token at every position. In bf16 or fp16 the target computes a position's logits in a
verification pass over several rows, and the plain run in a pass over one, with other
rounding; where the target's top two tokens are nearly tied, the rounding can flip which
one wins. A real bug (a wrong cache crop, an off-by-one in the candidates, a bad mask)
flips tokens too. The runs record the target's top two tokens and their logits at every
committed position (`RunRecord.top2`), so the first divergence can be judged from numbers:

- **bound**: the most rounding can move a logit, `ROUNDING_ULPS[dtype]` units in the last
  place of the run's dtype at the divergence's magnitude (`rounding_bound`). A fixed multiple of
  the dtype's precision, not a measurement, so that no fault can widen it: a wrong mask or
  position moves every logit, and a noise measured from those same runs would grow with
  the fault and excuse it. Replaying the plain path instead would measure the rounding
  directly, but it doubles a comparison's cost and needs the model, where this judges a
  record alone (the CLI, the app, the benchmark and saved JSON all do).
- **noise**: before the divergence both runs scored the same prefix, so the gaps between
  their logits for the same token show how far rounding moves a logit on this device and
  dtype. The noise is the largest such gap, at least one unit in the last place (two
  orders of summation can differ by it even where earlier positions happened to agree),
  and never more than the bound. Within the first `MIN_MEASURED` tokens too few positions
  measured it, and the noise is the bound itself.
- **margin**: in each run, the logit of the plain run's token minus that of the assisted
  run's token at the divergence. Greedy decoding takes its best token (the lowest id among
  equal logits), so the margin is ≥ 0 in the plain run and ≤ 0 in the assisted run; a run
  that committed a token its own scores rank lower made a mistake, whatever the rounding.
- **near-tie**: both runs' top two are the same two tokens, the two tokens the runs picked;
  each run picked its own best of them; and at the divergence, where both runs scored the
  same prefix too, each of the two tokens' logits moved between the runs by no more than
  the noise. The margin can then flip by up to twice the noise: two tokens tied in one run
  can each move a unit in the last place, apart, in the other. **unexplained**: anything
  else, at any position, the first included (where verification is fused with the prompt's
  prefill, and cache and mask bugs show first); it looks like a bug and is reported with
  its figures.

No verdict only where none can be given, with the reason: sampled runs are compared in
distribution, not token for token; a run that ended first has no token to compare; a
position whose scores were not recorded, or a dtype whose precision is unknown, gives
nothing to weigh; and a tie of three or more tokens, where a token outside one run's
recorded top two has only a lower bound on its move: within the noise, that is no proof of
a bug, nor of rounding (two tokens tied in one run, a third a unit in the last place above
them in the other). Beyond the noise, even the lower bound shows a bug.

Sampled runs are two draws: each run samples its own tokens, and assisted sampling is
lossless in distribution (Leviathan et al. 2023), not token for token, so where they first
differ says nothing. What can be said is whether assisted samples follow the target's
distribution, which takes many samples of both (`python -m assisted.bench.sampling_check`); a
comparison says what such a check found, or that none was made (`describe_sampled`). No
torch here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from assisted.analysis import sampling
from assisted.core.record import RunRecord

NEAR_TIE = "near-tie"
UNEXPLAINED = "unexplained"
# The most rounding may move a logit between the runs, in units in the last place of the
# dtype at the logit's magnitude. bf16 matmuls accumulate in fp32 and round once at the
# end, so a few units is what another blocking does; in fp32 the sum itself rounds, and its
# order changes with the rows verified, so its multiple is larger. Each leaves room over the
# largest move seen between plain and assisted runs of the embedded pair, for longer runs and
# larger models (docs/lab-notes.md), while a wrong mask or position moves logits by tenths
# to whole logits: thousands of fp32 units, dozens of bf16 ones. fp16 takes bf16's multiple
# and float64 fp32's, by analogy, unmeasured.
ROUNDING_ULPS = {"bfloat16": 8, "float16": 8, "float32": 32, "float64": 32}
# Earlier positions needed before their largest gap, rather than the bound, is the noise. At
# the first positions there is too little to measure: runs that agree to the bit at token 0
# can move a logit by a few units in the last place at token 1, a near-tie under the bound.
MIN_MEASURED = 8
# A run pair's outcome, least to most worrying: the runs agree; they part at a near-tie;
# they part where no verdict can be given (sampled, stopped, unrecorded, unknown dtype);
# they part unexplained.
IDENTICAL = "identical"
NOT_JUDGED = "not judged"
OUTCOMES = (IDENTICAL, NEAR_TIE, NOT_JUDGED, UNEXPLAINED)
# Bits of mantissa after the leading one: one unit in the last place at magnitude m is
# 2 ** (floor(log2 m) - bits).
_MANTISSA_BITS = {"bfloat16": 7, "float16": 10, "float32": 23, "float64": 52}


@dataclass(frozen=True)
class Top2:
    """The target's two best tokens at one position and their logits, best first."""

    first: int
    first_logit: float
    second: int
    second_logit: float

    @classmethod
    def of(cls, row: tuple[int, float, int, float] | list | None) -> Top2 | None:
        return None if row is None else cls(int(row[0]), row[1], int(row[2]), row[3])

    def logit(self, token: int) -> float | None:
        if token == self.first:
            return self.first_logit
        if token == self.second:
            return self.second_logit
        return None

    def ids(self) -> set[int]:
        return {self.first, self.second}


def first_divergence(reference: list[int], other: list[int]) -> int | None:
    """Index of the first token where the two sequences differ; None if identical.

    A sequence that stops early (EOS, stop request) diverges where it ends.
    """
    for i, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(other) else min(len(reference), len(other))


def rounding_noise(plain: list[Top2 | None], assisted: list[Top2 | None], before: int) -> float:
    """The largest gap between the two runs' logits for the same token at the same
    position, over the positions before `before` (where both scored the same prefix)."""
    gaps = [0.0]
    for p, a in zip(plain[:before], assisted[:before], strict=False):
        if p is None or a is None:
            continue
        for token in p.ids() & a.ids():
            gaps.append(abs(p.logit(token) - a.logit(token)))
    return max(gaps)


def ulp(value: float, dtype: str) -> float:
    """One unit in the last place of `dtype` at `value`'s magnitude (0 for unknown dtypes)."""
    bits = _MANTISSA_BITS.get(dtype)
    if bits is None or value == 0 or not math.isfinite(value):
        return 0.0
    return 2.0 ** (math.floor(math.log2(abs(value))) - bits)


def rounding_bound(magnitude: float, dtype: str) -> float:
    """The most rounding can move a logit of `magnitude` in `dtype`: `ROUNDING_ULPS[dtype]`
    units in the last place (0 for unknown dtypes, and for 0)."""
    return ROUNDING_ULPS.get(dtype, 0) * ulp(magnitude, dtype)


def allowed_noise(
    plain: list[Top2 | None], assisted: list[Top2 | None], index: int, dtype: str
) -> float:
    """How far each logit may move between the runs at the divergence at `index` and still
    be rounding: the measured noise (`rounding_noise`), at least one unit in the last place
    and at most the bound; the bound itself within the first `MIN_MEASURED` tokens."""
    p, a = plain[index], assisted[index]
    magnitude = max(abs(p.first_logit), abs(a.first_logit))
    bound = rounding_bound(magnitude, dtype)
    if index < MIN_MEASURED:
        return bound
    measured = max(rounding_noise(plain, assisted, index), ulp(magnitude, dtype))
    return min(measured, bound)


def explain(plain: RunRecord, assisted: RunRecord) -> dict | None:
    """The first divergence of `assisted` from `plain`, with the evidence and a verdict;
    None where the runs are identical. Shaped for the JSON (`divergence`):
    {index, plain_token, assisted_token, plain_top2, assisted_top2, plain_margin,
    assisted_margin, noise, bound, verdict, reason}; `verdict` is None, and `reason` says why,
    for sampled runs, where one run ended first (a stop), where a position was not
    recorded, and where the dtype's precision is unknown. Token ids only:
    `decoding.report` adds their text."""
    result = unjudged(plain, assisted, None)
    if result is None:
        return None
    index = result["index"]
    plain_top2, assisted_top2 = _top2s(plain), _top2s(assisted)
    p, a = _at(plain_top2, index), _at(assisted_top2, index)
    result.update(plain_top2=_dict(p), assisted_top2=_dict(a))
    tokens = (result["plain_token"], result["assisted_token"])
    if plain.sampled or assisted.sampled:
        return result | {"reason": "sampled"}
    if None in tokens:
        return result | {"reason": "one run ended first"}
    if p is None or a is None:
        return result | {"reason": "the target's scores there were not recorded"}
    dtype = plain.dtype or ""
    if dtype not in _MANTISSA_BITS:
        return result | {"reason": f"no rounding bound for dtype {plain.dtype!r}"}
    noise = allowed_noise(plain_top2, assisted_top2, index, dtype)
    bound = rounding_bound(max(abs(p.first_logit), abs(a.first_logit)), dtype)
    plain_margin = _margin(p, *tokens)
    assisted_margin = _margin(a, *tokens)
    result.update(plain_margin=plain_margin, assisted_margin=assisted_margin)
    result.update(noise=noise, bound=bound)
    # Which two tokens each run ranked first, and which it took: rounding changes neither.
    ranked = p.ids() == a.ids() == set(tokens) and plain_margin >= 0 >= assisted_margin
    if ranked and all(abs(p.logit(token) - a.logit(token)) <= noise for token in tokens):
        return result | {"verdict": NEAR_TIE}
    if ranked or (p.first, a.first) != tokens:  # moved too far, or a run took a lower token
        return result | {"verdict": UNEXPLAINED}
    # A tie of three or more: a token outside one run's recorded top two has only an upper
    # bound there (that run's second logit), so its move has a lower bound only.
    least = {token: _least_move(p, a, token) for token in p.ids() | a.ids()}
    if any(move > noise for move in least.values()):
        return result | {"verdict": UNEXPLAINED}
    unknown = sorted(token for token in least if p.logit(token) is None or a.logit(token) is None)
    return result | {
        "reason": (
            f"a tie of three or more: token {unknown[0]} is outside a run's recorded top two, "
            f"so only a lower bound of its move is known ({least[unknown[0]]:.3g}, within "
            f"the noise {noise:.3g})"
        )
    }


def unjudged(plain: RunRecord, assisted: RunRecord, reason: str | None) -> dict | None:
    """The first divergence in `explain`'s shape, its evidence and verdict empty and
    `reason` saying why (None: not yet judged); None where the runs are identical. What
    the JSON carries where judging failed (`assisted.core.record`)."""
    plain_ids, assisted_ids = plain.token_ids, assisted.token_ids
    index = first_divergence(plain_ids, assisted_ids)
    if index is None:
        return None
    return {
        "index": index,
        "plain_token": _at(plain_ids, index),
        "assisted_token": _at(assisted_ids, index),
        "plain_top2": None,
        "assisted_top2": None,
        "plain_margin": None,
        "assisted_margin": None,
        "noise": None,
        "bound": None,
        "verdict": None,
        "reason": reason,
    }


def outcome(divergence: dict | None) -> str:
    """One of `OUTCOMES` for a divergence as `explain` gives it."""
    if divergence is None:
        return IDENTICAL
    return divergence["verdict"] or NOT_JUDGED


def worst(outcomes: list[str]) -> str:
    """The most worrying of several runs' outcomes (identical where there are none)."""
    return max(outcomes, key=OUTCOMES.index, default=IDENTICAL)


# The command that checks assisted sampling against plain sampling, on many samples.
SAMPLING_CHECK_COMMAND = "python -m assisted.bench.sampling_check"


def describe_sampled(check: dict | None) -> str:
    """What a sampled comparison can say, in a sentence: its runs are two draws, and
    whether assisted sampling follows the target's distribution was checked, in the words
    of `sampling.sentence` for `check` (that module's result), or not in this run
    (`check` None)."""
    head = (
        "two draws: plain and assisted sampling each drew their own tokens, so their texts "
        "can part anywhere and neither is wrong for it"
    )
    if check is None:
        return (
            f"{head}. Assisted sampling should follow the target's distribution: not checked "
            f"in this run: run `{SAMPLING_CHECK_COMMAND}`"
        )
    return (
        f"{head}. Whether assisted sampling follows the target's distribution: "
        f"{sampling.sentence(check)}"
    )


def describe_comparison(result: dict) -> str:
    """The outcome of a comparison (`stats.report`) in a sentence: for sampled runs what
    is known of their distributions (`describe_sampled`), else the divergence
    (`describe`)."""
    if "sampling_check" in result:
        return describe_sampled(result["sampling_check"])
    return describe(result["divergence"])


def describe(found: dict | None) -> str:
    """The divergence in a sentence, with its figures: for people (the CLI, the app)."""
    if found is None:
        return "identical: the assisted run reproduced the plain run token for token"
    if found["reason"] == "sampled":  # sampled, and no check to cite
        return describe_sampled(None)
    where = f"diverged at token {found['index']}"
    if found["verdict"] is None:
        return f"{where} ({found['reason']}): no verdict"
    plain, assisted = _name(found, "plain"), _name(found, "assisted")
    noise = (
        f"rounding moved logits by up to {found['noise']:.3g} earlier in these runs"
        if found["noise"] < found["bound"]
        else f"rounding moves a logit by at most {found['bound']:.3g} in this dtype"
    )
    if found["verdict"] == NEAR_TIE:
        return (
            f"{where}: the target's top two, {plain} and {assisted}, differ by "
            f"{found['plain_margin']:.3g} in plain and {found['assisted_margin']:.3g} in "
            f"assisted ({noise}): a near-tie that rounding flipped"
        )
    margins = (
        f"the target put {plain} ahead of {assisted} by {found['plain_margin']:.3g} in plain "
        f"and {found['assisted_margin']:.3g} in assisted"
        if found["plain_margin"] is not None and found["assisted_margin"] is not None
        else f"plain chose {plain} and assisted {assisted}, not both among the target's "
        "top two in each run"
    )
    return f"{where}: {margins}, beyond what rounding explains ({noise}). This looks like a bug"


def _name(found: dict, run: str) -> str:
    text = found.get(f"{run}_text")
    return f"token {found[f'{run}_token']}" if text is None else repr(text)


def _top2s(record: RunRecord) -> list[Top2 | None]:
    return [Top2.of(row) for row in record.top2]


def _least_move(p: Top2, a: Top2, token: int) -> float:
    """How far `token`'s logit moved between the runs at least: exactly, where both runs
    recorded it; else from its logit in one run and the other run's second logit, above
    which it cannot be there."""
    plain, assisted = p.logit(token), a.logit(token)
    if plain is not None and assisted is not None:
        return abs(plain - assisted)
    if plain is not None:
        return max(0.0, plain - a.second_logit)
    return max(0.0, assisted - p.second_logit)


def _margin(top2: Top2, plain_token: int, assisted_token: int) -> float | None:
    """The plain run's token's logit minus the assisted run's token's, where both are in
    `top2`."""
    first, second = top2.logit(plain_token), top2.logit(assisted_token)
    if first is None or second is None:
        return None
    return first - second


def _at(items: list, index: int):
    return items[index] if index < len(items) else None


def _dict(top2: Top2 | None) -> dict | None:
    return None if top2 is None else asdict(top2)
