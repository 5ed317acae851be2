"""What the Benchmark tab shows, as plain strings and rows: what a benchmark costs on
the device, the plan and its time estimate before a run, the progress line, and the
report's tables and headline. Imports neither torch nor gradio.

Every figure comes from `assisted.bench.report(...)`; this module only formats.

Its request (`BenchmarkRequest`): what each of its GPU calls (`benchmark.gpu`) takes, a
frozen dataclass of plain values, as every call's request is (`assisted.ui.requests`), and
the prompts split into calls (`split`).

Its outputs, by name, in the order of the /benchmark endpoint's (`BenchmarkOutputs`, as
`compare.format.CompareOutputs` orders Compare's).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from assisted.analysis import sampling, stats
from assisted.analysis.sampling import CheckSettings
from assisted.bench.planning import Variant
from assisted.core.settings import WARMUP_TOKENS, Example, RunSettings
from assisted.policy.learnt import LearntSnapshot
from assisted.ui.gpu_time import CHECK_SAMPLE_TOKENS, GpuTimes, Pace
from assisted.ui.numbers import number, percent
from assisted.ui.requests import PairPlace, StopFlag

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


class BenchmarkOutputs(NamedTuple):
    """The Benchmark tab's outputs: the /benchmark endpoint's, in this order. The tables,
    headline, chart and report come with the last value; until then only `status` moves."""

    status: str  # Markdown
    categories: pd.DataFrame  # "Per category" (`benchmark.format.CATEGORY_HEADERS`)
    prompts: pd.DataFrame  # "Per prompt" (`benchmark.format.PROMPT_HEADERS`)
    overall: str  # Markdown
    chart: Figure | None  # "Speedup per category" (`assisted.bench.draw_chart`)
    report: dict | None  # `assisted.bench.report(...)`, what `python -m assisted.bench` prints


# The guess before a pair's pace is measured (`assisted.ui.gpu_time`): the embedded pair on a
# 2-core CPU, where a plain run of 128 new tokens takes about a minute.
CPU_SECONDS_PER_TOKEN = 0.5

CATEGORY_HEADERS = [
    "category",
    "drafter",
    "prompts",
    "speedup",
    "acceptance rate",
    "tokens per step",
    "predicted / fitted speedup",
    "identical",
]
PROMPT_HEADERS = [
    "category",
    "prompt",
    "drafter",
    "plain tok/s",
    "assisted tok/s",
    "speedup",
    "acceptance rate",
    "tokens per step",
    "predicted / fitted speedup",
    "identical",
]


def device_note(device_type: str, zerogpu: bool) -> str:
    """What the benchmark costs where the app runs: the time on a CPU, and who waits."""
    if zerogpu:
        return (
            "On ZeroGPU each GPU call has a time limit, so a long benchmark runs as several "
            "calls, one after the other; other visitors' requests get GPUs of their own."
        )
    slow = "On a CPU the full set takes many minutes: start with one category. "
    busy = "The device runs one request at a time: the other tabs wait until it ends."
    return (slow if device_type == "cpu" else "") + busy


def bench_runs(prompts: int, drafters: int, repeats: int) -> int:
    """Timed runs of a benchmark: per prompt and repeat, one plain run and one per drafter."""
    return prompts * repeats * (1 + drafters)


def bench_estimate_s(
    prompts: int,
    drafters: int,
    repeats: int,
    max_new_tokens: int,
    s_per_token: float = CPU_SECONDS_PER_TOKEN,
) -> float:
    """Seconds a benchmark takes at `s_per_token` (the pair's measured pace, or the guess):
    the timed runs plus each prompt's short untimed warm-up in every mode, every token at the
    plain pace. A rough figure, for a warning."""
    runs = bench_runs(prompts, drafters, repeats)
    warmup_tokens = prompts * (1 + drafters) * min(WARMUP_TOKENS, max_new_tokens)
    return (runs * max_new_tokens + warmup_tokens) * s_per_token


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{round(seconds / 60)} min"


def _per_token(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 0.1 else f"{seconds * 1000:.2g} ms"


def _estimate(prompts: int, drafters: int, repeats: int, tokens: int, pace: Pace | None) -> str:
    """ "about N min", with where the pace per token comes from."""
    if pace is None:
        estimate = bench_estimate_s(prompts, drafters, repeats, tokens)
        return (
            f"about **{_duration(estimate)}**, but no run has been measured on this pair yet: "
            f"that is a rough guess of ≈{CPU_SECONDS_PER_TOKEN} s per token, the embedded "
            "pair on a 2-core CPU (far less on a GPU). A comparison on this pair measures it"
        )
    estimate = bench_estimate_s(prompts, drafters, repeats, tokens, pace.s_per_token)
    return (
        f"about **{_duration(estimate)}** at ≈{_per_token(pace.s_per_token)} per token, "
        f"{pace.source}"
    )


def bench_plan_markdown(
    prompts: int, drafters: int, repeats: int, max_new_tokens: int, pace: Pace | None = None
) -> str:
    """What a benchmark will run and about how long that takes at the pair's `pace`, before
    it starts."""
    if prompts < 1 or drafters < 1:
        return "Choose at least one category and one drafter."
    runs = bench_runs(prompts, drafters, repeats)
    return (
        f"**{runs} timed runs** ({prompts} prompt{'s' if prompts > 1 else ''} × {repeats} "
        f"repeat{'s' if repeats > 1 else ''} × (plain + {drafters} drafter"
        f"{'s' if drafters > 1 else ''})) of up to {max_new_tokens} new tokens, plus a short "
        f"warm-up per prompt: {_estimate(prompts, drafters, repeats, max_new_tokens, pace)}."
    )


def bench_progress_markdown(done: int, total: int, label: str, elapsed_s: float) -> str:
    """The status line while a benchmark runs: "run k of n: <label>", with time left.

    `label` names the run just finished, or the untimed warm-up starting (`assisted.bench`'s
    Progress events)."""
    timing = f"{_duration(elapsed_s)} so far"
    if done:
        timing += f", about {_duration(elapsed_s / done * (total - done))} left"
    if done == 0 or label.endswith("warm-up"):
        return f"**{done} of {total} runs done** · now: {label} (untimed)… · {timing}"
    if done == total:
        return f"**All {total} runs done** in {_duration(elapsed_s)}: computing the report…"
    return f"**Run {done} of {total} done**: {label} · {timing}"


def _basis(group: dict) -> str:
    """Which model a group's predicted speedup comes from, in brackets; "" without one."""
    prediction = group["prediction"]
    return f" ({stats.PREDICTION_NAMES[prediction]})" if prediction else ""


def _identical(row: dict) -> str:
    """ "yes", or the prompt's outcome (its most worrying repeat's verdict) and the first
    token where a repeat diverged."""
    if row.get("identical"):
        return "yes"
    divergence = row.get("first_divergence")
    return f"no: {row['outcome']}" + ("" if divergence is None else f" at token {divergence}")


def _identical_prompts(group: dict) -> str:
    """Identical prompts of all, and how the others diverged."""
    not_judged = group.get("not_judged_prompts") or 0  # absent from reports written without it
    return (
        f"{group['identical_prompts']}/{group['prompts']} (near-tie "
        f"{group['near_tie_prompts']}, unexplained {group['unexplained_prompts']}"
        + (f", not judged {not_judged})" if not_judged else ")")
    )


def bench_category_rows(report: dict) -> list[list]:
    """A row per category and drafter, from `assisted.bench.report(...)`."""
    rows = []
    for drafter, entry in report.get("drafters", {}).items():
        for category, group in entry["categories"].items():
            rows.append(
                [
                    category,
                    drafter,
                    group["prompts"],
                    number(group["speedup"], 2, "×"),
                    percent(group["acceptance_rate"]),
                    number(group["tokens_per_step"], 2),
                    number(group["predicted_speedup"], 2, "×"),
                    _identical_prompts(group),
                ]
            )
    return rows


def bench_prompt_rows(report: dict) -> list[list]:
    """A row per prompt and drafter, from `assisted.bench.report(...)`."""
    return [
        [
            row["category"],
            row["question_id"],
            row["drafter"],
            number(row["plain_tokens_per_s"], 1),
            number(row["assisted_tokens_per_s"], 1),
            number(row["speedup"], 2, "×"),
            percent(row["acceptance_rate"]),
            number(row["tokens_per_step"], 2),
            number(row["predicted_speedup"], 2, "×"),
            _identical(row),
        ]
        for row in report.get("prompts", [])
    ]


def bench_overall_markdown(report: dict) -> str:
    """The headline per drafter: the geometric-mean speedup over all prompts."""
    settings = report["settings"]
    lines = [
        f"**{report['pair']}** on {report['device']} · {report['dtype']} · greedy, "
        f"{settings['max_new_tokens']} new tokens, {settings['repeats']} "
        f"repeat{'s' if settings['repeats'] > 1 else ''}. Speedup = median assisted tokens/s "
        "÷ median plain tokens/s over the repeats; a category's is the median of its prompts'."
    ]
    for drafter, entry in report.get("drafters", {}).items():
        overall = entry["overall"]
        lines.append(
            f"**Overall, {drafter}: {number(overall['speedup_geomean'], 2, '×')}** "
            f"(geometric mean over {overall['prompts']} prompt"
            f"{'s' if overall['prompts'] != 1 else ''}; median "
            f"{number(overall['speedup_median'], 2, '×')}) · "
            f"{stats.speedup_word(overall['prediction'])} "
            f"{number(overall['predicted_speedup'], 2, '×')}{_basis(overall)} · acceptance rate "
            f"{percent(overall['acceptance_rate'])} · "
            f"{number(overall['tokens_per_step'], 2)} tokens per step · identical "
            f"{_identical_prompts(overall)}"
        )
    if report.get("sampling_check"):
        lines.append(f"**Sampling check**: {sampling.sentence(report['sampling_check'])}")
    return "\n\n".join(lines)


def bench_warning(
    prompts: int, drafters: int, repeats: int, max_new_tokens: int, pace: Pace | None = None
) -> str:
    """The toast shown as a benchmark starts (plain text)."""
    runs = bench_runs(prompts, drafters, repeats)
    if pace is None:
        estimate = bench_estimate_s(prompts, drafters, repeats, max_new_tokens)
        guess = f"≈{CPU_SECONDS_PER_TOKEN} s per token, a guess: none measured on this pair yet"
        how_long = f"about {_duration(estimate)} at {guess}"
    else:
        estimate = bench_estimate_s(prompts, drafters, repeats, max_new_tokens, pace.s_per_token)
        how_long = f"about {_duration(estimate)} at the measured pace"
    return (
        f"{runs} timed runs of up to {max_new_tokens} new tokens: {how_long}. The device is "
        "busy until it finishes; Stop ends it within one step, without a report."
    )


@dataclass(frozen=True)
class BenchmarkRequest:
    """One GPU call of a benchmark: `examples`, each `repeats` times plain and with each of
    `variants`, under `settings`. `acceptance`: what the calls before it left (a benchmark
    split into several calls; None starts from none). `check`: the sampling check after the
    timed runs (`assisted.bench.sampling_check`); None runs none."""

    pair: PairPlace
    examples: tuple[Example, ...]
    variants: tuple[Variant, ...]
    settings: RunSettings
    repeats: int
    stop: StopFlag
    acceptance: LearntSnapshot | None = None
    check: CheckSettings | None = None

    def timed_tokens(self) -> tuple[int, int]:
        """The new tokens the call times: each prompt `repeats` times plain and with each
        variant, and the sampling check's samples as CHECK_SAMPLE_TOKENS assisted tokens
        each."""
        tokens = len(self.examples) * self.repeats * self.settings.max_new_tokens
        checking = self.check.draws() * CHECK_SAMPLE_TOKENS if self.check is not None else 0
        return tokens, tokens * len(self.variants) + checking

    def drafting_cap(self) -> int:
        """The longest of the variants' drafts."""
        caps = [variant.draft.num_assistant_tokens for variant in self.variants]
        return max(caps, default=self.pair.spec.draft.num_assistant_tokens)


def split(request: BenchmarkRequest, times: GpuTimes, preloaded: bool) -> list[BenchmarkRequest]:
    """`request` as ZeroGPU calls: its prompts in order, as many to a call as the measured
    pace lets one call time within the limit (`times.max_s`), and at least one. The
    sampling check runs in the last call: one of its own, with no prompts, where it does
    not fit beside the last prompts."""
    calls: list[list[Example]] = []

    def fits(prompts: list[Example], check: CheckSettings | None = None) -> bool:
        call = dataclasses.replace(request, examples=tuple(prompts), check=check)
        return times.estimate(call, preloaded).asked_s <= times.max_s

    for example in request.examples:
        if calls and fits([*calls[-1], example]):
            calls[-1].append(example)
        else:
            calls.append([example])
    if request.check is not None and calls and not fits(calls[-1], request.check):
        calls.append([])
    last = len(calls) - 1
    return [
        dataclasses.replace(
            request, examples=tuple(prompts), check=request.check if number == last else None
        )
        for number, prompts in enumerate(calls)
    ]
