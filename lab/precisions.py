"""`python -m lab.precisions`: the assistant's precisions compared on one pair.

    python -m lab.precisions [--precisions none,int8,int4-wo] [--prompts PATH ...]
                                        [--limit N] [--repeats N] [--passes N] [--out DIR]
                                        [--schedule constant|heuristic|auto]

Method, for each precision (`assisted.models.quantize`; "none" is the pair's dtype):
- its weights, in MB: all that the copy holds, and its linear layers' alone, which are
  what one drafted token reads (the embedding reads one row);
- its drafting cost alone: one-row forward passes on a cache holding the first prompt, the
  median of `--passes` timed passes after one untimed pass, the precisions taking turns
  pass by pass (rotated each round) so that drift of the machine falls on all alike;
- greedy assisted runs with the pair's own draft settings (or `--schedule`) on every
  prompt (default: `examples/`, one per kind), timed by the benchmark
  (`assisted.bench.measuring`): one plain baseline for all, its order flipped each round,
  medians of `--repeats`. Hence the acceptance rate (of the assistant's drafts, and of
  all, prompt-lookup matches included under `auto`), tokens/s, the geometric-mean speedup,
  the worst prompt, whether every run's output was the plain run's, and the drafting cost
  inside the runs (the median of the assistant's timed forward passes).

stdout: the machine first (the CPU's kind, its model, the instruction set torch uses),
then, last, a markdown table. Progress goes to stderr. `--out DIR` writes
`precisions.json` (every figure here, and the benchmark's report) beside the benchmark's
own `runs.jsonl`, `report.json` and `speedup.png`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from assisted.arguments import add_pair_options, add_run_options, pair_spec, run_settings
from assisted.bench.journal import write_out
from assisted.bench.measuring import REPEATS, Finished, Progress, benchmark
from assisted.bench.planning import BenchError, Variant, comma_list, plan_variants, select_examples
from assisted.bench.reporting import Run
from assisted.core.settings import (
    EXAMPLES_DIR,
    SCHEDULES,
    ExamplesError,
    SettingsError,
    load_examples,
)
from assisted.engine.engine import encode_prompt
from assisted.engine.observe import synchronize
from assisted.models import learnt_store, quantize
from assisted.models.pairs import LoadedPair, PairError, load_pair
from assisted.models.quantize import Int4WeightOnlyLinear

PRECISIONS = "none,int8,int4-wo"
PASSES = 50  # timed one-row passes per precision: a median of 50 shrugs off a few slow ones
MAX_NEW_TOKENS = 64  # the length the project's other precision tables used
# The widest matrix instructions a CPU's flags can list, widest first.
_CPU_KINDS = (
    ("amx_bf16", "AMX-BF16"),
    ("avx512_bf16", "AVX512-BF16"),
    ("avx512f", "AVX512"),
    ("avx2", "AVX2"),
)
# Layers that a drafted token reads whole, as the copies hold them.
_LINEAR_KINDS = (
    nn.Linear,
    torch.ao.nn.quantized.dynamic.Linear,
    quantize.RowSplitLinear,
    quantize.Int8WeightOnlyLinear,
    Int4WeightOnlyLinear,
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lab.precisions",
        description="The assistant's precisions compared: weights, drafting cost, "
        "acceptance and speedup against one plain baseline.",
    )
    parser.add_argument(
        "--precisions",
        type=comma_list,
        default=comma_list(PRECISIONS),
        metavar="Q[,Q...]",
        help=f"assistant precisions to compare (default {PRECISIONS})",
    )
    parser.add_argument(
        "--prompts",
        action="append",
        type=Path,
        metavar="PATH",
        help=f"an examples folder or a JSONL file; repeatable (default: {EXAMPLES_DIR.name}/)",
    )
    parser.add_argument("--categories", type=comma_list, metavar="NAME[,NAME...]")
    parser.add_argument(
        "--limit", type=int, default=1, metavar="N", help="prompts per category (default 1)"
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, metavar="N")
    parser.add_argument(
        "--passes", type=int, default=PASSES, metavar="N", help="timed drafting passes"
    )
    parser.add_argument(
        "--schedule",
        choices=SCHEDULES,
        help="the draft schedule (default: the pair's own; under auto some steps draft from "
        "prompt lookup, and a cheaper assistant is chosen more often)",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="write precisions.json there")
    add_pair_options(parser)
    add_run_options(parser)
    parser.set_defaults(max_new_tokens=MAX_NEW_TOKENS)
    return parser.parse_args(argv)


def cpu_kind() -> str:
    """The CPU's widest matrix instructions by its flags (/proc/cpuinfo), then its model,
    the instruction set torch uses and its threads: under an imitated AVX2 machine
    (`ATEN_CPU_CAPABILITY=avx2`) the flags and torch's set differ."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as info:
            line = next((line for line in info if line.startswith("flags")), "")
            flags = set(line.partition(":")[2].split())
    except OSError:
        pass
    kind = next((name for flag, name in _CPU_KINDS if flag in flags), "no AVX2 listed")
    return f"{kind}; {learnt_store.machine(torch.device('cpu'))}"


