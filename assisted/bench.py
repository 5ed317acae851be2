"""Benchmark: speedup and acceptance by prompt kind, theory beside measurement.

    python -m assisted.bench [--prompts PATH ...] [--pair NAME | --target ID [--assistant ID]]
                             [--drafters assistant,prompt-lookup] [--repeats N] [--out DIR]

Method, per prompt: a short untimed warm-up of the prompt in every mode, then `--repeats`
rounds of one plain run and one assisted run per drafter. The order flips from round to
round and from prompt to prompt (plain first, then the drafters; next time the reverse), so
slow drift of the machine (heat, other load) falls on both sides alike. Every drafter is
compared with the same plain baseline.

Figures (terms as defined in `assisted.stats`):
- a prompt's **speedup** = median assisted tokens/s ÷ median plain tokens/s over the
  repeats (a tokens/s ratio, so runs of different lengths still compare);
- its **acceptance rate** and **tokens per step** pool all its assisted runs (Σ/Σ);
- its **predicted speedup** is the median over repeats of the Leviathan et al. model fed
  with that repeat's measured acceptance, draft length and cost ratio;
- **identical** means every assisted run produced exactly the plain run's tokens.
- A category's speedup is the median of its prompts' speedups (geometric mean beside it);
  its acceptance rate and tokens per step pool the steps of all its runs; its predicted
  speedup is the median of its prompts'. "overall" does the same over all prompts, and its
  headline figure is the geometric mean of the per-prompt speedups.

stdout: a card for people, then one line of JSON:
    {"pair", "device", "dtype", "settings", "drafter",
     "overall": {"speedup_geomean", "speedup_median", "acceptance_rate", "tokens_per_step",
                 "predicted_speedup", "prompts", "identical_prompts", "overhead_pct",
                 "assisted_overhead_pct"},
     "categories": {NAME: {"speedup", "speedup_geomean", "acceptance_rate", ...}},
     "prompts": [{"question_id", "category", "drafter", "speedup", "plain_tokens_per_s",
                  "assisted_tokens_per_s", "acceptance_rate", "identical", ...}],
     "drafters": {DRAFTER: {"drafter_kind", "draft", "overall", "categories"}}}
"overall" and "categories" describe the first drafter; "drafters" holds every drafter's;
"prompts" holds a row per prompt and drafter. `--out DIR` also writes `runs.jsonl` (one
line per timed run), `report.json` and `speedup.png`, only once everything has succeeded.

The app calls `benchmark()` (a generator of Progress events ending with Finished) on a
loaded pair, then `render()` and `draw_chart()` on the report.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from assisted import stats
from assisted.arguments import add_pair_options, add_run_options, pair_spec, run_settings
from assisted.drafters import DRAFTER_NAMES, DrafterKind
from assisted.examples import EXAMPLES_DIR, Example, ExamplesError
from assisted.examples import load as load_examples
from assisted.pairs import (
    LoadedPair,
    PairError,
    PairSpec,
    load_pair,
)
from assisted.record import RunRecord
from assisted.settings import (
    WARMUP_TOKENS,
    DraftSettings,
    RunSettings,
    SettingsError,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REPEATS = 3  # rounds per prompt; medians need at least three to shrug off one outlier
EARLY_EXIT_LAYER = 4  # draft layer for early exit when the pair names none (LayerSkip's)

# Draft settings a comma list can sweep, and their short names in variant names.
SWEEPS = {
    "num_assistant_tokens": "n",
    "schedule": "schedule",
    "confidence_threshold": "ct",
    "prompt_lookup_num_tokens": "n",
    "max_matching_ngram_size": "ngram",
    "assistant_quant": "quant",
}
_MODEL_FIELDS = ("num_assistant_tokens", "schedule", "confidence_threshold")
_LOOKUP_FIELDS = ("prompt_lookup_num_tokens", "max_matching_ngram_size")


def _fields(kind: DrafterKind) -> tuple[str, ...]:
    """The draft settings that mean something for a drafter kind."""
    if kind is DrafterKind.PROMPT_LOOKUP:
        return _LOOKUP_FIELDS
    if kind.has_model:  # a model of its own, with its own precision
        return (*_MODEL_FIELDS, "assistant_quant")
    return _MODEL_FIELDS


class BenchError(ValueError):
    """The benchmark cannot run as asked; the message says why."""


@dataclass(frozen=True)
class Variant:
    """One drafting strategy compared against the plain baseline."""

    name: str
    drafter: DrafterKind
    draft: DraftSettings


@dataclass(frozen=True)
class Run:
    """One timed run; `drafter` is the variant's name, None for the plain baseline."""

    question_id: str
    category: str
    drafter: str | None
    repeat: int
    record: RunRecord

    def to_dict(self) -> dict:
        return {
            "question_id": self.question_id,
            "category": self.category,
            "drafter": self.drafter,
            "repeat": self.repeat,
            "record": self.record.to_dict(),
        }


