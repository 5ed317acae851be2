"""`python -m lab.gpu_check`: what each registry pair's models cost on this device,
and what assisted generation would then gain there, modelled (the package's note).

The command: its options, its parts in order (the pairs' costs, drafting by path, the run
end to end, the runs at an imposed acceptance), and its files; the tables are written
before the runs, so that their failure loses none of them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import transformers

from assisted.core.settings import DrafterKind
from assisted.engine.drafters import draft_graphs
from assisted.models.registry import PAIRS
from lab.gpu_check import end_to_end, imposed
from lab.gpu_check.report import end_to_end_line, imposed_lines, tables, write
from lab.gpu_check.speedup import ACCEPTANCE, per_token_acceptance
from lab.gpu_check.timing import CONTEXT, Timer, bandwidth, price

KINDS = ACCEPTANCE[DrafterKind.ASSISTANT.value]  # the prompt kinds with a measured α


def processor() -> str:
    """The CPU's model name (Linux), else the platform's word for it."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "CPU"


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lab.gpu_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pairs", default=",".join(PAIRS), help="comma list of registry pairs")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--dtype", choices=["bfloat16", "float32"], help="bfloat16 on a GPU, float32 elsewhere"
    )
    parser.add_argument("--context", type=int, default=CONTEXT)
    parser.add_argument("--max-rows", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--tiny", action="store_true", help="toy widths (a CPU test)")
    parser.add_argument(
        "--end-to-end-tokens",
        type=int,
        default=64,
        help=f"new tokens of the end-to-end runs on {end_to_end.PAIR}'s shapes (0: none)",
    )
    parser.add_argument(
        "--imposed-tokens",
        type=int,
        default=64,
        help=f"new tokens of the runs at an imposed acceptance on {end_to_end.PAIR}'s shapes "
        "(0: none)",
    )
    parser.add_argument(
        "--imposed-kinds", default=",".join(KINDS), help="comma list of prompt kinds, for their α"
    )
    parser.add_argument(
        "--no-cuda-graphs", action="store_true", help="draft eagerly (ASSISTED_CUDA_GRAPHS=0)"
    )
    parser.add_argument("--out", type=Path, help="a folder for gpu_check.md and .json")
    parser.add_argument(
        "--acceptance", type=Path, help="print α by kind from a benchmark's runs.jsonl and stop"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = options()
    args = parser.parse_args(argv)
    if args.acceptance:
        print(json.dumps(per_token_acceptance(args.acceptance), indent=1))
        return
    names = [name for name in args.pairs.split(",") if name]
    kinds = [kind for kind in args.imposed_kinds.split(",") if kind]
    for what, asked, known in (("pairs", names, list(PAIRS)), ("kinds", kinds, list(KINDS))):
        unknown = [name for name in asked if name not in known]
        if unknown:
            parser.error(f"unknown {what}: {', '.join(unknown)}; known: {', '.join(known)}")
    if args.no_cuda_graphs:
        os.environ[draft_graphs.ENV] = "0"
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    started = time.monotonic()
    timer = Timer(
        device,
        dtype,
        args.context,
        args.max_rows,
        args.repeats,
        args.tiny,
        started + args.budget_s,
    )
    copy_bandwidth = bandwidth(device, 1024 if device.type == "cuda" else 64)
    results = {}
    for name in names:
        results[name] = price(PAIRS[name], timer)
        print(f"[{time.monotonic() - started:6.1f} s] {name}", file=sys.stderr, flush=True)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else processor()
    device_line = (
        f"{where}, {str(dtype).removeprefix('torch.')}, random weights"
        f"{' at toy widths' if args.tiny else ''}, context {args.context}, medians of "
        f"{args.repeats}; torch {torch.__version__}, Transformers {transformers.__version__}; "
        f"copy bandwidth {copy_bandwidth / 1e9:.0f} GB/s; {time.monotonic() - started:.0f} s"
    )
    text = tables(results, device_line, copy_bandwidth)
    print(text, flush=True)
    # Written before the runs, so that their failure loses none of the tables.
    write(args.out, text, results)
    runs(args, kinds, device, dtype, text, results, started)


def runs(
    args: argparse.Namespace,
    kinds: list[str],
    device: torch.device,
    dtype: torch.dtype,
    text: str,
    results: dict,
    started: float,
) -> None:
    """The runs after the tables: end to end, then at an imposed acceptance; the files
    written again after each, with what ran so far."""
    through = imposed_result = None
    if args.end_to_end_tokens:
        through = end_to_end.check(device, dtype, args.tiny, args.end_to_end_tokens)
        print(f"[{time.monotonic() - started:6.1f} s] end to end", file=sys.stderr, flush=True)
        line = end_to_end_line(through)
        print(f"\n{line}", flush=True)
        text = f"{text}\n\n{line}"
        write(args.out, text, results, through)
    if args.imposed_tokens and kinds:
        imposed_result = imposed.run(device, dtype, args.tiny, args.imposed_tokens, kinds)
        print(f"[{time.monotonic() - started:6.1f} s] imposed", file=sys.stderr, flush=True)
        lines = "\n".join(imposed_lines(imposed_result))
        print(f"\n{lines}")
        write(args.out, f"{text}\n\n{lines}", results, through, imposed_result)


if __name__ == "__main__":
    main()
