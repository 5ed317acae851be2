"""Replay the `auto` policy offline on recorded runs, against the oracle: how would another
setting of the policy have done on the same outputs, with the same costs?

A greedy run's hindsight (`assisted.engine.hindsight`) says what every choice would have bought
at every position: the assistant's agreement with the output and its confidence, the
lookup's proposal, and the run's costs. So the real `DraftPolicy` can be stepped through a
run without a model: at each position it chooses from the offers the run would have had,
the hindsight says what that choice drafts (the assistant stops after a token below the
confidence threshold, or where the product of its confidences falls below the cumulative
threshold), accepts and commits, and `assisted.analysis.oracle`'s cost model prices it.
The policy learns as it goes, from a fresh state (no acceptance history), as a first
visitor's would. Each setting's modelled time is set against the oracle's, run by run.

Each setting is also replayed with its drafts' ends moved in hindsight (`STOPS`), the
policy's choices of source and γ left to it: never ending a draft before the assistant's
first disagreement with the output, never drafting past it, or both (the draft ends right
after its first wrong token, which a rule reading the assistant's confidence must draft to
see). What those gain over the setting is what its stopping rule leaves to the oracle;
the rest of the gap is the choices.

With `--cap`, every run is replayed as if drafted under other caps (`with_cap`): the
oracle's and the policy's drafts may run longer, their extra rows priced by `--row-share`.

Modelled, not measured: it ranks settings by what the cost model prices, so a setting that
wins here is then measured with `python -m assisted.bench`.

    python -m assisted.bench --limit 1 --out bench-out     # records with their hindsight
    python -m lab.policy_fit bench-out/runs.jsonl --threshold 0,0.2,0.4,0.6 \
        --cumulative-threshold 0,0.5,0.7
    python -m lab.policy_fit bench-out/runs.jsonl --threshold 0.4 \
        --cumulative-threshold 0.7 --cap 8,12,16 --row-share 0.045
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from assisted.analysis import oracle, stats
from assisted.core.record import Hindsight, RunRecord, rounded
from assisted.core.settings import DrafterKind
from assisted.policy.choice import DraftPolicy
from lab import recorded

ASSISTANT, LOOKUP = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP


# How a replay ends the assistant's drafts: by the rule, or with its ends moved in hindsight
# (the module's note).
RULE, NO_EARLY_STOPS, NO_LATE_STOPS, IN_HINDSIGHT = (
    "rule",
    "no early stops",
    "no late stops",
    "stops in hindsight",
)
STOPS = (RULE, NO_EARLY_STOPS, NO_LATE_STOPS, IN_HINDSIGHT)


def simulate(
    record: RunRecord,
    threshold: float,
    max_new_tokens: int,
    cumulative: float = 0.0,
    stops: str = RULE,
) -> float:
    """The modelled seconds of `record`'s output under the `auto` policy with confidence
    `threshold` and cumulative threshold `cumulative` (prefill aside), stepping the real
    policy through the run's hindsight, its drafts ended as `stops` says (`STOPS`)."""
    h = record.hindsight
    output = record.token_ids
    verify = dict(h.verify_s)
    model = ASSISTANT if h.assistant_runs is not None else None
    drafter_s = {LOOKUP: 0.0} | ({ASSISTANT: h.drafting_s} if model else {})
    policy = DraftPolicy(h.cap, verify, drafter_s, model, h.prefill_s)
    policy.costs.call_s, policy.costs.catch_up_s = h.call_s, h.catch_up_s
    costs = oracle.Costs(h, record.prompt_tokens)
    i, state, seconds = 0, oracle.Model.UNSTARTED, 0.0
    while i < len(output):
        tokens_left = max_new_tokens - i
        match = h.lookup_drafts[i][: min(h.cap, tokens_left - 1)]
        offers = {LOOKUP: len(match)} | ({ASSISTANT: tokens_left - 1} if model else {})
        length = h.lookup_lengths[i] if h.lookup_lengths else 0
        choice = policy.choose(offers, tokens_left, record.prompt_tokens + i, length)
        agreed_lookup = oracle.agreement(match, output, i)
        if choice.source is ASSISTANT:
            drafted = _assistant_drafts(h, i, choice.gamma, threshold, cumulative, stops)
            accepted = min(drafted, h.assistant_runs[i])
        elif choice.source is LOOKUP:
            drafted = choice.gamma
            accepted = min(drafted, agreed_lookup)
        else:
            drafted = accepted = 0
        committed = min(accepted + 1, len(output) - i)
        step_s = costs.step_s(choice.source, drafted, state, i)
        seconds += step_s
        policy.observe(drafted, accepted)
        policy.observe_unverified(LOOKUP, len(match), agreed_lookup, committed)
        if choice.source is ASSISTANT and drafted:
            # Priced as the policy prices it: its drafts, and a first draft's read.
            read_s = policy.costs.read_s(record.prompt_tokens + i) if choice.prefill else 0.0
            policy.observe_draft(choice, drafted, h.drafting_s * drafted + read_s)
        if i:  # the first step holds the target's prefill, as in a real run
            policy.observe_step_s(step_s, committed)
        i, state = i + committed, oracle.after(choice.source, state)
    return seconds