@dataclass(frozen=True)
class Progress:
    """`done` of `total` timed runs; `label` names the run just finished or the warm-up
    starting, and `record` is the run just finished (None for a warm-up or an overhead
    measurement)."""

    done: int
    total: int
    label: str
    record: RunRecord | None = None


@dataclass(frozen=True)
class Finished:
    report: dict
    runs: list[Run]


# -- planning: everything checked before a model loads ---------------------------------------


def select_examples(
    examples: Sequence[Example], categories: Sequence[str] | None = None, limit: int | None = None
) -> list[Example]:
    """Keep `categories` (all when None), then the first `limit` prompts of each category."""
    if limit is not None and limit < 1:
        raise BenchError(f"--limit must be at least 1, not {limit}")
    known = list(dict.fromkeys(e.category for e in examples))
    if categories:
        missing = [c for c in categories if c not in known]
        if missing:
            raise BenchError(
                f"no prompts in categor{'ies' if len(missing) > 1 else 'y'} "
                f"{', '.join(missing)}; the prompts have: {', '.join(known)}"
            )
        examples = [e for e in examples if e.category in categories]
    taken: dict[str, int] = {}
    selected = []
    for example in examples:
        taken[example.category] = taken.get(example.category, 0) + 1
        if limit is None or taken[example.category] <= limit:
            selected.append(example)
    return selected


def plan_variants(
    spec: PairSpec, drafters: Sequence[str], sweeps: dict[str, list] | None = None
) -> list[Variant]:
    """The variants to compare: each drafter kind × each combination of its swept settings.

    A variant is named by its kind, plus the settings that vary between variants of that kind
    ("assistant n=3", "assistant n=8"). Settings not swept keep the pair's own values.
    """
    sweeps = {k: v for k, v in (sweeps or {}).items() if v}
    kinds = [check_drafter(spec, kind) for kind in dict.fromkeys(drafters)]
    for field in sweeps:
        if not any(field in _fields(kind) for kind in kinds):
            flag = "--" + field.replace("_", "-")
            raise BenchError(f"{flag} does not apply to the drafters here: {', '.join(kinds)}")
    variants = []
    for kind in kinds:
        axes = [(f, sweeps.get(f, [getattr(spec.draft, f)])) for f in _fields(kind)]
        for values in itertools.product(*(vals for _, vals in axes)):
            changes = {f: v for (f, _), v in zip(axes, values, strict=True)}
            draft = dataclasses.replace(spec.draft, **changes)
            try:
                draft.validate_for(kind)
            except SettingsError as error:
                raise BenchError(f"{kind}: {error}") from None
            label = " ".join(
                f"{SWEEPS[f]}={v}"
                for (f, vals), v in zip(axes, values, strict=True)
                if len(vals) > 1
            )
            variants.append(Variant(f"{kind} {label}".strip(), kind, draft))
    return variants


