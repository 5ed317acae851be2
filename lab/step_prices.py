"""Each recorded step's measured time against the price the oracle put on it: where does a
benchmark's measured share fall below its modelled share?

The oracle (`assisted.analysis.oracle`) prices every step of a run from the run's own costs:
T(rows), and for an assistant step its drafting and call overhead, plus its prefill of the
context (its first draft) or a catch-up (after steps it skipped). A run's measured share
falls below its modelled share by what its steps took beyond those prices, and by how far
T(1), the price of every plain step, misprices the plain run beside it. This sums both over
a benchmark's runs.jsonl, per category and kind of step:
- plain, prompt-lookup, assistant, the assistant's first draft, the assistant after skipped
  steps: steps, measured seconds, modelled seconds and their ratio;
- the plain run's steps against the T(1) of the assisted run they are compared with.
A run's first step is left out: it holds the target's prefill of the prompt, which the
oracle takes from the plain run's first step for every schedule alike.

    python -m assisted.bench --out bench-out
    python -m lab.step_prices bench-out/runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from assisted.analysis import oracle
from assisted.core.record import RunRecord
from lab import recorded

PLAIN, LOOKUP, ASSISTANT = "plain", oracle.LOOKUP.value, oracle.ASSISTANT.value
FIRST_DRAFT, CATCH_UP = f"{ASSISTANT}, first draft", f"{ASSISTANT}, after skipped steps"
PLAIN_RUN = "plain run's steps at T(1)"
KINDS = (PLAIN, LOOKUP, ASSISTANT, FIRST_DRAFT, CATCH_UP, PLAIN_RUN)

# (steps, measured seconds, modelled seconds) per category, then kind.
Tally = dict[str, dict[str, list[float]]]


def kind(move: oracle.Move, state: oracle.Model) -> str:
    """What a step of the run was, the assistant's cache standing at `state` before it."""
    if move.source is oracle.ASSISTANT:
        if state is oracle.Model.UNSTARTED:
            return FIRST_DRAFT
        return CATCH_UP if state is oracle.Model.BEHIND else ASSISTANT
    return LOOKUP if move.source is oracle.LOOKUP else PLAIN


def priced_steps(record: RunRecord) -> list[tuple[str, float, float]]:
    """(kind, measured seconds, modelled seconds) of each step of a greedy assisted run
    with its hindsight, the first step aside (the module's note)."""
    moves, *_ = oracle.replay(record, record.hindsight)
    states = [oracle.Model.UNSTARTED]
    for move in moves[:-1]:
        states.append(oracle.after(move.source, states[-1]))
    return [
        (kind(move, state), measured, move.seconds)
        for move, state, measured in zip(
            moves[1:], states[1:], recorded.step_seconds(record), strict=True
        )
    ]


def plain_run_priced(plain: RunRecord, assisted: RunRecord) -> tuple[int, float, float]:
    """(steps, measured seconds, seconds at the assisted run's T(1)) of the plain run, its
    first step aside."""
    one_row = dict(assisted.hindsight.verify_s)[1]
    seconds = recorded.step_seconds(plain)
    return len(seconds), sum(seconds), len(seconds) * one_row


def tally(path: Path) -> Tally:
    """The sums of a benchmark's runs.jsonl (the module's note): each greedy assisted run
    with its hindsight, and the plain run of its prompt and repeat."""
    runs = recorded.read(path)
    plain = recorded.plain_runs(runs)
    sums: Tally = defaultdict(lambda: defaultdict(lambda: [0, 0.0, 0.0]))
    for run in runs:
        if not run.replayable:
            continue
        record = run.record
        rows = [(name, 1, measured, modelled) for name, measured, modelled in priced_steps(record)]
        if run.key in plain:
            rows.append((PLAIN_RUN, *plain_run_priced(plain[run.key], record)))
        for name, steps, measured, modelled in rows:
            for group in (run.category, "all"):
                totals = sums[group][name]
                totals[0] += steps
                totals[1] += measured
                totals[2] += modelled
    return sums


def report(sums: Tally) -> dict:
    """The sums as JSON: per category (and "all") and kind, steps, measured and modelled
    seconds and measured ÷ modelled."""
    return {
        category: {
            name: {
                "steps": int(steps),
                "measured_s": round(measured, 3),
                "modelled_s": round(modelled, 3),
                "ratio": round(measured / modelled, 3) if modelled else None,
            }
            for name in KINDS
            if name in kinds
            for steps, measured, modelled in [kinds[name]]
        }
        for category, kinds in sorted(sums.items())
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.step_prices")
    parser.add_argument("runs", type=Path, help="a benchmark's runs.jsonl (--out DIR)")
    args = parser.parse_args(argv)
    result = report(tally(args.runs))
    if not result:
        print(f"no greedy assisted runs with their hindsight in {args.runs}", file=sys.stderr)
        return 2
    print("measured ÷ modelled seconds (steps), per category and kind of step")
    for category, kinds in result.items():
        cells = [f"{name} {row['ratio']:.2f} ({row['steps']})" for name, row in kinds.items()]
        print(f"  {category}: " + "; ".join(cells))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
