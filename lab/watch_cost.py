"""`python -m lab.watch_cost`: what keeping each drafted token's p and q
(`assisted.engine.observe`) costs a sampled assisted run of the embedded pair: the seconds
spent reading them per step, against the step's time, and the run's tokens/s with and
without them, alternating, after a warm-up. Greedy runs keep nothing, so only sampling is
timed.

The runs use the constant schedule, so that both ways draft the same γ at every step and
(with one seed) commit the same tokens: the `auto` schedule's choices follow the times it
measures, which differ from run to run.

Its figures for the embedded pair are in docs/app.md ("Sampling").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import nullcontext
from dataclasses import replace

from assisted.analysis import stats
from assisted.core.settings import EXAMPLES_DIR, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import drain
from assisted.engine.engine import encode_prompt
from assisted.engine.observe import DraftProbabilities, StepObserver
from assisted.models.pairs import load_pair
from assisted.models.registry import DEFAULT_PAIR, PAIRS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.watch_cost")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args(argv)
    pair = load_pair(PAIRS[DEFAULT_PAIR])
    draft = replace(pair.spec.draft, schedule="constant")
    settings = RunSettings(max_new_tokens=args.max_new_tokens, sample=True, seed=1)
    prompt = (EXAMPLES_DIR / "write-code" / "fizzbuzz.txt").read_text()
    ids = encode_prompt(pair, prompt)
    decoding.warm_up(pair, ("plain", "assisted"), draft, settings)
    read, watching = DraftProbabilities.read, StepObserver.watching_drafts
    spent_s = [0.0]  # in `read` since the last run

    def timed_read(probabilities: DraftProbabilities, draft: tuple[int, ...]):
        start = time.perf_counter()
        result = read(probabilities, draft)
        spent_s[0] += time.perf_counter() - start
        return result

    DraftProbabilities.read = timed_read
    rates: dict[str, list[float]] = {"watched": [], "unwatched": []}
    read_ms, step_ms = [], []
    outputs = set()  # the tokens of every timed run: one seed, so one output
    # One untimed round first: the first sampled assisted run pays one-off costs.
    for repeat in range(args.repeats + 1):
        for way in ("watched", "unwatched") if repeat % 2 else ("unwatched", "watched"):
            StepObserver.watching_drafts = (
                watching if way == "watched" else (lambda self: nullcontext())
            )
            events = decoding.run(pair, ids, "assisted", settings, draft)
            record = drain(events)
            read_s, spent_s[0] = spent_s[0], 0.0
            if not repeat:
                continue
            outputs.add(tuple(record.token_ids))
            rates[way].append(stats.tokens_per_s(record))
            if way == "watched":
                read_ms.append(read_s / len(record.steps) * 1000)
                step_ms.append(record.total_s / len(record.steps) * 1000)
    StepObserver.watching_drafts, DraftProbabilities.read = watching, read
    result = {
        "pair": pair.spec.name,
        "device": str(pair.device),
        "dtype": pair.dtype_name,
        "repeats": args.repeats,
        "max_new_tokens": args.max_new_tokens,
        "read_ms_per_step": round(statistics.median(read_ms), 3),
        "step_ms": round(statistics.median(step_ms), 1),
        "tokens_per_s_watched": round(statistics.median(rates["watched"]), 3),
        "tokens_per_s_unwatched": round(statistics.median(rates["unwatched"]), 3),
        "tokens_per_s_runs": {way: [round(r, 3) for r in runs] for way, runs in rates.items()},
        "same_tokens": len(outputs) == 1,
    }
    print(
        f"{result['pair']} on {result['device']} ({result['dtype']}), sampled, "
        f"{args.max_new_tokens} tokens, medians of {args.repeats} alternating runs:\n"
        f"reading p and q: {result['read_ms_per_step']:.2f} ms a step of "
        f"{result['step_ms']:.0f} ms\n"
        f"tokens/s with them {result['tokens_per_s_watched']:.2f}, without "
        f"{result['tokens_per_s_unwatched']:.2f}; "
        f"{'the same' if result['same_tokens'] else 'different'} tokens in every run"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