def parse_variant(spec: PairSpec, text: str, default_drafter: str) -> Variant:
    """One variant from "KEY=VALUE,..." (keys: `drafter` and the sweepable settings, with
    dashes or underscores: "schedule=constant,num-assistant-tokens=2"). Settings not given
    keep the pair's own values; the variant is named by the ones given."""
    changes: dict = {}
    kind = default_drafter
    for item in _names(text):
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not value.strip():
            raise BenchError(f"--variant {text!r}: expected KEY=VALUE, not {item!r}")
        if key == "drafter":
            kind = value.strip()
            continue
        if key not in SWEEPS:
            keys = ", ".join(["drafter", *(k.replace("_", "-") for k in SWEEPS)])
            raise BenchError(f"--variant {text!r}: unknown setting {key!r} (one of {keys})")
        kind_of = type(getattr(spec.draft, key))
        try:
            changes[key] = kind_of(value.strip())
        except ValueError:
            what = "a whole number" if kind_of is int else "a number"
            raise BenchError(f"--variant {text!r}: {key} must be {what}") from None
    kind = check_drafter(spec, kind)
    unused = [key for key in changes if key not in _fields(kind)]
    if unused:
        raise BenchError(f"--variant {text!r}: {', '.join(unused)} does not apply to {kind}")
    draft = dataclasses.replace(spec.draft, **changes)
    try:
        draft.validate_for(kind)
    except SettingsError as error:
        raise BenchError(f"{kind}: {error}") from None
    label = " ".join(f"{SWEEPS[key]}={value}" for key, value in changes.items())
    return Variant(f"{kind} {label}".strip(), kind, draft)


def check_drafter(spec: PairSpec, name: str) -> DrafterKind:
    """The drafter kind called `name`, if the pair can draft with it. Prompt lookup and
    early exit need only the target; model drafters need the pair's assistant, and an
    assistant with its own tokenizer only drafts as the universal kind."""
    try:
        kind = DrafterKind.parse(name)
    except ValueError as error:
        raise BenchError(str(error)) from None
    if kind == spec.drafter or not kind.has_model or (kind.own_tokenizer and spec.assistant):
        return kind
    raise BenchError(
        f"the pair {spec.name!r} has no assistant model for the {kind.value!r} drafter; "
        "name one with --target ID --assistant ID"
    )


def with_drafter(pair: LoadedPair, kind: str) -> LoadedPair:
    """The same loaded models drafting another way: no second copy of the target.

    Loading is cached per spec, so asking `load_pair` for a sibling spec would load the
    target again; this shares its weights instead.
    """
    if kind == pair.spec.drafter:
        return pair
    kind = check_drafter(pair.spec, kind)
    uses_assistant = kind.has_model
    layer = pair.spec.early_exit_layer or EARLY_EXIT_LAYER
    if kind is DrafterKind.EARLY_EXIT:
        layers = pair.target.config.get_text_config().num_hidden_layers
        if not 0 < layer < layers:
            raise BenchError(
                f"early exit at layer {layer} needs a target with more layers (it has {layers})"
            )
    spec = dataclasses.replace(
        pair.spec,
        name=f"{pair.spec.name} ({kind})",
        drafter=kind,
        assistant=pair.spec.assistant if uses_assistant else None,
        early_exit_layer=layer,
    )
    return dataclasses.replace(
        pair,
        spec=spec,
        assistant=pair.assistant if uses_assistant else None,
        assistant_tokenizer=pair.assistant_tokenizer if uses_assistant else None,
        warmed_modes=set(),
    )


# -- measuring -------------------------------------------------------------------------------


