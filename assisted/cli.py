"""`python -m assisted "PROMPT"`: plain then assisted decoding of one prompt, streamed to the
terminal, then a stats table; `--json` ends stdout with one JSON line for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TextIO

from assisted.analysis import divergence, oracle, sampling, stats
from assisted.arguments import add_pair_options, add_run_options, pair_spec, run_settings
from assisted.bench.shootout import MAX_LANES
from assisted.bench.shootout import MAX_NEW_TOKENS as SHOOTOUT_TOKENS
from assisted.bench.shootout import REPEATS as SHOOTOUT_REPEATS
from assisted.core.record import RunRecord, sentence
from assisted.core.settings import (
    ASSISTANT_QUANTS,
    AUTO_CAP,
    DRAFTER_NAMES,
    LONGEST_MATCH,
    LOOKUPS,
    SCHEDULES,
    SHORTEST_MATCH,
    DraftSettings,
    ExamplesError,
    RunSettings,
    SettingsError,
    validate_prompt,
)
from assisted.models import learnt_store
from assisted.models.pairs import PairError
from assisted.models.registry import PAIRS, PairSpec

MODES = {"both": ("plain", "assisted"), "plain": ("plain",), "assisted": ("assisted",)}
# Alternating backgrounds mark each assisted step, so tokens that landed together show up.
_STEP_COLOURS = ("\033[48;5;22m", "\033[48;5;24m")
_RESET = "\033[0m"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m assisted",
        description="Run one prompt through plain decoding and assisted generation, "
        "and compare speed, acceptance and output.",
    )
    parser.add_argument("prompt", nargs="?", help="the prompt; '-' reads it from stdin")
    parser.add_argument("--list-pairs", action="store_true", help="list the named pairs and exit")
    source = add_pair_options(parser)
    source.add_argument("--drafter", choices=DRAFTER_NAMES, help="drafter kind for --target")
    run = add_run_options(parser)
    run.add_argument("--mode", choices=tuple(MODES), default="both")
    draft = parser.add_argument_group("draft (defaults: the pair's)")
    draft.add_argument(
        "--draft-length",
        type=int,
        help=f"an assistant's candidates per step (γ); under auto its cap (default {AUTO_CAP})",
    )
    draft.add_argument(
        "--schedule", choices=SCHEDULES, help="auto: γ per step from measured costs, up to the cap"
    )
    draft.add_argument(
        "--confidence-threshold", type=float, help="stop drafting below this probability; 0 = off"
    )
    draft.add_argument(
        "--cumulative-threshold",
        type=float,
        help="auto, greedy: stop drafting once the draft's product of probabilities falls "
        "below this; 0 = off",
    )
    draft.add_argument(
        "--prompt-lookup-tokens",
        type=int,
        help="prompt lookup: tokens per step; under auto on a prompt-lookup pair, the cap",
    )
    draft.add_argument(
        "--ngram-size",
        type=int,
        help="with --lookup transformers: the longest n-gram matched (the suffix lookup "
        f"matches {SHORTEST_MATCH} to {LONGEST_MATCH} tokens)",
    )
    draft.add_argument(
        "--lookup",
        choices=LOOKUPS,
        help="prompt lookup's matches: suffix (the longest, most recent in your text and the "
        "output, never the chat template) or transformers (its own search of the whole context)",
    )
    draft.add_argument(
        "--assistant-quant",
        choices=ASSISTANT_QUANTS,
        help="the assistant model's precision: int8 (weights and activations), int8-wo "
        "(int8 weights only), int4-wo (4-bit weights only, groups of 64), none (the pair's "
        "dtype), or auto (int4-wo on a bf16 CPU, int8 on an fp32 one); the target's precision "
        "never changes",
    )
    draft.add_argument(
        "--no-cuda-graphs",
        action="store_true",
        help="on CUDA, draft with eager passes instead of replaying captured graphs, for "
        "measuring (as ASSISTED_CUDA_GRAPHS=0)",
    )
    shootout = parser.add_argument_group("shoot-out")
    shootout.add_argument(
        "--shootout",
        action="store_true",
        help="race every drafter this target has on this device against one plain baseline, "
        f"greedy, and rank them (at most {MAX_LANES} lanes and {SHOOTOUT_TOKENS} new tokens)",
    )
    shootout.add_argument(
        "--repeats", type=int, default=SHOOTOUT_REPEATS, help="shoot-out rounds (default 3)"
    )
    shootout.add_argument(
        "--lanes", help="comma list of the lanes to race (default: every lane that applies)"
    )
    shootout.add_argument(
        "--steps", action="store_true", help="keep each lane's runs' per_step in the JSON"
    )
    parser.add_argument("--json", action="store_true", help="end stdout with one JSON line")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list_pairs:
        for spec in PAIRS.values():
            print(f"{spec.name:32} {spec.drafter:14} {spec.note}", file=out)
        return 0
    if args.no_cuda_graphs:
        os.environ["ASSISTED_CUDA_GRAPHS"] = "0"  # read by assisted.engine.drafters.draft_graphs
    try:
        prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
        if prompt is None:
            raise SettingsError("give a prompt (or '-' to read it from stdin)")
        validate_prompt(prompt)
        spec = pair_spec(args)
        settings = run_settings(args)
        if args.shootout:
            return _shootout(spec, prompt, settings, args, out)
        draft = _draft_settings(args, spec).validate_for(spec.drafter)
        return _compare(spec, prompt, settings, draft, args, out)
    except (PairError, SettingsError, ExamplesError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a failure inside loading or generation: one line, non-zero
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def _compare(
    spec: PairSpec,
    prompt: str,
    settings: RunSettings,
    draft: DraftSettings,
    args: argparse.Namespace,
    out: TextIO,
) -> int:
    # Imported here so `--help` and input errors answer without loading torch.
    from assisted.engine.decoding import Phase, RunDone, StepEvent, compare, report
    from assisted.models.pairs import load_pair

    pair = load_pair(spec, args.device, args.dtype, progress=_ProgressPrinter(), allow_local=True)
    stop = threading.Event()
    records: dict[str, RunRecord] = {}
    colour = out.isatty() and not args.json
    with _stop_on_first_interrupt(stop):
        for event in compare(pair, prompt, settings, draft, MODES[args.mode], stop):
            if isinstance(event, Phase):
                _print_phase(event.name, pair, out)
            elif isinstance(event, StepEvent):
                text = event.step.text
                if colour and event.mode == "assisted" and text:
                    text = f"{_STEP_COLOURS[event.index % 2]}{text}{_RESET}"
                out.write(text)
                out.flush()
            elif isinstance(event, RunDone):
                records[event.record.mode] = event.record
                out.write("\n[stopped]\n" if event.record.stopped else "\n")
    plain, assisted = records.get("plain"), records.get("assisted")
    result = report(pair, plain, assisted)
    print(format_table(result), file=out)
    if args.json:
        print(json.dumps(result, ensure_ascii=False), file=out)
    return 0


def _shootout(
    spec: PairSpec, prompt: str, settings: RunSettings, args: argparse.Namespace, out: TextIO
) -> int:
    """Every lane on `prompt` against one plain baseline: a line per timed run as it ends
    (stderr), then the ranking's card, then its JSON."""
    from assisted.bench import measuring, shootout
    from assisted.models.pairs import load_pair

    shootout.check(settings, args.repeats)  # before any model loads
    pair = load_pair(spec, args.device, args.dtype, progress=_ProgressPrinter(), allow_local=True)
    every = shootout.lanes(pair)
    chosen = every
    if args.lanes:
        names = [name.strip() for name in args.lanes.split(",") if name.strip()]
        known = {lane.name: lane for lane in every}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise SettingsError(
                f"no lane {', '.join(map(repr, unknown))} here; the lanes: {', '.join(known)}"
            )
        chosen = [known[name] for name in names]
    stop = threading.Event()
    result = None
    with _stop_on_first_interrupt(stop):
        races = shootout.shootout(pair, prompt, settings, chosen, args.repeats, stop, args.steps)
        for item in races:
            if isinstance(item, measuring.Progress) and item.run is not None:
                lane = item.run.drafter or "plain"
                rate = stats.tokens_per_s(item.run.record)
                print(f"[{item.done}/{item.total}] {lane}: {rate:.2f} tok/s", file=sys.stderr)
            elif isinstance(item, dict):
                result = item
    print(shootout.render(result), file=out)
    if args.json:
        print(json.dumps(result, ensure_ascii=False), file=out)
    return 0


