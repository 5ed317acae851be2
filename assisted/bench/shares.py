"""The benchmark's oracle figures: how much of the best schedule in hindsight a drafter's
runs reached (`assisted.analysis.oracle`), per prompt, per category and overall.

Two shares, both of the oracle's modelled speedup:
- **modelled** (the policy): the run's own choices priced by its costs, against the
  oracle's schedule priced the same way (`policy_share`: oracle seconds ÷ the run's);
- **measured** (the policy and the machinery around it): the measured speedup against the
  oracle's (`measured_share`).

A prompt's oracle speedup and modelled share are medians over its repeats, and its
measured share is its speedup (median tokens/s ÷ median tokens/s) over that oracle
speedup. A group's oracle speedup is the median of its prompts' (as its speedup is), with
their geometric mean beside it; its shares are geometric means over its prompts, so its
measured share is its speedup geomean over its oracle speedup geomean. The agreement
(how many drafting steps the hindsight reproduces) is pooled over runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from assisted.analysis import faults, oracle, oracle_text, stats
from assisted.core.figures import rounded
from assisted.core.record import RunRecord


def prompt_fields(
    plain: Sequence[RunRecord],
    assisted: Sequence[RunRecord],
    failures: dict[str, str],
    pooled: Sequence[RunRecord] = (),
) -> dict:
    """One prompt's oracle figures over its repeats (`plain[i]` pairs with `assisted[i]`),
    T(k) priced from the steps of `pooled` too (the prompt's other drafters' runs); a
    repeat whose oracle fails is left out, its fault kept in `failures`."""
    found = []
    for p, a in zip(plain, assisted, strict=True):
        with faults.attempted(faults.ORACLE, failures):
            found.append(oracle.report(p, a, pooled))
    found = [f for f in found if f["reason"] is None]
    if not found:
        return dict.fromkeys(
            ("oracle_speedup", "modelled_share", "oracle_agreement", "oracle_seconds")
        ) | {"oracle_agreeing": 0, "oracle_drafting": 0}
    agreeing = sum(f["agreeing_steps"] for f in found)
    drafting = sum(f["drafting_steps"] for f in found)
    return {
        "oracle_speedup": rounded(stats.median([f["speedup_modelled"] for f in found])),
        "modelled_share": rounded(stats.median([f["policy_share"] for f in found])),
        "oracle_agreement": rounded(agreeing / drafting) if drafting else None,
        "oracle_seconds": rounded(stats.median([f["seconds"] for f in found])),
        # Pooled counts, so groups can pool them in turn.
        "oracle_agreeing": agreeing,
        "oracle_drafting": drafting,
    }


def measured_share(row: dict) -> float | None:
    """A prompt's measured speedup over its oracle's."""
    if row.get("speedup") is None or not row.get("oracle_speedup"):
        return None
    return rounded(row["speedup"] / row["oracle_speedup"])


def group_fields(rows: Sequence[dict]) -> dict:
    """A group of prompt rows' oracle figures (the module's note)."""
    found = [r for r in rows if r.get("oracle_speedup")]
    oracle_geomean = stats.geometric_mean([r["oracle_speedup"] for r in found])
    measured = stats.geometric_mean([r["speedup"] for r in found if r["speedup"]])
    agreeing = sum(r.get("oracle_agreeing") or 0 for r in rows)
    drafting = sum(r.get("oracle_drafting") or 0 for r in rows)
    return {
        "oracle_speedup": rounded(stats.median([r["oracle_speedup"] for r in found])),
        "oracle_speedup_geomean": rounded(oracle_geomean),
        "modelled_share": rounded(stats.geometric_mean([r["modelled_share"] for r in found])),
        "measured_share": rounded(measured / oracle_geomean)
        if measured and oracle_geomean
        else None,
        "oracle_agreement": rounded(agreeing / drafting) if drafting else None,
        "oracle_prompts": len(found),
    }


def overall_line(overall: dict) -> str:
    """The card's line on the oracle for one drafter's `overall`."""
    if not overall.get("oracle_prompts"):
        return "  oracle: not computed (sampled, stopped, or no costs measured)"
    return (
        f"  oracle, in hindsight: {overall['oracle_speedup_geomean']:.2f}x (geomean over "
        f"{overall['oracle_prompts']} prompts, modelled from each run's costs); reached "
        f"{_percent(overall['modelled_share'])} of it modelled (the policy), "
        f"{_share(overall['measured_share'])} measured (the policy and its machinery); the "
        f"hindsight reproduced {_percent(overall['oracle_agreement'])} of drafting steps"
    )


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _share(value: float | None) -> str:
    return "–" if value is None else oracle_text.share_text(value)