def _assistant_drafts(
    h: Hindsight,
    position: int,
    gamma: int,
    threshold: float,
    cumulative: float = 0.0,
    stops: str = RULE,
) -> int:
    """How many of `gamma` candidates the assistant drafts at `position`: by the rule, it
    stops after a token it gives less than `threshold`, or once the product of its
    confidences so far falls below `cumulative` (`assisted.engine.drafters.static_draft`).
    Its confidence is known along the output and at its first disagreement; past that the
    draft is taken to go on.
    `stops` moves the rule's end in hindsight (the module's note)."""
    agreeing = h.assistant_runs[position]
    first_wrong = min(gamma, agreeing + 1)  # the draft's length up to its first wrong token
    known = min(first_wrong, len(h.assistant_confidence) - position)
    drafted, reach = gamma, 1.0
    for j in range(known):
        confidence = h.assistant_confidence[position + j]
        reach *= confidence
        if confidence < threshold or reach < cumulative:
            drafted = j + 1
            break
    if stops in (NO_EARLY_STOPS, IN_HINDSIGHT):
        drafted = max(drafted, first_wrong)
    if stops in (NO_LATE_STOPS, IN_HINDSIGHT):
        drafted = min(drafted, first_wrong)
    return drafted


def fit(
    records: Sequence[tuple[RunRecord, RunRecord]],
    settings: Sequence[tuple[float, float]],
    max_new_tokens: int,
) -> dict:
    """Per setting (confidence threshold, cumulative threshold), the
    geometric means over runs of the modelled speedup and of its share of the oracle's,
    and that share with the drafts' ends moved in hindsight (`STOPS`), beside the oracle's
    and the runs' own choices'."""
    rows = {}
    found = [oracle.report(p, a) for p, a in records]
    for threshold, cumulative in settings:
        shares: dict[str, list[float]] = {stops: [] for stops in STOPS}
        speedups = []
        for (_, assisted), report in zip(records, found, strict=True):
            extra = (
                report["plain_modelled_s"]
                - len(assisted.token_ids) * dict(assisted.hindsight.verify_s)[1]
            )
            for stops in STOPS:
                seconds = extra + simulate(assisted, threshold, max_new_tokens, cumulative, stops)
                shares[stops].append(report["oracle_s"] / seconds)
                if stops == RULE:
                    speedups.append(report["plain_modelled_s"] / seconds)
        name = f"threshold {threshold:.2f}, cumulative {cumulative:.2f}"
        rows[name] = {
            "speedup_modelled": rounded(stats.geometric_mean(speedups)),
            "share_of_oracle": rounded(stats.geometric_mean(shares[RULE])),
            "worst_share": rounded(min(shares[RULE])) if speedups else None,
            "share_with_stops_moved": {
                stops: rounded(stats.geometric_mean(shares[stops])) for stops in STOPS[1:]
            },
        }
    return {
        "runs": len(records),
        "oracle_speedup": rounded(stats.geometric_mean([f["speedup_modelled"] for f in found])),
        "recorded_share": rounded(stats.geometric_mean([f["policy_share"] for f in found])),
        "settings": rows,
    }


def load(path: Path) -> list[tuple[RunRecord, RunRecord]]:
    """(plain, assisted) records of each prompt and repeat in a benchmark's runs.jsonl, for
    the greedy assisted runs that have their hindsight."""
    runs = recorded.read(path)
    plain = recorded.plain_runs(runs)
    return [(plain[run.key], run.record) for run in runs if run.replayable and run.key in plain]


