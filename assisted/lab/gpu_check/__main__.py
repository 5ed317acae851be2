"""`python -m assisted.lab.gpu_check`: what each registry pair's models cost on this device,
and what assisted generation would then gain there, modelled (the package's note).

The command: its options, its parts in order (the pairs' costs, drafting by path, the run
end to end), and its files; the tables are written before the end-to-end runs, so that
their failure loses none of them.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
import transformers

from assisted.core.drafters import DrafterKind
from assisted.engine.drafters import draft_graphs
from assisted.lab.gpu_check import paths
from assisted.lab.gpu_check.architectures import ARCHITECTURES, Architecture
from assisted.lab.gpu_check.paths import GAMMA, Drafting
from assisted.lab.gpu_check.report import end_to_end_line, tables, write
from assisted.lab.gpu_check.speedup import Costs, Pricing, per_token_acceptance
from assisted.models.registry import PAIRS, PairSpec

CONTEXT = 256  # tokens in the cache before the timed pass: a prompt and some answer
WARMUP = 2  # untimed passes per row count (the kernels' first calls pick their algorithms)
TOY = {"hidden_size": 64, "intermediate_size": 128, "heads": 4, "head_dim": 16, "vocab": 512}
END_TO_END_PAIR = "qwen2.5-coder-7b"  # the Space's default GPU pair


def toy(architecture: Architecture, vocab: bool = True) -> Architecture:
    """`architecture` at toy widths, its depth and kind kept: its kernels' launches cost
    what they cost, the work in them next to nothing."""
    heads = TOY["heads"]
    kv_heads = heads if architecture.kv_heads == architecture.heads else heads // 2
    return replace(
        architecture,
        hidden_size=TOY["hidden_size"],
        intermediate_size=TOY["intermediate_size"],
        heads=heads,
        kv_heads=kv_heads,
        head_dim=TOY["head_dim"],
        vocab_size=TOY["vocab"] if vocab else architecture.vocab_size,
        extra=tuple(
            (key, TOY["head_dim"] if key == "query_pre_attn_scalar" else value)
            for key, value in architecture.extra
        ),
    )


def build(architecture: Architecture, device: torch.device, dtype: torch.dtype):
    """A model of `architecture` with random weights, made on `device`."""
    config = transformers.AutoConfig.for_model(**architecture.config())
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_rows(
    model, device: torch.device, context: int, max_rows: int, repeats: int
) -> tuple[float, ...]:
    """T(1)..T(max_rows): medians of `repeats` passes, taken in turn over the row counts,
    each over a fresh copy of one cache of `context` tokens."""
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, context + max_rows), device=device)
    with torch.inference_mode():
        cache = model(ids[:, :context], use_cache=True).past_key_values
        times: list[list[float]] = [[] for _ in range(max_rows)]
        for attempt in range(WARMUP + repeats):
            for rows in range(1, max_rows + 1):
                fresh = copy.deepcopy(cache)
                synchronize(device)
                started = time.perf_counter()
                model(ids[:, context : context + rows], past_key_values=fresh, use_cache=True)
                synchronize(device)
                if attempt >= WARMUP:
                    times[rows - 1].append(time.perf_counter() - started)
    return tuple(statistics.median(seconds) for seconds in times)


def bandwidth(device: torch.device, megabytes: int) -> float:
    """Bytes a second that a device-to-device copy moves, read and written: the median of
    five copies of `megabytes`."""
    source = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    seconds = []
    for _ in range(6):
        synchronize(device)
        started = time.perf_counter()
        target.copy_(source)
        synchronize(device)
        seconds.append(time.perf_counter() - started)
    return 2 * source.numel() / statistics.median(seconds[1:])


def free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


class Timer:
    """Each architecture's costs, measured once (pairs share models), within a budget."""

    def __init__(self, device, dtype, context, max_rows, repeats, tiny, deadline) -> None:
        self.device, self.dtype = device, dtype
        self.context, self.max_rows, self.repeats = context, max_rows, repeats
        self.tiny = tiny
        self.deadline = deadline
        self.targets: dict[Architecture, Costs] = {}
        self.drafters: dict[Architecture, float] = {}
        self.paths: dict[Architecture, Drafting] = {}

    def target(self, architecture: Architecture) -> Costs | None:
        """Its T(1)..T(max_rows) and floors; None past the deadline."""
        if architecture not in self.targets:
            if time.monotonic() > self.deadline:
                return None
            rows, read_bytes = self._timed(architecture, self.max_rows)
            floor, _ = self._timed(toy(architecture), 1, as_is=True)
            self.targets[architecture] = Costs(rows, floor[0], read_bytes)
        return self.targets[architecture]

    def one_row(self, architecture: Architecture) -> float | None:
        """Its T(1), a drafted token's pass; None past the deadline."""
        if architecture in self.targets:
            return self.targets[architecture].rows[0]
        if architecture not in self.drafters:
            if time.monotonic() > self.deadline:
                return None
            self.drafters[architecture] = self._timed(architecture, 1)[0][0]
        return self.drafters[architecture]

    def drafting(self, architecture: Architecture) -> Drafting | None:
        """Its drafting by path (`paths.time_drafting`); None past the deadline."""
        if architecture not in self.paths:
            if time.monotonic() > self.deadline:
                return None
            built = toy(architecture) if self.tiny else architecture
            model = build(built, self.device, self.dtype)
            self.paths[architecture] = paths.time_drafting(
                model, self.device, self.context, GAMMA, self.repeats
            )
            del model
            free(self.device)
        return self.paths[architecture]

    def _timed(
        self, architecture: Architecture, rows: int, as_is: bool = False
    ) -> tuple[tuple[float, ...], int]:
        """`time_rows` of a model built of `architecture` (at toy widths under `tiny`,
        unless `as_is`), and the bytes of weights a pass reads; its memory handed back."""
        built = toy(architecture) if self.tiny and not as_is else architecture
        model = build(built, self.device, self.dtype)
        read_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        if not built.tie:
            embedding = model.get_input_embeddings().weight
            read_bytes -= embedding.numel() * embedding.element_size()
        timed = time_rows(model, self.device, self.context, rows, self.repeats)
        del model
        free(self.device)
        return timed, read_bytes