def format_table(result: dict) -> str:
    """The stats as a plain-text table, one column per run."""
    rows = [
        ("new tokens", "new_tokens", "{}"),
        ("time to first token", "ttft_s", "{:.2f} s"),
        ("total time", "total_s", "{:.2f} s"),
        ("tokens/s", "tokens_per_s", "{:.2f}"),
        ("target steps", "steps", "{}"),
        ("drafted", "drafted", "{}"),
        ("accepted", "accepted", "{}"),
        ("acceptance rate", "acceptance_rate", "{:.1%}"),
        ("expected acceptance", "expected_acceptance_rate", "{:.1%}"),  # sampled runs only
        ("tokens per step", "tokens_per_step", "{:.2f}"),
    ]
    runs = [(name, result[name]) for name in ("plain", "assisted") if result.get(name)]
    precision = (result.get("assisted") or {}).get("assistant_precision")
    assistant = f", assistant in {precision}" if precision else ""
    lines = [f"\n{result['pair']} on {result['device']} ({result['dtype']}{assistant})"]
    lines.append(f"{'':22}" + "".join(f"{name:>12}" for name, _ in runs))
    for label, key, fmt in rows:
        cells = [run.get(key) for _, run in runs]
        if all(cell is None for cell in cells):
            continue
        lines.append(
            f"{label:22}" + "".join(f"{'—' if c is None else fmt.format(c):>12}" for c in cells)
        )
    if result.get("speedup") is not None:
        lines.append(f"{'speedup':22}{result['speedup']:>23.2f}x")
        if result.get("predicted_speedup") is not None:
            if result.get("prediction") == stats.POLICY:
                basis = stats.PREDICTION_NAMES[stats.POLICY]
            else:
                basis = (
                    f"α={result['alpha']:.2f}, γ={result['mean_drafted']:.1f}, "
                    f"c={result['cost_ratio']:.2f}, all from this run"
                )
            label = f"{stats.speedup_word(result.get('prediction'))} speedup"
            lines.append(f"{label:22}{result['predicted_speedup']:>23.2f}x  ({basis})")
        lines.append(f"{'output':22}{divergence.describe_comparison(result)}")
    acceptance = sampling.describe_acceptance(result.get("assisted") or {})
    if acceptance:
        lines.append(f"{'acceptance':22}{acceptance}")
    held_back = stats.describe(result.get("assisted") or {})
    if held_back:
        lines.append(f"{'policy':22}{held_back}")
    if result.get("oracle") is not None:
        lines.append(f"{'oracle':22}{oracle.describe(result['oracle'])}")
    failed = sentence(result.get("analysis_errors") or {})
    if failed:
        lines.append(f"{'analysis':22}{failed}")
    calibration = learnt_store.describe((result.get("assisted") or {}).get("calibration"))
    if calibration:
        lines.append(f"{'calibration':22}{calibration}")
    drafting = stats.describe_drafting(result.get("assisted") or {})
    if drafting:
        lines.append(f"{'drafting':22}{drafting}")
    return "\n".join(lines)