def linear_bytes(model: nn.Module) -> int:
    """Bytes of `model`'s linear layers' weights that a drafted token reads (a split layer
    counted once, whole; an int4 layer's copy for reading many rows not at all)."""
    total, counted = 0, []
    for name, module in model.named_modules():
        if isinstance(module, _LINEAR_KINDS) and not any(name.startswith(c) for c in counted):
            total += quantize.weights_bytes(module)
            if isinstance(module, Int4WeightOnlyLinear) and module.many_rows is not None:
                total -= quantize.weights_bytes(module.many_rows)
            counted.append(f"{name}.")
    return total


def time_drafting(
    models: dict[str, nn.Module], prefix: torch.Tensor, passes: int, device: torch.device
) -> dict[str, list[float]]:
    """Seconds of each model's one-row forward passes on a cache holding `prefix` (one
    untimed pass first), the models taking turns pass by pass, rotated each round."""
    names = list(models)
    caches, seconds = {}, {name: [] for name in names}
    with torch.inference_mode():
        for name, model in models.items():
            caches[name] = model(input_ids=prefix, use_cache=True).past_key_values
        row = prefix[:, -1:]  # the ids do not change the time
        for round_ in range(passes + 1):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                synchronize(device)
                start = time.perf_counter()
                models[name](input_ids=row, past_key_values=caches[name], use_cache=True)
                synchronize(device)
                if round_:  # the first pass after the prefill pays one-off costs
                    seconds[name].append(time.perf_counter() - start)
                caches[name].crop(-1)  # 5.23: a negative count removes that many tokens
    return seconds


def measure(args: argparse.Namespace) -> tuple[dict, list[Run]]:
    """Everything the table shows, with the benchmark's report; and the benchmark's timed
    runs. Loads the pair."""
    if args.repeats < 1 or args.passes < 1:
        raise BenchError("--repeats and --passes must be at least 1")
    if args.sample:  # sampled outputs differ from plain ones by chance, not by precision
        raise BenchError("the precisions are compared under greedy decoding: drop --sample")
    examples = []
    for source in args.prompts or [EXAMPLES_DIR]:
        examples.extend(load_examples(source))
    examples = select_examples(examples, args.categories, args.limit)
    spec, settings = pair_spec(args), run_settings(args)
    sweeps = {
        "assistant_quant": args.precisions,
        "schedule": [args.schedule or spec.draft.schedule],
    }
    variants = plan_variants(spec, [spec.drafter], sweeps)
    pair = load_pair(spec, device=args.device, dtype=args.dtype)
    resolved = {v.name: pair.drafting_precision(v.draft.assistant_quant) for v in variants}
    # The assistant as loaded first, where it is asked for: kept from then on, it is not
    # consumed by the copies and loaded again (`LoadedPair.drafting_assistant`).
    models = {
        precision: pair.drafting_assistant(precision)
        for precision in sorted(dict.fromkeys(resolved.values()), key=lambda p: p != "none")
    }
    ids = encode_prompt(pair, examples[0].prompt, settings.chat_template)
    prefix = torch.tensor([ids], device=pair.device)
    drafting_s = time_drafting(models, prefix, args.passes, pair.device)

    finished = None
    for event in benchmark(pair, examples, variants, settings, args.repeats):
        if isinstance(event, Progress):
            print(f"{event.done}/{event.total} {event.label}", file=sys.stderr, flush=True)
        finished = event
    assert isinstance(finished, Finished)
    report = finished.report
    rows = [_row(v, resolved[v.name], pair, models, drafting_s, finished) for v in variants]
    plain = report["drafters"][variants[0].name]["overall"]["plain_tokens_per_s"]
    result = {
        "machine": cpu_kind(),
        "pair": spec.name,
        "dtype": pair.dtype_name,
        "prompts": len(examples),
        "drafting_prompt": {"question_id": examples[0].question_id, "tokens": len(ids)},
        "passes": args.passes,
        "plain_tokens_per_s": plain,
        "precisions": rows,
        "report": report,
    }
    return result, finished.runs


