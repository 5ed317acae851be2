"""`python -m lab.memory`: where a pair's memory goes, stage by stage (Linux).

Each stage reports the process's resident memory after it (`VmRSS`) and its peak during it
(`VmHWM`, reset before each stage through `/proc/self/clear_refs`), beside the bytes of the
weights the pair then holds (`LoadedPair.memory_bytes`). It prints a table for people, then
one line of JSON. Run it in a process of its own: what an earlier load left behind counts.

Its figures for the embedded pair in bf16 are in docs/space.md#memory."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assisted.models.registry import PairSpec

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
PROMPT = "Write a Python function that checks whether a string is a palindrome."


def resident() -> tuple[int, int]:
    """Bytes resident now and at the peak since the last `reset_peak`."""
    fields = {}
    for line in _STATUS.read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def reset_peak() -> None:
    _CLEAR_REFS.write_text("5")  # resets VmHWM to the current resident memory


def measure(
    spec: PairSpec,
    device: str,
    dtype: str,
    max_new_tokens: int,
    beside: PairSpec | None = None,
) -> list[dict]:
    """One row per stage: name, resident and peak bytes, and the weights the pair holds;
    last, with `beside`, that pair loaded beside it, and the weights both hold (a target
    they share counted once, `pairs.memory_in_use`)."""
    from assisted.core.settings import RunSettings
    from assisted.engine import decoding
    from assisted.engine.engine import encode_prompt
    from assisted.models.pairs import load_pair, memory_in_use

    rows: list[dict] = []
    holder: dict = {}

    def stage(name: str, work: Callable[[], object]) -> None:
        reset_peak()
        work()
        now, peak = resident()
        held = holder["pair"].memory_bytes() if "pair" in holder else 0
        if "beside" in holder:
            held = memory_in_use()
        rows.append({"stage": name, "resident": now, "peak": peak, "weights": held})

    stage("imports", lambda: None)
    stage("load the pair", lambda: holder.update(pair=load_pair(spec, device, dtype)))
    pair = holder["pair"]
    precision = pair.drafting_precision(spec.draft.assistant_quant)
    stage("the assistant's drafting copy", lambda: pair.drafting_assistant(precision))
    stage("warm-up and calibration", lambda: decoding.warm_up(pair, ("plain", "assisted")))
    ids = encode_prompt(pair, PROMPT)
    settings = RunSettings(max_new_tokens=max_new_tokens)
    stage(
        f"a comparison, {max_new_tokens} tokens",
        lambda: [list(decoding.run(pair, ids, mode, settings)) for mode in ("plain", "assisted")],
    )
    if beside is not None:

        def load_beside() -> None:
            holder["beside"] = load_pair(beside, device, dtype)

        stage(f"load {beside.name} beside it", load_beside)
    return rows


def render(rows: Sequence[dict]) -> str:
    gib = 2**30
    lines = [f"{'stage':40} {'resident':>10} {'peak':>10} {'weights':>10}  (GiB)"]
    for row in rows:
        lines.append(
            f"{row['stage']:40} {row['resident'] / gib:10.2f} {row['peak'] / gib:10.2f} "
            f"{row['weights'] / gib:10.2f}"
        )
    kept = rows[-1]["weights"]
    if kept:
        peak = max(row["peak"] for row in rows)
        lines.append(
            f"peak / weights kept: {peak / kept:.2f} · resident at the end / weights kept: "
            f"{rows[-1]['resident'] / kept:.2f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.memory", description=__doc__)
    parser.add_argument("--pair", default="embedded")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--beside", metavar="PAIR", help="then load this pair too (one naming the same target)"
    )
    args = parser.parse_args(argv)
    from assisted.models.pairs import get_spec

    beside = get_spec(args.beside) if args.beside else None
    rows = measure(get_spec(args.pair), args.device, args.dtype, args.max_new_tokens, beside)
    print(render(rows))
    if beside is not None:
        before, after = rows[-2], rows[-1]
        print(
            f"{beside.name} beside {args.pair}: resident "
            f"{(after['resident'] - before['resident']) / 2**30:+.2f} GiB, weights held "
            f"{(after['weights'] - before['weights']) / 2**30:+.2f} GiB"
        )
    print(json.dumps({"pair": args.pair, "beside": args.beside, "stages": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
