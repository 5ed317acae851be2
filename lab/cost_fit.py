"""Replay the `auto` policy's T(k) offline over a benchmark's recorded steps: how well would
other weights of its prior and windows (`assisted.policy.estimates`: `PRIOR_WEIGHT`, `WINDOW`)
have predicted each step's time, and how near T(1) stays to the plain steps?

The benchmark runs its `auto` runs in one process, and each run starts from the rows the
runs before it measured and kept (`assisted.engine.engine.keep_learnt`). So a real
`CostModel` is made for every assisted run in the order they ran, its prior the rows kept
so far (at first the first run's final T(k): the records keep no earlier curve), and fed
each step's time as a verification of its rows (drafted + 1), and what it measured is kept
for the next; with `--plain`, each plain run's steps set T(1) between them, as the
product's plain runs do (`assisted.engine.engine.keep_plain_steps`). For each setting it
reports:
- the error of each assisted step's prediction before its timing is fed:
  |log(time ÷ T(rows))|;
- per assisted run, the paired plain run's median step over the run's final T(1), the
  price of every plain step the oracle and the policy weigh (`assisted.analysis.oracle` prices
  plain decoding at T(1) a token), where the plain run ran before it and where after.
  Above 1, T(1) reads fast; below, slow.

A step's time is its wall time less its drafting, not the target's forward pass alone that
the product times: the step's bookkeeping and the assistant's call overhead are in it, so
the figures rank settings, and the absolute errors are a little high.

    python -m assisted.bench --out bench-out
    python -m lab.cost_fit bench-out/runs.jsonl --prior 2,4 --window 12 --plain
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from assisted.analysis import stats
from assisted.core import cost_curve
from assisted.core.record import RunRecord
from assisted.policy import estimates
from assisted.policy.estimates import CostModel, PlainSteps
from lab import recorded


@dataclass
class Run:
    """One recorded run, in the order the benchmark ran it: a plain run, with its steps'
    times (`plain_steps`), or an assisted run with its plain run's median step (`paired`)
    and whether that ran before it."""

    record: RunRecord
    plain_steps: PlainSteps | None = None
    paired: float | None = None
    plain_before: bool = False


def replay(
    runs: Sequence[Run], prior: int, window: int, plain: bool = False
) -> tuple[list[float], list[float], list[float]]:
    """The step errors and the assisted runs' plain-step-over-T(1) ratios (the module's
    note), split by whether the paired plain run ran before or after, with the prior worth
    `prior` timings and windows of `window`; where `plain`, each plain run's median step
    becomes T(1)."""
    saved = estimates.PRIOR_WEIGHT, estimates.WINDOW
    estimates.PRIOR_WEIGHT, estimates.WINDOW = prior, window
    try:
        kept: dict[int, float] = {}  # the rows measured so far, as the learnt file holds them
        cap, errors, before, after = 0, [], [], []
        for run in runs:
            assisted = run.paired is not None
            if not kept and assisted:
                h = run.record.hindsight
                cap, kept = h.cap, dict(h.verify_s)
            if not kept or not (assisted or plain):
                continue
            if not assisted:  # as `assisted.engine.engine.keep_plain_steps` does
                kept[1] = run.plain_steps.t1_s() or kept[1]
                continue
            curve = cost_curve.fit({k: [t] for k, t in kept.items()}, range(1, cap + 2))
            model = CostModel(cap, curve, {})
            for earlier, step in pairwise(run.record.steps):
                rows = step.drafted + 1
                seconds = step.t_s - earlier.t_s - (step.draft_s or 0.0)
                if rows not in model.verify_s or seconds <= 0:
                    continue
                errors.append(abs(math.log(seconds / model.verify_s[rows])))
                model.observe_verify(rows, seconds)
            ratio = run.paired / model.verify_s[1]
            (before if run.plain_before else after).append(ratio)
            kept |= {k: seconds for k, (seconds, _) in model.measured_verify().items()}
        return errors, before, after
    finally:
        estimates.PRIOR_WEIGHT, estimates.WINDOW = saved


def load(path: Path) -> list[Run]:
    """The runs of a benchmark's runs.jsonl in the order they ran: the plain runs, and the
    greedy assisted runs with their hindsight, each paired with the plain run of its prompt
    and repeat (its median step)."""
    runs = recorded.read(path)
    plain = {}
    for key, record in recorded.plain_runs(runs).items():
        steps = PlainSteps()
        for seconds in recorded.step_seconds(record):
            steps.observe_verify(1, seconds)
        plain[key] = steps
    loaded, ran = [], set()
    for run in runs:
        if run.drafter is None:
            loaded.append(Run(run.record, plain_steps=plain[run.key]))
            ran.add(run.key)
        elif run.replayable and run.key in plain and len(plain[run.key].seconds) > 1:
            paired = stats.median(plain[run.key].seconds)
            loaded.append(Run(run.record, paired=paired, plain_before=run.key in ran))
    return loaded


def fit(runs: Sequence[Run], settings: Sequence[tuple[int, int]], plain: bool) -> dict:
    """Per (prior, window) setting, the step errors' median and mean, and the plain-step-over-
    T(1) ratios' median and 10th and 90th percentiles, where the paired plain run ran
    before the assisted one and where it ran after."""
    rows = {}
    for prior, window in settings:
        errors, before, after = replay(runs, prior, window, plain)
        rows[f"prior {prior}, window {window}"] = {
            "error_median": round(stats.median(errors), 4),
            "error_mean": round(sum(errors) / len(errors), 4),
            "plain_before": _spread(before),
            "plain_after": _spread(after),
        }
    return {"runs": sum(run.paired is not None for run in runs), "plain": plain, "settings": rows}


def _spread(ratios: list[float]) -> dict | None:
    if not ratios:
        return None
    ratios = sorted(ratios)
    return {
        "median": round(stats.median(ratios), 4),
        "p10": round(ratios[int(0.1 * (len(ratios) - 1))], 4),
        "p90": round(ratios[int(0.9 * (len(ratios) - 1))], 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.cost_fit")
    parser.add_argument("runs", type=Path, help="a benchmark's runs.jsonl (--out DIR)")
    parser.add_argument(
        "--prior",
        default=f"{estimates.PRIOR_WEIGHT},4",
        help="what the prior curve is worth, in timings (a comma list)",
    )
    parser.add_argument(
        "--window",
        default=f"{estimates.WINDOW}",
        help="how many of a row's latest timings its median is taken over (a comma list)",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="let each plain run's steps set T(1), as the product's plain runs do",
    )
    args = parser.parse_args(argv)
    runs = load(args.runs)
    if not any(run.paired is not None for run in runs):
        print(f"no greedy assisted runs with their hindsight in {args.runs}", file=sys.stderr)
        return 2
    settings = [
        (int(prior), int(window))
        for prior in args.prior.split(",")
        for window in args.window.split(",")
    ]
    result = fit(runs, settings, args.plain)
    fed = "and the plain runs' " if args.plain else ""
    print(f"{result['runs']} assisted runs, their steps {fed}replayed in order")
    for name, row in result["settings"].items():
        spreads = [
            f"{when} {s['median']:.2f} ({s['p10']:.2f}–{s['p90']:.2f})"
            for when, s in (("before", row["plain_before"]), ("after", row["plain_after"]))
            if s is not None
        ]
        print(
            f"  {name}: step error {row['error_median']:.3f} median, {row['error_mean']:.3f} "
            f"mean; plain step / T(1), the plain run {', '.join(spreads)}"
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
