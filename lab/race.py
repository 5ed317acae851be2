"""`auto` against each fixed lane over the example kinds: a shoot-out on the first prompt of
each kind (`examples/KIND/`), the same lanes and rounds on each, then each lane's geometric
mean over the kinds with the range its rounds give, and `auto` over each lane.

A lane's speedup on a kind is its shoot-out's (the median run over the median plain run);
its geomean is over the kinds. The range is the rounds': in round r, the geomean over the
kinds of each kind's round-r speedup (its run over that round's plain run), and the lowest
and highest of those over the rounds. `auto` over a lane is the ratio of their geomeans,
with the range of the per-round ratios. Where `auto`'s range and a lane's overlap, this
race cannot rank them, and says so ("tied").

    python -m lab.race --repeats 5 --max-new-tokens 32 --json --out race.json

Machine-dependent: name the CPU (`/proc/cpuinfo`) beside any figure it prints.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

from assisted.core.settings import EXAMPLES_DIR, RunSettings, load_examples_folder

AUTO = "auto"
FIXED = ("γ = 8", "Transformers' defaults", "heuristic", "prompt lookup")


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summarize(results: dict[str, dict], lanes: Sequence[str]) -> dict:
    """Each lane's geomean over the kinds' shoot-outs (`results`, by kind), with its rounds'
    range, and `auto` over each other lane (the module's note)."""
    summary: dict = {"kinds": sorted(results), "lanes": {}}
    for name in lanes:
        rows = [_lane(result, name) for result in results.values()]
        rows = [row for row in rows if row and row["speedup"]]
        rounds = [geomean(r) for r in _by_round([row["speedup_rounds"] for row in rows])]
        summary["lanes"][name] = {
            "speedup_geomean": geomean([row["speedup"] for row in rows]),
            "rounds": rounds,
            "range": [min(rounds), max(rounds)] if rounds else None,
            "kinds": len(rows),
        }
    own = summary["lanes"].get(AUTO)
    for name, lane in summary["lanes"].items():
        if name == AUTO or not own or not own["speedup_geomean"] or not lane["speedup_geomean"]:
            continue
        ratios = [a / b for a, b in zip(own["rounds"], lane["rounds"], strict=False)]
        lane["auto_over"] = own["speedup_geomean"] / lane["speedup_geomean"]
        lane["auto_over_range"] = [min(ratios), max(ratios)] if ratios else None
        lane["tied"] = bool(
            own["range"]
            and lane["range"]
            and own["range"][0] <= lane["range"][1]
            and lane["range"][0] <= own["range"][1]
        )
    return summary


def render(summary: dict) -> str:
    """The summary as a card for people."""
    lines = [
        f"Over {len(summary['kinds'])} kinds ({', '.join(summary['kinds'])}): geomean "
        "speedup over plain, the rounds' range, and auto over each lane",
        f"{'lane':26}{'geomean':>9}{'rounds':>15}{'auto ÷ lane':>13}{'range':>15}",
    ]
    for name, lane in summary["lanes"].items():
        over = lane.get("auto_over")
        lines.append(
            f"{name[:25]:26}{_x(lane['speedup_geomean']):>9}{_span(lane['range']):>15}"
            f"{_x(over):>13}{_span(lane.get('auto_over_range')):>15}"
            + ("  tied" if lane.get("tied") else "")
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.race", description=__doc__)
    parser.add_argument("--pair", default="embedded")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--kinds", help="comma list of example kinds (default: all)")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    parser.add_argument(
        "--out", help="write every kind's whole shoot-out, each lane's steps too, to this JSON file"
    )
    args = parser.parse_args(argv)

    from assisted.bench import shootout
    from assisted.models.pairs import load_pair
    from assisted.models.registry import PAIRS

    pair = load_pair(PAIRS[args.pair], "auto", "auto")
    known = {lane.name: lane for lane in shootout.lanes(pair)}
    chosen = [known[name] for name in (AUTO, *FIXED) if name in known]
    wanted = set(args.kinds.split(",")) if args.kinds else None
    first: dict[str, str] = {}
    for example in load_examples_folder(EXAMPLES_DIR):
        if wanted is None or example.category in wanted:
            first.setdefault(example.category, example.prompt)
    settings = RunSettings(max_new_tokens=args.max_new_tokens)
    results = {}
    for kind, prompt in first.items():
        races = shootout.shootout(
            pair, prompt, settings, chosen, args.repeats, per_step=bool(args.out)
        )
        for item in races:
            if isinstance(item, dict):
                results[kind] = item
        print(f"{kind}: {shootout.render(results[kind])}", file=sys.stderr)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump(results, file, ensure_ascii=False)
    summary = summarize(results, [lane.name for lane in chosen])
    print(render(summary))
    if args.json:
        print(json.dumps(summary | {"per_kind": _per_kind(results)}, ensure_ascii=False))
    return 0


def _lane(result: dict, name: str) -> dict | None:
    return next((lane for lane in result["lanes"] if lane["lane"] == name), None)


def _by_round(rounds: Sequence[Sequence[float]]) -> list[list[float]]:
    """Round r's speedups across the kinds, for the rounds every kind ran."""
    most = min((len(r) for r in rounds), default=0)
    return [[r[i] for r in rounds] for i in range(most)]


def _per_kind(results: dict[str, dict]) -> dict:
    return {
        kind: {lane["lane"]: [lane["speedup"], lane["speedup_range"]] for lane in r["lanes"]}
        for kind, r in results.items()
    }


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def _span(low_high: Sequence[float] | None) -> str:
    return "—" if not low_high else f"{low_high[0]:.2f}–{low_high[1]:.2f}x"


if __name__ == "__main__":
    raise SystemExit(main())