def benchmark(
    pair: LoadedPair,
    examples: Sequence[Example],
    variants: Sequence[Variant],
    settings: RunSettings,
    repeats: int = REPEATS,
    overhead: bool = False,
    stop: threading.Event | None = None,
) -> Iterator[Progress | Finished]:
    """Time every prompt plain and with every variant; yield Progress, then Finished.

    Setting `stop` ends the run in flight within one step and the benchmark with it: no
    Finished is yielded, since a report of a partial set would mislead."""
    from assisted import decoding

    settings.validate()
    if repeats < 1:
        raise BenchError(f"--repeats must be at least 1, not {repeats}")
    drafting = {v.drafter: with_drafter(pair, v.drafter) for v in variants}
    prompt_ids = [decoding.encode_prompt(pair, e.prompt, settings.chat_template) for e in examples]
    for ids in prompt_ids:
        decoding.check_length(pair, ids, settings)

    # The overhead is measured in plain decoding and with the first variant.
    overhead_runs = 2 * repeats * (1 + min(1, len(variants))) if overhead else 0
    total = len(examples) * repeats * (1 + len(variants)) + overhead_runs
    done = 0
    yield Progress(done, total, "warming up")
    decoding.warm_up(pair, ("plain",))
    for variant in variants:
        decoding.warm_up(drafting[variant.drafter], ("assisted",), variant.draft)

    overheads: dict[str, float | None] = {}
    if overhead and examples:
        measured = [(None, pair)] + [(v, drafting[v.drafter]) for v in variants[:1]]
        for variant, drafter in measured:
            mode = "plain" if variant is None else "assisted"
            draft = variant.draft if variant else None
            bare_s, run_s = [], []
            for repeat in range(repeats):
                # Alternate which goes first, as for the prompts.
                for which in ("bare", "run") if repeat % 2 == 0 else ("run", "bare"):
                    seconds = _time_per_token(
                        drafter, prompt_ids[0], settings, mode, draft, bare=which == "bare"
                    )
                    (bare_s if which == "bare" else run_s).append(seconds)
                    done += 1
                    yield Progress(done, total, f"overhead, {mode}: {which}")
            overheads[mode] = _overhead_pct(bare_s, run_s)

    warmup = settings.with_(max_new_tokens=min(WARMUP_TOKENS, settings.max_new_tokens))
    runs: list[Run] = []
    for index, (example, ids) in enumerate(zip(examples, prompt_ids, strict=True)):
        # The `auto` policy starts each run from the acceptance the pair's earlier runs saw.
        # Every timed run of this prompt starts from what the earlier prompts taught, never
        # from this prompt's own warm-up or repeats, as a new prompt in the app would.
        learnt = copy.deepcopy(pair.acceptance_history)
        yield Progress(done, total, f"{example.label}: warm-up")
        _drain(decoding.run(pair, ids, "plain", warmup, stop=stop))
        for variant in variants:
            drafter = drafting[variant.drafter]
            _drain(decoding.run(drafter, ids, "assisted", warmup, variant.draft, stop=stop))
        for repeat in range(repeats):
            order: list[Variant | None] = [None, *variants]
            if (index + repeat) % 2:
                order.reverse()
            for variant in order:
                if stop is not None and stop.is_set():
                    return
                if variant is None:
                    events = decoding.run(pair, ids, "plain", settings, stop=stop)
                else:
                    pair.acceptance_history.clear()
                    pair.acceptance_history.update(copy.deepcopy(learnt))
                    events = decoding.run(
                        drafting[variant.drafter], ids, "assisted", settings, variant.draft, stop
                    )
                record = _drain(events)
                if record.stopped:
                    return
                name = variant.name if variant else None
                runs.append(Run(example.question_id, example.category, name, repeat, record))
                done += 1
                yield Progress(done, total, f"{example.label}: {name or 'plain'}", record)

    info = {"pair": pair.spec.name, "device": str(pair.device), "dtype": pair.dtype_name}
    result = report(
        runs, variants, info, settings, repeats, overheads.get("plain"), overheads.get("assisted")
    )
    yield Finished(result, runs)


def _drain(events) -> RunRecord:
    record = None
    for event in events:
        record = getattr(event, "record", record)
    if record is None:
        raise RuntimeError("the run ended without a record")
    return record


def _time_per_token(
    pair: LoadedPair,
    ids: list[int],
    settings: RunSettings,
    mode: str,
    draft: DraftSettings | None,
    bare: bool,
) -> float:
    """Seconds per new token, seen from the caller: the streamed run pays for its queue,
    streamer and hooks (and, assisted, for reading and decoding each step's draft); the
    bare generate() for none of them.

    The bare call runs in a worker thread too, as `run()`'s generate() does: on a CPU,
    OpenMP behaves differently on the main thread (the tiny test models ran 10× slower
    there on a busy 2-core machine), which would pass for our overhead.
    """
    from assisted import decoding

    if bare:
        result: list = []
        worker = threading.Thread(
            target=lambda: result.append(decoding.generate_bare(pair, ids, mode, settings, draft))
        )
        worker.start()
        worker.join()
        if not result:
            raise RuntimeError("the bare generate() failed; see the traceback above")
        tokens, seconds = result[0]
        return seconds / max(1, len(tokens))
    start = time.perf_counter()
    record = _drain(decoding.run(pair, ids, mode, settings, draft))
    return (time.perf_counter() - start) / max(1, stats.new_tokens(record))


