"""`python -m assisted.bench`: plain vs assisted decoding over a prompt set.

    python -m assisted.bench [--prompts PATH ...] [--pair NAME | --target ID [--assistant ID]]
                             [--drafters assistant,prompt-lookup] [--repeats N] [--out DIR]
                             [--sampling-check [N]]
    python -m assisted.bench --report-from DIR

stdout: a card for people, then one line of JSON, the report (its shape is in
`assisted.bench.reporting`). `--out DIR` keeps the benchmark in DIR as it goes
(`assisted.bench.journal`): `meta.json` as the timed runs start, a line of `runs.jsonl` as
each ends, then `report.json` and `speedup.png`. A benchmark that fails or is interrupted
says on stderr how many runs DIR kept; `--report-from DIR` makes the card, the JSON line,
`report.json` and `speedup.png` again from DIR alone, loading no model. Progress goes to
stderr.
`--sampling-check` adds the sampling check (`assisted.bench.sampling_check`, at its defaults, N
samples per set) after the timed runs: the report's `sampling_check`, and its sentence on
the card.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from assisted.analysis.sampling import SAMPLES, CheckSettings, sentence
from assisted.arguments import add_pair_options, add_run_options, pair_spec, run_settings
from assisted.bench.journal import Journal, rebuild, write_report
from assisted.bench.measuring import REPEATS, Finished, Progress, benchmark
from assisted.bench.planning import (
    SWEEPS,
    BenchError,
    Variant,
    comma_list,
    parse_variant,
    plan_variants,
    select_examples,
)
from assisted.bench.reporting import render
from assisted.core.settings import (
    DRAFTER_NAMES,
    EXAMPLES_DIR,
    Example,
    ExamplesError,
    RunSettings,
    SettingsError,
    load_examples,
)
from assisted.models.pairs import PairError, PairSpec, load_pair


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command's options; argparse exits with its usage on a malformed one."""
    parser = argparse.ArgumentParser(
        prog="python -m assisted.bench",
        description="Plain vs assisted decoding over a prompt set: speedup and acceptance "
        "by category, predicted or fitted beside measured.",
    )
    parser.add_argument(
        "--prompts",
        action="append",
        type=Path,
        metavar="PATH",
        help=f"an examples folder (CATEGORY/NAME.txt) or a JSONL file; repeatable "
        f"(default: {EXAMPLES_DIR.name}/)",
    )
    parser.add_argument(
        "--categories",
        type=comma_list,
        metavar="NAME[,NAME...]",
        help="comma list of categories to keep",
    )
    parser.add_argument("--limit", type=int, metavar="N", help="at most N prompts per category")
    parser.add_argument(
        "--repeats", type=int, default=REPEATS, metavar="N", help="timed rounds per prompt"
    )
    add_pair_options(parser)
    parser.add_argument(
        "--drafters",
        type=comma_list,
        metavar="KIND[,KIND...]",
        help=f"comma list of drafters to compare with one plain baseline: "
        f"{', '.join(DRAFTER_NAMES)} (default: the pair's own)",
    )
    add_run_options(parser)
    _add_sweep_options(parser)
    parser.add_argument(
        "--variant",
        action="append",
        metavar="KEY=VALUE[,KEY=VALUE...]",
        help="one variant with exactly these settings, instead of the sweep's product; "
        "repeatable (e.g. --variant schedule=constant,num-assistant-tokens=2 "
        "--variant schedule=auto,num-assistant-tokens=8)",
    )
    parser.add_argument(
        "--overhead",
        action="store_true",
        help="also time streamed run() against a bare generate() on the first prompt",
    )
    _add_folder_options(parser)
    parser.add_argument(
        "--sampling-check",
        type=int,
        nargs="?",
        const=SAMPLES,
        metavar="N",
        help="after the timed runs, check that assisted sampling follows the target's "
        f"distribution on N samples per set (default {SAMPLES}; python -m "
        "assisted.bench.sampling_check has its other settings)",
    )
    args = parser.parse_args(argv)
    if args.report_from is not None:  # the kept benchmark's settings are the report's
        given = [name for name, value in vars(args).items() if value != parser.get_default(name)]
        others = ["--" + name.replace("_", "-") for name in given if name != "report_from"]
        if others:
            parser.error(f"--report-from takes no other option: drop {', '.join(others)}")
    return args


def _add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """The draft settings, each a comma list whose values the variants sweep."""
    sweep = parser.add_argument_group(
        "draft settings (default: the pair's own; a comma list sweeps the values)"
    )
    sweep.add_argument("--num-assistant-tokens", type=_list(int), metavar="N[,N...]")
    sweep.add_argument("--schedule", type=_list(str), metavar="constant|heuristic|auto")
    sweep.add_argument("--confidence-threshold", type=_list(float), metavar="T[,T...]")
    sweep.add_argument("--cumulative-threshold", type=_list(float), metavar="T[,T...]")
    sweep.add_argument("--prompt-lookup-num-tokens", type=_list(int), metavar="N[,N...]")
    sweep.add_argument("--max-matching-ngram-size", type=_list(int), metavar="N[,N...]")
    sweep.add_argument(
        "--assistant-quant",
        type=_list(str),
        metavar="auto|none|int8|int8-wo|int4-wo",
        help="the assistant model's precision (none: the pair's dtype); the target's never changes",
    )
    sweep.add_argument(
        "--lookup",
        type=_list(str),
        metavar="suffix|transformers",
        help="prompt lookup's matches (also the auto schedule's): suffix, or Transformers' own",
    )