def _row(
    variant: Variant,
    precision: str,
    pair: LoadedPair,
    models: dict[str, nn.Module],
    drafting_s: dict[str, list[float]],
    finished: Finished,
) -> dict:
    """One precision's figures (`measure`)."""
    overall = finished.report["drafters"][variant.name]["overall"]
    prompts = [row for row in finished.report["prompts"] if row["drafter"] == variant.name]
    mine = [run.record for run in finished.runs if run.drafter == variant.name]
    in_runs = [seconds for record in mine for seconds in record.draft_forward_s]
    # Under `auto` some steps draft from a prompt-lookup match: the assistant's are these.
    steps = [step for record in mine for step in record.steps if step.source == variant.drafter]
    drafted, accepted = sum(s.drafted for s in steps), sum(s.accepted for s in steps)
    speedups = [row["speedup"] for row in prompts if row["speedup"] is not None]
    return {
        "precision": variant.draft.assistant_quant,
        "computes_in": pair.dtype_name if precision == "none" else precision,
        "weights_bytes": quantize.weights_bytes(models[precision]),
        "linear_bytes": linear_bytes(models[precision]),
        "drafting_ms_per_token": 1e3 * statistics.median(drafting_s[precision]),
        "drafting_ms_per_token_in_runs": 1e3 * statistics.median(in_runs) if in_runs else None,
        "assistant_acceptance_rate": accepted / drafted if drafted else None,
        "assistant_drafted": drafted,
        "acceptance_rate": overall["acceptance_rate"],
        "assisted_tokens_per_s": overall["assisted_tokens_per_s"],
        "speedup_geomean": overall["speedup_geomean"],
        "worst_speedup": min(speedups, default=None),
        "identical_prompts": overall["identical_prompts"],
        "prompts": overall["prompts"],
    }


def render(result: dict) -> str:
    """The markdown table: the plain baseline, then one row per precision."""
    lines = [
        "| precision | weights MB (linear) | drafting ms/token (in runs) | acceptance: "
        "assistant (all) | tokens/s | speedup geomean (worst) | identical to plain |",
        "|---|---|---|---|---|---|---|",
        f"| plain (the target alone) | | | | {_fmt(result['plain_tokens_per_s'], '{:.2f}')} "
        "| 1.00x | |",
    ]
    for row in result["precisions"]:
        name = row["precision"]
        if row["computes_in"] != name:
            name += f" ({row['computes_in']})"
        lines.append(
            f"| {name} | {row['weights_bytes'] / 1e6:.0f} ({row['linear_bytes'] / 1e6:.0f}) "
            f"| {row['drafting_ms_per_token']:.1f} "
            f"({_fmt(row['drafting_ms_per_token_in_runs'], '{:.1f}')}) "
            f"| {_fmt(row['assistant_acceptance_rate'], '{:.0%}')} "
            f"({_fmt(row['acceptance_rate'], '{:.0%}')}) "
            f"| {_fmt(row['assisted_tokens_per_s'], '{:.2f}')} "
            f"| {_fmt(row['speedup_geomean'], '{:.2f}x')} "
            f"({_fmt(row['worst_speedup'], '{:.2f}x')}) "
            f"| {row['identical_prompts']}/{row['prompts']} |"
        )
    return "\n".join(lines)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else spec.format(value)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print; 0, or 2 after one line on stderr for input the run cannot take."""
    args = parse_args(argv)
    print(f"machine: {cpu_kind()}", flush=True)
    try:
        result, runs = measure(args)
        if args.out is not None:
            write_out(args.out, result["report"], runs)
            text = json.dumps(result, ensure_ascii=False, indent=1)
            (args.out / "precisions.json").write_text(text + "\n")
    except (BenchError, ExamplesError, PairError, SettingsError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = result["report"]["settings"]
    drafting = result["drafting_prompt"]
    print(
        f"\n{result['pair']} in {result['dtype']}: {_count(result['prompts'], 'prompt')}, "
        f"{settings['max_new_tokens']} new tokens, {_count(settings['repeats'], 'repeat')}; "
        f"drafting timed over {result['passes']} passes after {drafting['question_id']} "
        f"({drafting['tokens']} tokens)\n"
    )
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