def _overhead_pct(bare_s: Sequence[float], run_s: Sequence[float]) -> float | None:
    bare, streamed = stats.median(bare_s), stats.median(run_s)
    if not bare or streamed is None:
        return None
    return _round((streamed / bare - 1) * 100, 2)


# -- aggregating: runs in, dicts out (no models) ---------------------------------------------


def summarize_prompt(plain: Sequence[RunRecord], assisted: Sequence[RunRecord]) -> dict:
    """One prompt and one drafter over its repeats; `plain[i]` pairs with `assisted[i]`."""
    plain_rate = stats.median([stats.tokens_per_s(r) for r in plain])
    assisted_rate = stats.median([stats.tokens_per_s(r) for r in assisted])
    compared = [stats.compare(p, a) for p, a in zip(plain, assisted, strict=True)]
    divergences = [c["first_divergence"] for c in compared if c["first_divergence"] is not None]
    drafted = sum(stats.drafted(r) for r in assisted)
    accepted = sum(stats.accepted(r) for r in assisted)
    tokens = sum(stats.new_tokens(r) for r in assisted)
    steps = sum(len(r.steps) for r in assisted)
    curve = assisted[-1].verify_cost_s if assisted else []
    return {
        "speedup": _ratio(assisted_rate, plain_rate),
        "plain_tokens_per_s": _round(plain_rate),
        "assisted_tokens_per_s": _round(assisted_rate),
        "acceptance_rate": _ratio(accepted, drafted),
        "tokens_per_step": _ratio(tokens, steps),
        "predicted_speedup": _round(stats.median([c["predicted_speedup"] for c in compared])),
        "alpha": _round(stats.median([c["alpha"] for c in compared])),
        "mean_drafted": _ratio(drafted, steps),
        "cost_ratio": _round(stats.median([c["cost_ratio"] for c in compared])),
        "identical": all(c["identical"] for c in compared),
        "first_divergence": min(divergences, default=None),
        "assistant_precision": assisted[0].assistant_precision if assisted else None,
        "new_tokens": _round(stats.median([stats.new_tokens(r) for r in assisted])),
        "plain_new_tokens": _round(stats.median([stats.new_tokens(r) for r in plain])),
        "repeats": len(compared),
        # Pooled counts, so categories can pool them in turn.
        "drafted": drafted,
        "accepted": accepted,
        "steps": steps,
        "assisted_tokens": tokens,
        # The `auto` schedule's T(k) after the last repeat ([] under the others).
        "verify_cost_s": [[k, _round(s, 6)] for k, s in curve],
    }


def summarize_group(rows: Sequence[dict]) -> dict:
    """Aggregate prompt rows (one drafter): median and geometric-mean speedup, pooled
    acceptance rate and tokens per step, median predicted speedup."""
    speedups = [r["speedup"] for r in rows if r["speedup"] is not None]
    predicted = [r["predicted_speedup"] for r in rows if r["predicted_speedup"] is not None]
    return {
        "speedup": _round(stats.median(speedups)),
        "speedup_geomean": _round(stats.geometric_mean(speedups)),
        "plain_tokens_per_s": _round(stats.median([r["plain_tokens_per_s"] for r in rows])),
        "assisted_tokens_per_s": _round(stats.median([r["assisted_tokens_per_s"] for r in rows])),
        "acceptance_rate": _ratio(
            sum(r["accepted"] for r in rows), sum(r["drafted"] for r in rows)
        ),
        "tokens_per_step": _ratio(
            sum(r["assisted_tokens"] for r in rows), sum(r["steps"] for r in rows)
        ),
        "predicted_speedup": _round(stats.median(predicted)),
        "predicted_speedup_geomean": _round(stats.geometric_mean(predicted)),
        "prompts": len(rows),
        "identical_prompts": sum(bool(r["identical"]) for r in rows),
        "identical": all(r["identical"] for r in rows),
    }