def _add_folder_options(parser: argparse.ArgumentParser) -> None:
    """The benchmark's folder: kept as it runs (`assisted.bench.journal`), or read back."""
    folder = parser.add_mutually_exclusive_group()
    folder.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="keep each run in DIR/runs.jsonl as it ends, then write the report and chart",
    )
    folder.add_argument(
        "--report-from",
        type=Path,
        metavar="DIR",
        help="run nothing: make the report of the benchmark kept in DIR (--out DIR) again",
    )


def _list(kind: Callable[[str], object]) -> Callable[[str], list]:
    """An argparse type: a comma list of `kind` values."""

    def parse(text: str) -> list:
        try:
            return [kind(item) for item in comma_list(text)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma list, not {text!r}") from None

    parse.__name__ = kind.__name__  # argparse names the type in its error message
    return parse


def plan_bench(
    args: argparse.Namespace,
) -> tuple[PairSpec, list[Example], list[Variant], RunSettings]:
    """Check every input and build the plan; loads no model."""
    if args.repeats < 1:
        raise BenchError(f"--repeats must be at least 1, not {args.repeats}")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise BenchError(f"--out {args.out} exists and is not a folder")
    examples = []
    for source in args.prompts or [EXAMPLES_DIR]:
        if not source.exists():
            raise BenchError(f"{source}: no such file or folder")
        examples.extend(load_examples(source))
    examples = select_examples(examples, args.categories, args.limit)
    spec = pair_spec(args)
    sweeps = {field: getattr(args, field) for field in SWEEPS}
    if args.variant:
        swept = [field for field, values in sweeps.items() if values]
        if swept or args.drafters:
            flags = ["--" + field.replace("_", "-") for field in swept]
            flags += ["--drafters"] if args.drafters else []
            raise BenchError(f"--variant names each variant's settings: drop {', '.join(flags)}")
        variants = [parse_variant(spec, text, spec.drafter) for text in args.variant]
        names = [variant.name for variant in variants]
        if len(set(names)) < len(names):
            raise BenchError("--variant: two variants have the same settings")
    else:
        variants = plan_variants(spec, args.drafters or [spec.drafter], sweeps)
    return spec, examples, variants, run_settings(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, or rebuild a kept one's report; 0, or 2 after one line on stderr
    for input the run cannot take. Where a benchmark kept runs in --out DIR and ends
    without its report, stderr says where they are."""
    args = parse_args(argv)
    journal = Journal(args.out) if args.out is not None else None
    try:
        if args.report_from is not None:
            result = rebuild(args.report_from)
            write_report(args.report_from, result)
        else:
            result = _measure(args, journal)
    except (BenchError, ExamplesError, PairError, SettingsError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        _say_kept(journal)
        return 2
    except BaseException:  # an unexpected error, or Ctrl-C: its traceback, as ever
        _say_kept(journal)
        raise
    print(render(result))
    if "sampling_check" in result:
        print(f"\nSampling: {sentence(result['sampling_check'])}")
    if args.out is not None:
        print(f"\nWrote runs.jsonl, report.json and speedup.png to {args.out}")
    elif args.report_from is not None:
        print(f"\nWrote report.json and speedup.png to {args.report_from}")
    print(json.dumps(result, ensure_ascii=False))
    return 0


def _measure(args: argparse.Namespace, journal: Journal | None) -> dict:
    """The benchmark the options ask for, kept in `journal` as it goes; its report."""
    spec, examples, variants, settings = plan_bench(args)
    check = None
    if args.sampling_check is not None:  # checked before the pair loads, as the rest
        check = CheckSettings(samples=args.sampling_check).validate()
    pair = load_pair(spec, device=args.device, dtype=args.dtype)
    finished = None
    events = benchmark(
        pair,
        examples,
        variants,
        settings,
        args.repeats,
        args.overhead,
        check=check,
        journal=journal,
    )
    for event in _with_progress_bar(events):
        finished = event
    assert isinstance(finished, Finished)
    if journal is not None:
        journal.finish(finished.report)
    return finished.report


def _say_kept(journal: Journal | None) -> None:
    """On stderr, where the runs of a benchmark that ended without its report are."""
    if journal is not None and journal.kept:
        print(journal.kept_line(), file=sys.stderr)


def _with_progress_bar(events: Iterator[Progress | Finished]) -> Iterator[Progress | Finished]:
    """A tqdm bar on stderr (stdout stays the card and the JSON line). Where stderr is not a
    terminal (a log file, CI), one plain line per event instead, so long runs stay visible."""
    from tqdm import tqdm

    if not sys.stderr.isatty():
        start = time.perf_counter()
        for event in events:
            if isinstance(event, Progress):
                elapsed = time.perf_counter() - start
                line = f"[{elapsed:6.0f} s] {event.done}/{event.total} {event.label}"
                print(line, file=sys.stderr, flush=True)
            yield event
        return
    with tqdm(total=0, unit="run", file=sys.stderr) as bar:
        for event in events:
            if isinstance(event, Progress):
                bar.total = event.total
                bar.n = event.done
                bar.set_description(event.label, refresh=False)
                bar.refresh()
            yield event


if __name__ == "__main__":
    raise SystemExit(main())