def with_cap(record: RunRecord, cap: int, row_share: float) -> RunRecord:
    """`record` as if drafted under another cap: its hindsight's cap set to `cap`, and T(k)
    past the rows the run timed grown by `row_share` of the last timed row per row. The
    lookup's proposals stay as recorded, up to the run's own cap, so a larger cap lets the
    assistant alone draft longer, for the oracle and the replayed policy alike."""
    h = record.hindsight
    verify = dict(h.verify_s)
    last = max(verify)
    for k in range(last + 1, cap + 2):
        verify[k] = verify[last] * (1 + row_share * (k - last))
    verify_s = tuple(sorted(verify.items()))
    return replace(record, hindsight=replace(h, cap=cap, verify_s=verify_s))


def benchmark_max_new_tokens(runs: Path) -> int | None:
    """The new-token budget of the benchmark that wrote `runs`, from the report.json beside
    it (None without one). The policy weighs the tokens left (the assistant's prefill, the
    probes), so a replay under another budget is another policy, and its share of the
    oracle is not the runs' own."""
    report = runs.parent / "report.json"
    if not report.is_file():
        return None
    return json.loads(report.read_text(encoding="utf-8"))["settings"]["max_new_tokens"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.policy_fit")
    parser.add_argument("runs", type=Path, help="a benchmark's runs.jsonl (--out DIR)")
    parser.add_argument("--threshold", default="0,0.2,0.4,0.6", help="confidence thresholds")
    parser.add_argument(
        "--cumulative-threshold",
        default="0",
        help="cumulative thresholds: floors on the product of the assistant's confidences "
        "over a draft (0: none)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        help="the benchmark's (default: its report.json's, beside the runs)",
    )
    parser.add_argument(
        "--cap",
        help="draft caps to replay instead of the runs' own (`with_cap`), e.g. 8,12,16",
    )
    parser.add_argument(
        "--row-share",
        type=float,
        help="with --cap past the runs' own: T(k) past the timed rows grows by this share "
        "of the last one per row (time them: 0.045 on a 2-core AMD EPYC in bf16)",
    )
    args = parser.parse_args(argv)
    records = load(args.runs)
    if not records:
        print(f"no greedy assisted runs with their hindsight in {args.runs}", file=sys.stderr)
        return 2
    max_new_tokens = args.max_new_tokens or benchmark_max_new_tokens(args.runs)
    if max_new_tokens is None:
        print(
            f"no report.json beside {args.runs} says how many tokens the runs could "
            "generate: give --max-new-tokens",
            file=sys.stderr,
        )
        return 2
    caps = [int(cap) for cap in args.cap.split(",")] if args.cap else []
    if any(cap > a.hindsight.cap for cap in caps for _, a in records) and args.row_share is None:
        print(
            "a cap past the runs' own needs --row-share: T(k) of rows never timed", file=sys.stderr
        )
        return 2
    settings = [
        (float(threshold), float(cumulative))
        for threshold in args.threshold.split(",")
        for cumulative in args.cumulative_threshold.split(",")
    ]
    if not caps:
        result = fit(records, settings, max_new_tokens)
        _print(result)
        print(json.dumps(result))
        return 0
    results = {}
    for cap in caps:
        capped = [(p, with_cap(a, cap, args.row_share or 0.0)) for p, a in records]
        results[cap] = fit(capped, settings, max_new_tokens)
        print(f"cap {cap}:")
        _print(results[cap])
    print(json.dumps({"caps": results}))
    return 0


def _print(result: dict) -> None:
    print(
        f"{result['runs']} runs: oracle {result['oracle_speedup']:.2f}x (geomean, modelled); "
        f"the recorded choices reached {result['recorded_share']:.0%} of it"
    )
    for setting, row in result["settings"].items():
        moved = row["share_with_stops_moved"]
        print(
            f"  {setting}: {row['speedup_modelled']:.2f}x modelled, "
            f"{row['share_of_oracle']:.0%} of the oracle (worst run {row['worst_share']:.0%}); "
            f"with the drafts' ends moved in hindsight {moved[IN_HINDSIGHT]:.0%} "
            f"(no early stops {moved[NO_EARLY_STOPS]:.0%}, "
            f"no late stops {moved[NO_LATE_STOPS]:.0%})"
        )


if __name__ == "__main__":
    raise SystemExit(main())