def report(
    runs: Sequence[Run],
    variants: Sequence[Variant],
    info: dict,
    settings: RunSettings,
    repeats: int,
    overhead_pct: float | None = None,
    assisted_overhead_pct: float | None = None,
) -> dict:
    """The whole benchmark as one JSON-ready dict (shape in the module docstring)."""
    prompts: dict[tuple[str, str], dict[str | None, list[RunRecord]]] = {}
    for run in sorted(runs, key=lambda r: r.repeat):  # stable: keeps prompt order
        by_drafter = prompts.setdefault((run.category, run.question_id), {})
        by_drafter.setdefault(run.drafter, []).append(run.record)
    rows = []
    for (category, question_id), by_drafter in prompts.items():
        for variant in variants:
            plain, assisted = by_drafter.get(None, []), by_drafter.get(variant.name, [])
            if plain and assisted:
                row = {"question_id": question_id, "category": category, "drafter": variant.name}
                rows.append(row | summarize_prompt(plain, assisted))
    drafters = {}
    for variant in variants:
        mine = [r for r in rows if r["drafter"] == variant.name]
        categories = {}
        for row in mine:
            categories.setdefault(row["category"], []).append(row)
        overall = summarize_group(mine)
        # Overall, the headline is the geometric mean; the median is named as such.
        overall["speedup_median"] = overall.pop("speedup")
        overall["overhead_pct"] = overhead_pct
        # Measured with the first variant only.
        first = variant is variants[0]
        overall["assisted_overhead_pct"] = assisted_overhead_pct if first else None
        drafters[variant.name] = {
            "drafter_kind": variant.drafter,
            "draft": dataclasses.asdict(variant.draft),
            "overall": overall,
            "categories": {name: summarize_group(group) for name, group in categories.items()},
        }
    first = drafters[variants[0].name] if variants else {"overall": {}, "categories": {}}
    return {
        **info,
        "settings": dataclasses.asdict(settings) | {"repeats": repeats},
        "drafter": variants[0].name if variants else None,
        "overall": first["overall"],
        "categories": first["categories"],
        "prompts": rows,
        "drafters": drafters,
    }


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return _round(numerator / denominator)


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


# -- showing ---------------------------------------------------------------------------------