def price(spec: PairSpec, timer: Timer) -> Pricing | None:
    """The pair's costs, or None where the budget ran out before its models."""
    target = timer.target(ARCHITECTURES[spec.target])
    if target is None:
        return None
    if spec.drafter is DrafterKind.PROMPT_LOOKUP:
        return Pricing(target, 0.0)
    if spec.drafter is DrafterKind.EARLY_EXIT:
        first = replace(ARCHITECTURES[spec.target], layers=spec.early_exit_layer or 1)
        return Pricing(target, timer.one_row(first))
    assistant = ARCHITECTURES[spec.assistant]
    return Pricing(target, timer.one_row(assistant), timer.drafting(assistant))


def end_to_end(device: torch.device, dtype: torch.dtype, tiny: bool, tokens: int) -> dict:
    """`paths.end_to_end` on `END_TO_END_PAIR`'s shapes (toy widths under `tiny`)."""
    spec = PAIRS[END_TO_END_PAIR]
    built = []
    for ref in (spec.target, spec.assistant):
        architecture = ARCHITECTURES[ref]
        built.append(build(toy(architecture) if tiny else architecture, device, dtype))
    try:
        return paths.end_to_end(spec, *built, device, dtype, tokens)
    finally:
        del built
        free(device)


def processor() -> str:
    """The CPU's model name (Linux), else the platform's word for it."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "CPU"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        help=f"new tokens of the end-to-end runs on {END_TO_END_PAIR}'s shapes (0: none)",
    )
    parser.add_argument(
        "--no-cuda-graphs", action="store_true", help="draft eagerly (ASSISTED_CUDA_GRAPHS=0)"
    )
    parser.add_argument("--out", type=Path, help="a folder for gpu_check.md and .json")
    parser.add_argument(
        "--acceptance", type=Path, help="print α by kind from a benchmark's runs.jsonl and stop"
    )
    args = parser.parse_args(argv)
    if args.acceptance:
        print(json.dumps(per_token_acceptance(args.acceptance), indent=1))
        return
    names = [name for name in args.pairs.split(",") if name]
    unknown = [name for name in names if name not in PAIRS]
    if unknown:
        parser.error(f"unknown pairs: {', '.join(unknown)}; known: {', '.join(PAIRS)}")
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
    # Written before the end-to-end runs, so that their failure loses none of the tables.
    write(args.out, text, results)
    if args.end_to_end_tokens:
        through = end_to_end(device, dtype, args.tiny, args.end_to_end_tokens)
        print(f"[{time.monotonic() - started:6.1f} s] end to end", file=sys.stderr, flush=True)
        line = end_to_end_line(through)
        print(f"\n{line}")
        write(args.out, f"{text}\n\n{line}", results, through)


if __name__ == "__main__":
    main()