def _draft_settings(args: argparse.Namespace, spec: PairSpec) -> DraftSettings:
    draft_length = args.draft_length
    if draft_length is None and args.schedule == "auto":
        draft_length = AUTO_CAP
    overrides = {
        "num_assistant_tokens": draft_length,
        "schedule": args.schedule,
        "confidence_threshold": args.confidence_threshold,
        "cumulative_threshold": args.cumulative_threshold,
        "prompt_lookup_num_tokens": args.prompt_lookup_tokens,
        "max_matching_ngram_size": args.ngram_size,
        "assistant_quant": args.assistant_quant,
        "lookup": args.lookup,
    }
    draft = replace(spec.draft, **{k: v for k, v in overrides.items() if v is not None})
    if args.ngram_size is not None and draft.lookup != "transformers":
        # Refused rather than given a meaning: the suffix lookup's 2 to 8 tokens are the
        # match lengths its acceptance is learnt by (`assisted.policy.estimates`).
        raise SettingsError(
            f"--ngram-size applies to --lookup transformers; the {draft.lookup} lookup "
            f"matches {SHORTEST_MATCH} to {LONGEST_MATCH} tokens"
        )
    return draft


def _print_phase(name: str, pair, out: TextIO) -> None:
    if name == "warmup":
        print(f"Warming up {pair.spec.name} on {pair.device} ({pair.dtype_name})…", file=sys.stderr)
    else:
        print(f"\n── {name} ──", file=out)


class _ProgressPrinter:
    """Loading progress on stderr: a line per message, and per quarter of a long step."""

    def __init__(self) -> None:
        self.last: tuple[str, int] | None = None

    def __call__(self, message: str, fraction: float | None) -> None:
        quarter = -1 if fraction is None else int(fraction * 4)
        if (message, quarter) != self.last:
            self.last = (message, quarter)
            suffix = "" if fraction is None else f" {fraction:.0%}"
            print(f"{message}{suffix}", file=sys.stderr)


@contextmanager
def _stop_on_first_interrupt(stop: threading.Event) -> Iterator[None]:
    """First Ctrl-C stops the run after the current step (and keeps its output); a second
    one interrupts at once."""

    def handle(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\n(stopping after this step; Ctrl-C again to abort)", file=sys.stderr)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