_COLUMNS = (
    ("plain tok/s", "plain_tokens_per_s", "{:.1f}"),
    ("assisted tok/s", "assisted_tokens_per_s", "{:.1f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("accept", "acceptance_rate", "{:.0%}"),
    ("tok/step", "tokens_per_step", "{:.2f}"),
    ("predicted", "predicted_speedup", "{:.2f}x"),
)


def render(result: dict) -> str:
    """The human-readable card: per prompt, per category, overall."""
    settings = result["settings"]
    decoding = (
        f"sampling (T={settings['temperature']}, top-p={settings['top_p']}, "
        f"seed={settings['seed']})"
        if settings["sample"]
        else "greedy"
    )
    lines = [
        f"Benchmark: {result['pair']} on {result['device']}, {result['dtype']}",
        f"{decoding}, {settings['max_new_tokens']} new tokens, {settings['repeats']} repeat(s); "
        "speedup = median assisted tok/s ÷ median plain tok/s",
        "",
        "Per prompt",
        _table(
            ("category", "question", "drafter"),
            [(r["category"], r["question_id"], r["drafter"]) for r in result["prompts"]],
            result["prompts"],
            lambda r: "yes" if r["identical"] else f"no (at {r['first_divergence']})",
        ),
        "",
        "Per category (median speedup over prompts; acceptance pooled over runs)",
    ]
    groups, labels = [], []
    for name, entry in result["drafters"].items():
        for category, group in entry["categories"].items():
            groups.append(group)
            labels.append((category, name, str(group["prompts"])))
    lines.append(
        _table(
            ("category", "drafter", "prompts"),
            labels,
            groups,
            lambda g: f"{g['identical_prompts']}/{g['prompts']}",
        )
    )
    lines.append("")
    for name, entry in result["drafters"].items():
        overall = entry["overall"]
        lines.append(
            f"Overall, {name}: speedup {_cell(overall['speedup_geomean'], '{:.2f}x')} "
            f"(geometric mean over {overall['prompts']} prompts; median "
            f"{_cell(overall['speedup_median'], '{:.2f}x')}), predicted "
            f"{_cell(overall['predicted_speedup'], '{:.2f}x')}, acceptance "
            f"{_cell(overall['acceptance_rate'], '{:.0%}')}, "
            f"{_cell(overall['tokens_per_step'], '{:.2f}')} tokens/step, identical "
            f"{overall['identical_prompts']}/{overall['prompts']}"
        )
    overhead = result["overall"].get("overhead_pct")
    if overhead is not None:
        lines.append(
            f"Backend overhead: {overhead:+.1f}% per token (streamed run() vs bare generate(), "
            "plain, first prompt, medians)"
        )
    overhead = result["overall"].get("assisted_overhead_pct")
    if overhead is not None:
        lines.append(
            f"Backend overhead, assisted: {overhead:+.1f}% per token (the same, with "
            f"{result['drafter']})"
        )
    return "\n".join(lines)


def _table(heads: Sequence[str], labels: Sequence[Sequence[str]], rows, identical) -> str:
    header = [*heads, *(title for title, _, _ in _COLUMNS), "identical"]
    body = [
        [*label, *(_cell(row[key], fmt) for _, key, fmt in _COLUMNS), identical(row)]
        for label, row in zip(labels, rows, strict=True)
    ]
    widths = [max(len(str(c)) for c in column) for column in zip(header, *body, strict=True)]
    text_columns = len(heads)

    def line(cells) -> str:
        return "  ".join(
            str(c).ljust(w) if i < text_columns else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join(line(cells) for cells in [header, *body])


def _cell(value: float | None, fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


def draw_chart(result: dict) -> Figure:
    """Speedup per category, measured (solid) beside predicted (hatched), per drafter."""
    from matplotlib.figure import Figure

    drafters = result["drafters"]
    categories = list(dict.fromkeys(c for d in drafters.values() for c in d["categories"]))
    bars = 2 * max(1, len(drafters))
    width = 0.8 / bars
    figure = Figure(figsize=(max(6.0, 1.2 * len(categories) * max(1, len(drafters))), 4.0))
    axes = figure.add_subplot()
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    for d, (name, entry) in enumerate(drafters.items()):
        colour = palette[d % len(palette)]
        for k, (key, hatch, alpha) in enumerate(
            (("speedup", None, 1.0), ("predicted_speedup", "//", 0.45))
        ):
            values = [entry["categories"].get(c, {}).get(key) or 0.0 for c in categories]
            offsets = [i - 0.4 + width * (2 * d + k + 0.5) for i in range(len(categories))]
            label = f"{name}: {'measured' if k == 0 else 'predicted'}"
            bars_drawn = axes.bar(
                offsets, values, width, color=colour, alpha=alpha, hatch=hatch, label=label
            )
            axes.bar_label(bars_drawn, fmt="%.2f", fontsize="x-small")
    axes.axhline(1.0, color="grey", linewidth=1, linestyle="--")
    axes.set_xticks(range(len(categories)), categories, rotation=20, ha="right")
    axes.set_ylabel("speedup (× plain tokens/s)")
    axes.set_title(f"{result['pair']} · {result['device']} · {result['dtype']}")
    axes.legend(fontsize="small")
    figure.tight_layout()
    return figure


def write_out(folder: Path, result: dict, runs: Sequence[Run]) -> None:
    """Write runs.jsonl, report.json and speedup.png into `folder`, all or nothing: files
    are made in a temporary folder beside it and moved in once every one is written."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        with open(staging / "runs.jsonl", "w", encoding="utf-8") as file:
            for run in runs:
                file.write(json.dumps(run.to_dict(), ensure_ascii=False) + "\n")
        (staging / "report.json").write_text(
            json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        draw_chart(result).savefig(staging / "speedup.png", dpi=120)
        folder.mkdir(exist_ok=True)
        for path in staging.iterdir():
            os.replace(path, folder / path.name)
    finally:
        for path in staging.glob("*"):
            path.unlink()
        staging.rmdir()


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m assisted.bench",
        description="Plain vs assisted decoding over a prompt set: speedup and acceptance "
        "by category, predicted beside measured.",
    )
    parser.add_argument(
        "--prompts", action="append", type=Path, metavar="PATH",
        help=f"an examples folder (CATEGORY/NAME.txt) or a JSONL file; repeatable "
        f"(default: {EXAMPLES_DIR.name}/)",
    )  # fmt: skip
    parser.add_argument(
        "--categories",
        type=_names,
        metavar="NAME[,NAME...]",
        help="comma list of categories to keep",
    )
    parser.add_argument("--limit", type=int, metavar="N", help="at most N prompts per category")
    parser.add_argument(
        "--repeats", type=int, default=REPEATS, metavar="N", help="timed rounds per prompt"
    )
    add_pair_options(parser)
    parser.add_argument(
        "--drafters", type=_names, metavar="KIND[,KIND...]",
        help=f"comma list of drafters to compare with one plain baseline: "
        f"{', '.join(DRAFTER_NAMES)} (default: the pair's own)",
    )  # fmt: skip
    add_run_options(parser)
    sweep = parser.add_argument_group(
        "draft settings (default: the pair's own; a comma list sweeps the values)"
    )
    sweep.add_argument("--num-assistant-tokens", type=_list(int), metavar="N[,N...]")
    sweep.add_argument("--schedule", type=_list(str), metavar="constant|heuristic|auto")
    sweep.add_argument("--confidence-threshold", type=_list(float), metavar="T[,T...]")
    sweep.add_argument("--prompt-lookup-num-tokens", type=_list(int), metavar="N[,N...]")
    sweep.add_argument("--max-matching-ngram-size", type=_list(int), metavar="N[,N...]")
    sweep.add_argument(
        "--assistant-quant", type=_list(str), metavar="auto|none|int8",
        help="the assistant model's precision (none: the pair's dtype); the target's never "
        "changes",
    )  # fmt: skip
    parser.add_argument(
        "--variant", action="append", metavar="KEY=VALUE[,KEY=VALUE...]",
        help="one variant with exactly these settings, instead of the sweep's product; "
        "repeatable (e.g. --variant schedule=constant,num-assistant-tokens=2 "
        "--variant schedule=auto,num-assistant-tokens=8)",
    )  # fmt: skip
    parser.add_argument(
        "--overhead", action="store_true",
        help="also time streamed run() against a bare generate() on the first prompt",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, metavar="DIR", help="write runs, report and chart")
    return parser.parse_args(argv)


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _list(kind):
    def parse(text: str) -> list:
        try:
            return [kind(item) for item in _names(text)]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma list, not {text!r}") from None

    parse.__name__ = kind.__name__  # argparse names the type in its error message
    return parse


def prepare(args: argparse.Namespace) -> tuple[PairSpec, list[Example], list[Variant], RunSettings]:
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
    args = parse_args(argv)
    try:
        spec, examples, variants, settings = prepare(args)
        pair = load_pair(spec, device=args.device, dtype=args.dtype)
        finished = None
        for event in _with_progress_bar(
            benchmark(pair, examples, variants, settings, args.repeats, args.overhead)
        ):
            finished = event
        assert isinstance(finished, Finished)
        if args.out is not None:
            write_out(args.out, finished.report, finished.runs)
    except (BenchError, ExamplesError, PairError, SettingsError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(render(finished.report))
    if args.out is not None:
        print(f"\nWrote runs.jsonl, report.json and speedup.png to {args.out}")
    print(json.dumps(finished.report, ensure_ascii=False))
    return 0


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
