"""Reporting a benchmark: timed runs in, figures, text tables and a chart out. No models here.

Figures (terms as defined in `assisted.analysis.stats`):
- a prompt's **speedup** = median assisted tokens/s ÷ median plain tokens/s over the
  repeats (a tokens/s ratio, so runs of different lengths still compare);
- its **acceptance rate** and **tokens per step** pool all its assisted runs (Σ/Σ);
- its **predicted speedup** is the median over repeats of each repeat's prediction: under
  the `auto` schedule the policy's own, summed from its per-step expectations, otherwise
  the Leviathan et al. model fed with that repeat's measured acceptance, draft length and
  cost ratio, a fit to that repeat rather than a forecast (the tables say "fitted"); its
  **prediction** names which ("policy" or "leviathan-fitted");
- **identical** means every assisted run produced exactly the plain run's tokens; a
  prompt's **outcome** is the most worrying of its repeats' (`assisted.analysis.divergence`:
  identical, near-tie, not judged, unexplained), and groups count prompts by outcome.
- **template draft runs**: the assisted runs in which some prompt-lookup draft copied the
  chat template, a special token or a run of `measuring.TEMPLATE_RUN` tokens of its text (the
  system prompt; `measuring.copies_template`), of `assisted_runs`; pooled over prompts.
- A category's speedup is the median of its prompts' speedups (geometric mean beside it);
  its acceptance rate and tokens per step pool the steps of all its runs; its predicted
  speedup is the median of its prompts' (geometric mean beside it), with the prediction
  they came from. "overall" does the same over all prompts, and its headline figure is the
  geometric mean of the per-prompt speedups.

- **first draft**: how the first-draft rule went in most of a prompt's runs, why, and in how
  many (`assisted.analysis.stats`); the card lists where it waited or declined.
- **oracle** figures: the best schedule in hindsight and the shares of it the runs
  reached, modelled and measured (`prompt_fields`, `measured_share`).

The report's shape, as `report()` returns it and `python -m assisted.bench` prints it as
JSON: docs/json.md, "The benchmark report". "overall" and "categories" describe the first
drafter; "drafters" holds every drafter's; "prompts" holds a row per prompt and drafter.

The benchmark's chart: speedup per category, measured beside predicted or fitted, per
drafter, drawn from the report (`draw_chart`). Matplotlib is imported when a
chart is drawn, so the report and its card need none.

The benchmark's oracle figures: how much of the best schedule in hindsight a drafter's
runs reached (`assisted.analysis.oracle`), per prompt, per category and overall.

Two shares, both of the oracle's modelled speedup:
- **modelled** (the policy): the run's own choices priced by its costs, against the
  oracle's schedule priced the same way (`policy_share`: oracle seconds ÷ the run's);
- **measured** (the policy and the machinery around it): the measured speedup against the
  oracle's (`measured_share`).

A prompt's oracle speedup and modelled share are medians over its repeats, and its
measured share is its speedup (median tokens/s ÷ median tokens/s) over that oracle
speedup. A group's oracle speedup is the median of its prompts' (as its speedup is), with
their geometric mean beside it; its shares are geometric means over its prompts, so its
measured share is its speedup geomean over its oracle speedup geomean. The agreement
(how many drafting steps the hindsight reproduces) is pooled over runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assisted.analysis import divergence, oracle, stats
from assisted.bench.planning import Variant
from assisted.core.record import ORACLE, RunRecord, attempted, card_lines, rounded
from assisted.core.settings import RunSettings

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def prompt_fields(
    plain: Sequence[RunRecord],
    assisted: Sequence[RunRecord],
    failures: dict[str, str],
    pooled: Sequence[RunRecord] = (),
) -> dict:
    """One prompt's oracle figures over its repeats (`plain[i]` pairs with `assisted[i]`),
    T(k) priced from the steps of `pooled` too (the prompt's other drafters' runs); a
    repeat whose oracle fails is left out, its fault kept in `failures`."""
    found = []
    for p, a in zip(plain, assisted, strict=True):
        with attempted(ORACLE, failures):
            found.append(oracle.report(p, a, pooled))
    found = [f for f in found if f["reason"] is None]
    if not found:
        return dict.fromkeys(
            ("oracle_speedup", "modelled_share", "oracle_agreement", "oracle_seconds")
        ) | {"oracle_agreeing": 0, "oracle_drafting": 0}
    agreeing = sum(f["agreeing_steps"] for f in found)
    drafting = sum(f["drafting_steps"] for f in found)
    return {
        "oracle_speedup": rounded(stats.median([f["speedup_modelled"] for f in found])),
        "modelled_share": rounded(stats.median([f["policy_share"] for f in found])),
        "oracle_agreement": rounded(agreeing / drafting) if drafting else None,
        "oracle_seconds": rounded(stats.median([f["seconds"] for f in found])),
        # Pooled counts, so groups can pool them in turn.
        "oracle_agreeing": agreeing,
        "oracle_drafting": drafting,
    }


def measured_share(row: dict) -> float | None:
    """A prompt's measured speedup over its oracle's."""
    if row.get("speedup") is None or not row.get("oracle_speedup"):
        return None
    return rounded(row["speedup"] / row["oracle_speedup"])


def group_fields(rows: Sequence[dict]) -> dict:
    """A group of prompt rows' oracle figures (the module's note)."""
    found = [r for r in rows if r.get("oracle_speedup")]
    oracle_geomean = stats.geometric_mean([r["oracle_speedup"] for r in found])
    measured = stats.geometric_mean([r["speedup"] for r in found if r["speedup"]])
    agreeing = sum(r.get("oracle_agreeing") or 0 for r in rows)
    drafting = sum(r.get("oracle_drafting") or 0 for r in rows)
    return {
        "oracle_speedup": rounded(stats.median([r["oracle_speedup"] for r in found])),
        "oracle_speedup_geomean": rounded(oracle_geomean),
        "modelled_share": rounded(stats.geometric_mean([r["modelled_share"] for r in found])),
        "measured_share": rounded(measured / oracle_geomean)
        if measured and oracle_geomean
        else None,
        "oracle_agreement": rounded(agreeing / drafting) if drafting else None,
        "oracle_prompts": len(found),
    }


def overall_line(overall: dict) -> str:
    """The card's line on the oracle for one drafter's `overall`."""
    if not overall.get("oracle_prompts"):
        return "  oracle: not computed (sampled, stopped, or no costs measured)"
    return (
        f"  oracle, in hindsight: {overall['oracle_speedup_geomean']:.2f}x (geomean over "
        f"{overall['oracle_prompts']} prompts, modelled from each run's costs); reached "
        f"{_percent(overall['modelled_share'])} of it modelled (the policy), "
        f"{_share(overall['measured_share'])} measured (the policy and its machinery); the "
        f"hindsight reproduced {_percent(overall['oracle_agreement'])} of drafting steps"
    )


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _share(value: float | None) -> str:
    return "–" if value is None else oracle.share_text(value)


@dataclass(frozen=True)
class Run:
    """One timed run; `drafter` is the variant's name, None for the plain baseline.
    `template_drafts`: the assisted run's steps whose prompt-lookup draft copied the chat
    template (`measuring._Session.template_drafts`); None for plain runs, or not counted."""

    question_id: str
    category: str
    drafter: str | None
    repeat: int
    record: RunRecord
    template_drafts: int | None = None

    def to_dict(self) -> dict:
        return {
            "question_id": self.question_id,
            "category": self.category,
            "drafter": self.drafter,
            "repeat": self.repeat,
            "template_drafts": self.template_drafts,
            "record": self.record.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Run:
        """A run from its line of runs.jsonl (`to_dict`)."""
        return cls(
            question_id=data["question_id"],
            category=data["category"],
            drafter=data["drafter"],
            repeat=data["repeat"],
            record=RunRecord.from_dict(data["record"]),
            template_drafts=data.get("template_drafts"),
        )


def summarize_prompt(
    plain: Sequence[RunRecord],
    assisted: Sequence[RunRecord],
    template_drafts: Sequence[int | None] = (),
    pooled: Sequence[RunRecord] = (),
) -> dict:
    """One prompt and one drafter over its repeats; `plain[i]` pairs with `assisted[i]`, and
    `template_drafts[i]` counts the template copies in `assisted[i]`'s drafts (`Run`);
    `pooled` are the prompt's other runs, whose steps price the oracle's T(k) too."""
    counted = [count for count in template_drafts if count is not None]
    plain_rate = stats.median([stats.tokens_per_s(r) for r in plain])
    assisted_rate = stats.median([stats.tokens_per_s(r) for r in assisted])
    # The analyses that failed, by name (`assisted.core.record`): the runs stand.
    failures = {part: error for run in assisted for part, error in run.analysis_errors.items()}
    compared = [stats.compare_runs(p, a, failures) for p, a in zip(plain, assisted, strict=True)]
    divergences = [c["first_divergence"] for c in compared if c["first_divergence"] is not None]
    drafted = sum(stats.drafted(r) for r in assisted)
    accepted = sum(stats.accepted(r) for r in assisted)
    tokens = sum(stats.new_tokens(r) for r in assisted)
    steps = sum(len(r.steps) for r in assisted)
    curve = assisted[-1].verify_cost_s if assisted else []
    summary = (
        {
            "speedup": _ratio(assisted_rate, plain_rate),
            "plain_tokens_per_s": rounded(plain_rate),
            "assisted_tokens_per_s": rounded(assisted_rate),
            "acceptance_rate": _ratio(accepted, drafted),
            "tokens_per_step": _ratio(tokens, steps),
            "predicted_speedup": rounded(stats.median([c["predicted_speedup"] for c in compared])),
            "prediction": _prediction(c["prediction"] for c in compared),
            "alpha": rounded(stats.median([c["alpha"] for c in compared])),
            "mean_drafted": _ratio(drafted, steps),
            "cost_ratio": rounded(stats.median([c["cost_ratio"] for c in compared])),
            "identical": all(c["identical"] for c in compared),
            "first_divergence": min(divergences, default=None),
            "outcome": divergence.worst([divergence.outcome(c["divergence"]) for c in compared]),
            "assistant_precision": assisted[0].assistant_precision if assisted else None,
            "new_tokens": rounded(stats.median([stats.new_tokens(r) for r in assisted])),
            "plain_new_tokens": rounded(stats.median([stats.new_tokens(r) for r in plain])),
            "repeats": len(compared),
            # Assisted runs whose drafts copied the chat template (None: not counted).
            "template_draft_runs": sum(count > 0 for count in counted) if counted else None,
            # Pooled counts, so categories can pool them in turn.
            "drafted": drafted,
            "accepted": accepted,
            "steps": steps,
            "assisted_tokens": tokens,
            # The `auto` schedule's T(k) after the last repeat ([] under the others).
            "verify_cost_s": [[k, rounded(s, 6)] for k, s in curve],
        }
        | stats.prompt_fields(assisted)
        | prompt_fields(plain, assisted, failures, pooled)
    )
    return summary | {"measured_share": measured_share(summary), "analysis_errors": failures}


def summarize_group(rows: Sequence[dict]) -> dict:
    """Aggregate prompt rows (one drafter): median and geometric-mean speedup, pooled
    acceptance rate and tokens per step, median and geometric-mean predicted speedup."""
    speedups = [r["speedup"] for r in rows if r["speedup"] is not None]
    predicted = [r["predicted_speedup"] for r in rows if r["predicted_speedup"] is not None]
    # How far the predictions were off, prompt by prompt: 1 is exact, below 1 too low.
    ratios = [
        r["predicted_speedup"] / r["speedup"]
        for r in rows
        if r["predicted_speedup"] is not None and r["speedup"]
    ]
    return {
        "speedup": rounded(stats.median(speedups)),
        "speedup_geomean": rounded(stats.geometric_mean(speedups)),
        "plain_tokens_per_s": rounded(stats.median([r["plain_tokens_per_s"] for r in rows])),
        "assisted_tokens_per_s": rounded(stats.median([r["assisted_tokens_per_s"] for r in rows])),
        "acceptance_rate": _ratio(
            sum(r["accepted"] for r in rows), sum(r["drafted"] for r in rows)
        ),
        "tokens_per_step": _ratio(
            sum(r["assisted_tokens"] for r in rows), sum(r["steps"] for r in rows)
        ),
        "predicted_speedup": rounded(stats.median(predicted)),
        "predicted_speedup_geomean": rounded(stats.geometric_mean(predicted)),
        "predicted_over_measured": rounded(stats.geometric_mean(ratios)),
        "prediction": _prediction(r["prediction"] for r in rows),
        "prompts": len(rows),
        "assisted_runs": sum(r["repeats"] for r in rows),
        "template_draft_runs": _total(r["template_draft_runs"] for r in rows),
        "identical_prompts": sum(bool(r["identical"]) for r in rows),
        "near_tie_prompts": sum(r["outcome"] == divergence.NEAR_TIE for r in rows),
        "unexplained_prompts": sum(r["outcome"] == divergence.UNEXPLAINED for r in rows),
        "not_judged_prompts": sum(r["outcome"] == divergence.NOT_JUDGED for r in rows),
        "identical": all(r["identical"] for r in rows),
    } | group_fields(rows)


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
    prompts: dict[tuple[str, str], dict[str | None, list[Run]]] = {}
    for run in sorted(runs, key=lambda r: r.repeat):  # stable: keeps prompt order
        by_drafter = prompts.setdefault((run.category, run.question_id), {})
        by_drafter.setdefault(run.drafter, []).append(run)
    rows = []
    for (category, question_id), by_drafter in prompts.items():
        for variant in variants:
            plain, assisted = by_drafter.get(None, []), by_drafter.get(variant.name, [])
            # Runs of the same repeat, paired: a benchmark stopped early can leave a round
            # half done (`assisted.bench.journal`).
            paired = {r.repeat for r in plain} & {r.repeat for r in assisted}
            plain = [r for r in plain if r.repeat in paired]
            assisted = [r for r in assisted if r.repeat in paired]
            if paired:
                row = {"question_id": question_id, "category": category, "drafter": variant.name}
                records = [r.record for r in plain], [r.record for r in assisted]
                copies = [r.template_drafts for r in assisted]
                # The target's costs are the same whatever drafted: every run of the
                # prompt prices its T(k) (`assisted.analysis.oracle`).
                pooled = [r.record for mine in by_drafter.values() for r in mine]
                rows.append(row | summarize_prompt(*records, copies, pooled))
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


def _prediction(models: Iterable[str | None]) -> str | None:
    """The model that made these predictions (`stats.compare_runs`'s `prediction`); None where
    there are none, or where they mix (rows of one drafter share its schedule, so only
    records saved without the policy's expectations can mix them)."""
    named = {model for model in models if model}
    return named.pop() if len(named) == 1 else None


def _total(counts: Iterable[int | None]) -> int | None:
    """The sum of the counts that were made; None where none was."""
    made = [count for count in counts if count is not None]
    return sum(made) if made else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return rounded(numerator / denominator)


def overhead_percent(bare_s: Sequence[float], run_s: Sequence[float]) -> float | None:
    """How much longer per token the streamed runs took than the bare ones (medians), in %."""
    bare, streamed = stats.median(bare_s), stats.median(run_s)
    if not bare or streamed is None:
        return None
    return rounded((streamed / bare - 1) * 100, 2)


# -- showing ---------------------------------------------------------------------------------

_COLUMNS = (
    ("plain tok/s", "plain_tokens_per_s", "{:.1f}"),
    ("assisted tok/s", "assisted_tokens_per_s", "{:.1f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("accept", "acceptance_rate", "{:.0%}"),
    ("tok/step", "tokens_per_step", "{:.2f}"),
    ("pred./fit", "predicted_speedup", "{:.2f}x"),
    ("template runs", "template_draft_runs", "{}"),  # runs whose drafts copied the template
    ("oracle", "oracle_speedup", "{:.2f}x"),  # the best schedule in hindsight, modelled
    ("policy", "modelled_share", "{:.0%}"),  # the run's choices' share of it, modelled
    ("reached", "measured_share", oracle.share_text),  # the measured speedup's share of it
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
        *_partial_line(result),
        "",
        "Per prompt",
        _table(
            ("category", "question", "drafter"),
            [(r["category"], r["question_id"], r["drafter"]) for r in result["prompts"]],
            result["prompts"],
            _outcome_cell,
        ),
        "",
        *card_lines(result["prompts"]),
        *stats.card_lines(result["prompts"]),
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
            _outcome_counts,
        )
    )
    lines.append("")
    for name, entry in result["drafters"].items():
        overall = entry["overall"]
        lines.append(
            f"Overall, {name}: speedup {_cell(overall['speedup_geomean'], '{:.2f}x')} "
            f"(geometric mean over {overall['prompts']} prompts; median "
            f"{_cell(overall['speedup_median'], '{:.2f}x')}), "
            f"{stats.speedup_word(overall['prediction'])} "
            f"{_cell(overall['predicted_speedup'], '{:.2f}x')}{_basis(overall)} "
            f"(÷ measured, geomean {_cell(overall.get('predicted_over_measured'), '{:.2f}')}), "
            "acceptance "
            f"{_cell(overall['acceptance_rate'], '{:.0%}')}, "
            f"{_cell(overall['tokens_per_step'], '{:.2f}')} tokens/step, "
            f"drafts copied the chat template in {_cell(overall['template_draft_runs'], '{}')} "
            f"of {overall['assisted_runs']} runs, {_outcome_counts(overall)}"
        )
        lines.append(overall_line(overall))
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


def _partial_line(result: dict) -> list[str]:
    """The card's word on a report rebuilt from a benchmark that stopped early; none else."""
    partial = result.get("partial")
    if partial is None:
        return []
    return [
        f"Partial: {partial['timed_runs']} of {partial['planned']} timed runs finished; "
        "each prompt pairs the repeats it finished"
    ]


def _table(
    heads: Sequence[str],
    labels: Sequence[Sequence[str]],
    rows: Sequence[dict],
    identical: Callable[[dict], str],
) -> str:
    """Text columns `heads` (one `labels` entry per row), then the figures of `_COLUMNS`
    from each row, then whether its outputs were identical."""
    header = [*heads, *(title for title, _, _ in _COLUMNS), "identical"]
    body = [
        [*label, *(_cell(row[key], fmt) for _, key, fmt in _COLUMNS), identical(row)]
        for label, row in zip(labels, rows, strict=True)
    ]
    widths = [max(len(str(c)) for c in column) for column in zip(header, *body, strict=True)]
    text_columns = len(heads)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i < text_columns else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join(line(cells) for cells in [header, *body])


def _basis(group: dict) -> str:
    """Which model a group's predicted speedup comes from, in brackets; "" without one."""
    prediction = group["prediction"]
    return f" ({stats.PREDICTION_NAMES[prediction]})" if prediction else ""


def _outcome_cell(row: dict) -> str:
    """A prompt's outcome: "yes" where identical, else the verdict and the first token
    where any repeat diverged."""
    if row["identical"]:
        return "yes"
    return f"{row['outcome']} at {row['first_divergence']}"


def _outcome_counts(group: dict) -> str:
    """Identical prompts of all, and how many of the rest were near-ties and unexplained
    (and not judged, where some were)."""
    return (
        f"identical {group['identical_prompts']}/{group['prompts']}, near-tie "
        f"{group['near_tie_prompts']}, unexplained {group['unexplained_prompts']}"
        + _not_judged(group)
    )


def _not_judged(group: dict) -> str:
    count = group.get("not_judged_prompts") or 0  # absent from reports made before it
    return f", not judged {count}" if count else ""


def _cell(value: float | None, fmt: str | Callable[[float], str]) -> str:
    """A figure as `fmt` (a format string, or a function) writes it; a dash for none."""
    if value is None:
        return "–"
    return fmt(value) if callable(fmt) else fmt.format(value)


def draw_chart(result: dict) -> Figure:
    """Speedup per category, measured (solid) beside predicted or fitted (hatched), per drafter."""
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
            label = f"{name}: {'measured' if k == 0 else 'predicted / fitted'}"
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
