"""The shoot-out: every drafter this target has on this device, on one prompt, against one
plain baseline, ranked, and why the winner won.

It is the benchmark (`assisted.bench.measuring.benchmark`) on a single prompt, greedy: the
lanes are its variants, each run alone and in turn on the same warmed models, one plain
run per round as the baseline every lane is set against, the order flipped from round to
round. The lanes follow the registry and the device (`lanes`), never a list written in a
tab: the pair's assistant under `auto` (its default), under Transformers' own defaults
(what `generate(assistant_model=...)` does alone: read from the installed Transformers and
pinned by a test) and under its heuristic schedule, at a constant γ of the pair's cap, at
each other precision the device runs, prompt lookup, and early exit where the registry
offers it for this target.

After the runs, `rank` orders the lanes by measured speedup (the median run's tokens per
second over the median plain run's) and says where it cannot tell them apart: each lane's
speedup comes with the range of its rounds' speedups, each round's lane run over that
round's plain run (`speedup_range`), and a lane whose range overlaps the winner's is
`tied` with it. Rounds on a shared machine differ by more than a few percent, so two lanes
a few percent apart in one shoot-out are a tie unless their rounds say otherwise. Per lane
it also adds what explains the speedup: acceptance, tokens per step, drafting cost per
token (as a share of a plain step), the oracle's best for its drafter and the share
reached, and the output's verdict.
The γ sweep replays a constant γ of 1 to the cap for the two best drafters
(`assisted.analysis.oracle.constant_schedule`), the assistant's drafts ending at the pair's
confidence threshold as a constant lane's do and, past their first wrong token, going on as
the lane's own drafts went on past one (priced at γ there, the sweep read the γ = 8 lane at
0.80–0.90 of its measured speed on four prompts), priced as the oracle is by the costs the
steps measured, the rows of T(k) a lane never verified from every lane's runs
(`assisted.analysis.oracle`): modelled, not measured, and labelled so. The runs are
the benchmark's; torch is imported where they run.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
from collections.abc import Iterator, Sequence

from assisted.analysis import oracle, stats
from assisted.bench.measuring import Finished, Progress, Streamed, benchmark
from assisted.bench.planning import Variant
from assisted.bench.reporting import Run, report
from assisted.core.record import RunRecord, rounded
from assisted.core.settings import (
    DrafterKind,
    DraftSettings,
    Example,
    RunSettings,
    SettingsError,
    assistant_precision,
)
from assisted.models.pairs import LoadedPair
from assisted.models.registry import PAIRS, PairSpec

MAX_LANES = 7
MAX_NEW_TOKENS = 128  # with the lanes, a shoot-out's budget: 7 × 3 × 128 tokens at most
REPEATS = 3
MAX_REPEATS = 5
# What `generate(assistant_model=...)` does where neither the checkpoint nor the caller
# sets a draft: Transformers 5.23's defaults (`GenerationConfig`), pinned by
# tests/engine/test_transformers_facts.py; the assistant in the pair's own dtype.
TRANSFORMERS_DEFAULTS = DraftSettings(
    num_assistant_tokens=20, schedule="constant", confidence_threshold=0.4
)
CPU_PRECISIONS = ("none", "int8", "int4-wo")  # what the CPU's kernels run (models.quantize)
QUESTION = "prompt"


def lanes(pair: LoadedPair, registry: dict[str, PairSpec] = PAIRS) -> list[Variant]:
    """Every lane that applies to `pair`'s target on its device (the module's note)."""
    return lanes_for(pair.spec, pair.device.type, pair.dtype_name, registry)


def lanes_for(
    spec: PairSpec, device_type: str, dtype_name: str, registry: dict[str, PairSpec] = PAIRS
) -> list[Variant]:
    """`lanes` of a pair not loaded yet, on a device of `device_type` ("cpu", "cuda") in
    `dtype_name`: what a request counts before its GPU call (the lanes price its time)."""
    found = []
    if spec.drafter.has_model:
        kind, draft = spec.drafter, spec.draft
        named = "" if kind is DrafterKind.ASSISTANT else f"{kind} "  # the assistant is implied
        if kind.auto_capable:
            found.append(Variant(f"{named}auto", kind, _auto(draft)))
        found.append(Variant("Transformers' defaults", kind, TRANSFORMERS_DEFAULTS))
        heuristic = dataclasses.replace(draft, schedule="heuristic", assistant_quant="none")
        found.append(Variant(f"{named}heuristic", kind, heuristic))
        cap = dataclasses.replace(draft, schedule="constant")
        found.append(Variant(f"{named}γ = {draft.num_assistant_tokens}", kind, cap))
        if kind.auto_capable and device_type == "cpu":
            chosen = assistant_precision(draft.assistant_quant, kind, device_type, dtype_name)
            for precision in CPU_PRECISIONS:
                if precision != chosen:
                    other = dataclasses.replace(_auto(draft), assistant_quant=precision)
                    shown = dtype_name if precision == "none" else precision
                    found.append(Variant(f"{named}auto ({shown})", kind, other))
    lookup = _sibling(spec, registry, DrafterKind.PROMPT_LOOKUP)
    lookup_draft = lookup.draft if lookup else DraftSettings(schedule="auto")
    found.append(Variant("prompt lookup", DrafterKind.PROMPT_LOOKUP, lookup_draft))
    early = _sibling(spec, registry, DrafterKind.EARLY_EXIT)
    if early is not None and spec.drafter is not DrafterKind.EARLY_EXIT:
        found.append(Variant("early exit", DrafterKind.EARLY_EXIT, early.draft))
    return found[:MAX_LANES]


def check(settings: RunSettings, repeats: int, chosen: Sequence[Variant] | None = None) -> None:
    """Refuse a shoot-out past its budget, or one that samples (lanes race greedy); the
    lanes too where `chosen` (None: before a pair is loaded to offer them)."""
    if settings.sample:
        raise SettingsError("a shoot-out races greedy runs: choose greedy decoding")
    if settings.max_new_tokens > MAX_NEW_TOKENS:
        raise SettingsError(
            f"a shoot-out runs at most {MAX_NEW_TOKENS} new tokens a lane, "
            f"not {settings.max_new_tokens}"
        )
    if not 1 <= repeats <= MAX_REPEATS:
        raise SettingsError(f"a shoot-out runs 1 to {MAX_REPEATS} rounds, not {repeats}")
    if chosen is not None and not chosen:
        raise SettingsError("choose at least one lane")
    if chosen is not None and len(chosen) > MAX_LANES:
        raise SettingsError(f"a shoot-out races at most {MAX_LANES} lanes, not {len(chosen)}")


def shootout(
    pair: LoadedPair,
    prompt: str,
    settings: RunSettings,
    chosen: Sequence[Variant] | None = None,
    repeats: int = REPEATS,
    stop: threading.Event | None = None,
    per_step: bool = False,
) -> Iterator[Progress | Streamed | dict]:
    """Race `chosen` (default: every lane) on `prompt` against one plain baseline: the
    benchmark's Progress and each run's steps as they happen, then the ranking (`rank`;
    each lane's runs with their `per_step` only where `per_step` asks). Setting `stop` ends
    the run in flight after its step, and the ranking covers the rounds that finished."""
    chosen = list(lanes(pair) if chosen is None else chosen)
    check(settings, repeats, chosen)
    example = Example(QUESTION, "shoot-out", prompt)
    runs: list[Run] = []
    finished = None
    for item in benchmark(pair, [example], chosen, settings, repeats, stop=stop, steps=True):
        if isinstance(item, Progress) and item.run is not None:
            runs.append(item.run)
        if isinstance(item, Finished):
            finished = item
        else:
            yield item
    if finished is None:  # stopped: the rounds that finished, each paired with its plain run
        info = {"pair": pair.spec.name, "device": str(pair.device), "dtype": pair.dtype_name}
        result = report(runs, chosen, info, settings, repeats)
    else:
        result, runs = finished.report, finished.runs
    yield rank(pair, result, runs, chosen, stopped=finished is None, per_step=per_step)


def rank(
    pair: LoadedPair,
    result: dict,
    runs: Sequence[Run],
    chosen: Sequence[Variant],
    stopped: bool,
    per_step: bool = False,
) -> dict:
    """The shoot-out's JSON: the lanes ranked by measured speedup, each with its figures
    and its median repeat's comparison (the CLI's `--json` schema, each run's `per_step`
    only with `per_step`: hundreds of kB a lane on long runs), the race, the γ sweep and
    why the winner won."""
    from assisted.engine.decoding import report as comparison_report

    plain = [r.record for r in runs if r.drafter is None]
    # A stopped shoot-out can leave a lane's run of a round whose plain run never ran: only
    # the rounds paired with their plain run count, as in the benchmark's report.
    rounds = {r.repeat for r in runs if r.drafter is None}
    runs = [r for r in runs if r.repeat in rounds]
    rows = {row["drafter"]: row for row in result["prompts"]}
    kinds = {variant.name: variant.drafter for variant in chosen}
    schedules = {variant.name: variant.draft.schedule for variant in chosen}
    step_s = _plain_step_s(plain)
    pooled = [r.record for r in runs]  # every lane's steps price the target's T(k)
    ranked = []
    for name, row in rows.items():
        mine = [r for r in runs if r.drafter == name]
        median = _median_run(mine)
        base = next(r.record for r in runs if r.drafter is None and r.repeat == median.repeat)
        per_token = _median([stats.drafting_s_per_token(r.record) for r in mine])
        if not kinds[name].times_drafting:
            per_token = 0.0  # a lookup's n-gram search runs whatever is chosen
        by_round = round_speedups(mine, runs)
        ranked.append(
            {
                "lane": name,
                "drafter_kind": kinds[name],
                "schedule": schedules[name],
                "speedup": row["speedup"],
                "speedup_rounds": by_round,
                "speedup_range": [min(by_round), max(by_round)] if by_round else None,
                "acceptance_rate": row["acceptance_rate"],
                "tokens_per_step": row["tokens_per_step"],
                "drafting_s_per_token": rounded(per_token, 6),
                "drafting_cost_ratio": rounded(per_token / step_s)
                if per_token is not None and step_s
                else None,
                "oracle_speedup": row["oracle_speedup"],
                "measured_share": row["measured_share"],
                "outcome": row["outcome"],
                "repeats": row["repeats"],
                "comparison": comparison_report(
                    pair, base, median.record, steps=per_step, pooled=pooled
                ),
            }
        )
    ranked.sort(key=lambda lane: -(lane["speedup"] or 0.0))
    mark_ties(ranked)
    return {
        "pair": result["pair"],
        "device": result["device"],
        "dtype": result["dtype"],
        "settings": result["settings"],
        "stopped": stopped,
        "plain": {
            "runs": len(plain),
            "tokens_per_s": rounded(_median([stats.tokens_per_s(r) for r in plain])),
            "step_s": rounded(step_s, 6),
        },
        "lanes": ranked,
        "winner": ranked[0]["lane"] if ranked else None,
        "why": why(ranked),
        "race": race(plain, runs),
        "sweep": sweep(ranked, runs, pair.spec.draft.confidence_threshold),
    }


def round_speedups(mine: Sequence[Run], runs: Sequence[Run]) -> list[float]:
    """A lane's speedup in each round that ran whole, rounds in order: its run's tokens per
    second over its round's plain run's."""
    plain = {r.repeat: stats.tokens_per_s(r.record) for r in runs if r.drafter is None}
    return [
        rounded(stats.tokens_per_s(r.record) / plain[r.repeat])
        for r in sorted(mine, key=lambda run: run.repeat)
        if plain.get(r.repeat) and stats.tokens_per_s(r.record) is not None
    ]


def mark_ties(ranked: Sequence[dict]) -> None:
    """Mark, in place, each lane after the winner whose rounds' range reaches into the
    winner's (`tied`): the shoot-out cannot rank the two (the module's note)."""
    head = ranked[0]["speedup_range"] if ranked else None
    for place, lane in enumerate(ranked):
        own = lane["speedup_range"]
        lane["tied"] = bool(place and head and own and own[1] >= head[0])


def why(ranked: Sequence[dict]) -> str | None:
    """Why the winner won, in one sentence drawn from the figures: the first two lanes'
    acceptance and drafting cost, and the lanes its rounds cannot tell from it."""
    if not ranked:
        return None
    parts = [_reason(lane) for lane in ranked[:2]]
    head = ranked[0]
    if (head["speedup"] or 0.0) < 1.0:
        return f"No lane beat plain decoding: {'; '.join(parts)}."
    tied = [lane["lane"] for lane in ranked if lane.get("tied")]
    said = f"{head['lane']} won at {head['speedup']:.2f}x: " + "; ".join(parts) + "."
    if tied:
        said += f" Tied with it within the rounds' ranges: {', '.join(tied)}."
    return said


def race(plain: Sequence[RunRecord], runs: Sequence[Run]) -> dict[str, list[list[float]]]:
    """Tokens over time for every lane, plain included: each lane's median repeat, as
    [seconds, tokens so far] at each step."""
    lanes_run: dict[str | None, list[Run]] = {}
    for run in runs:
        lanes_run.setdefault(run.drafter, []).append(run)
    curves = {}
    for name, mine in lanes_run.items():
        record, total = _median_run(mine).record, 0
        points = []
        for step in record.steps:
            total += len(step.token_ids)
            points.append([rounded(step.t_s), total])
        curves["plain" if name is None else name] = points
    return curves


def sweep(ranked: Sequence[dict], runs: Sequence[Run], threshold: float = 0.0) -> dict:
    """Speedup against a constant γ of 1 to the cap for the two best drafters that a
    record's hindsight can replay (an assistant or the lookup), priced by the costs the
    steps measured (each lane's drafting, every run's T(k): the module's note), the
    assistant's drafts ending at the constant lanes' confidence `threshold` as theirs do;
    `auto` beside them as measured."""
    pooled = [r.record for r in runs]
    curves = {}
    for lane in ranked:
        if len(curves) == 2:
            break
        mine = _median_run([r for r in runs if r.drafter == lane["lane"]])
        median = mine.record
        if median.hindsight is None:
            continue
        paired = (r.record for r in runs if r.drafter is None and r.repeat == mine.repeat)
        own = [run for run in (next(paired, None), median) if run is not None]
        h = oracle.priced(median.hindsight, own, pooled)
        source = (
            DrafterKind.ASSISTANT if h.assistant_runs is not None else DrafterKind.PROMPT_LOOKUP
        )
        if lane["drafter_kind"] is DrafterKind.PROMPT_LOOKUP:
            source = DrafterKind.PROMPT_LOOKUP
        found = lane["comparison"]["oracle"]
        if not found or found.get("plain_modelled_s") is None:
            continue
        output, one_row = median.token_ids, dict(h.verify_s)[1]
        prefill = found["plain_modelled_s"] - len(output) * one_row
        runs_on = oracle.runs_on_past_a_rejection(median, h, threshold)
        curves[lane["lane"]] = {
            str(gamma): rounded(
                found["plain_modelled_s"]
                / (
                    prefill
                    + oracle.seconds(
                        oracle.constant_schedule(
                            h, output, median.prompt_tokens, gamma, source, threshold, runs_on
                        )
                    )
                )
            )
            for gamma in range(1, h.cap + 1)
        }
    auto = {lane["lane"]: lane["speedup"] for lane in ranked if lane["schedule"] == "auto"}
    return {
        "basis": (
            "replayed from each lane's own run, priced by the costs its steps measured "
            "(and other lanes' for lengths it never verified): modelled, not measured"
        ),
        "curves": curves,
        "auto_measured": auto,
    }


def render(result: dict) -> str:
    """The ranking as a card for people (the CLI's)."""
    lines = [
        f"Shoot-out on {result['pair']} ({result['device']}, {result['dtype']}): "
        f"{result['settings']['max_new_tokens']} new tokens, greedy, one plain baseline "
        f"({result['plain']['runs']} runs, {_cell(result['plain']['tokens_per_s'], '{:.2f}')} "
        "tok/s)" + (" — stopped: the rounds that finished" if result["stopped"] else ""),
        f"{'':3}{'lane':30}{'speedup':>9}{'rounds':>13}{'accepted':>10}{'tok/step':>10}"
        f"{'c':>7}{'oracle':>8}{'share':>7}  output",
    ]
    for place, lane in enumerate(result["lanes"], start=1):
        share = lane["measured_share"]
        lines.append(
            f"{place:<3}{lane['lane'][:29]:30}{_cell(lane['speedup'], '{:.2f}x'):>9}"
            f"{range_text(lane):>13}"
            f"{_cell(lane['acceptance_rate'], '{:.0%}'):>10}"
            f"{_cell(lane['tokens_per_step'], '{:.2f}'):>10}"
            f"{_cell(lane['drafting_cost_ratio'], '{:.2f}'):>7}"
            f"{_cell(lane['oracle_speedup'], '{:.2f}x'):>8}"
            f"{'—' if share is None else oracle.share_text(share):>7}  {lane['outcome']}"
        )
    if result["why"]:
        lines.append(result["why"])
    return "\n".join(lines)


def range_text(lane: dict) -> str:
    """A lane's rounds' range, "1.62–1.94x", with "=" before it where it ties the winner."""
    low_high = lane.get("speedup_range")
    if not low_high:
        return "—"
    return f"{'= ' if lane.get('tied') else ''}{low_high[0]:.2f}–{low_high[1]:.2f}x"


def _reason(lane: dict) -> str:
    accepted = lane["acceptance_rate"]
    if accepted is None:
        return f"{lane['lane']}: drafted nothing, so it ran as plain decoding"
    ratio = lane["drafting_cost_ratio"]
    if lane["drafting_s_per_token"] == 0.0:
        cost = "drafting free"
    elif ratio is None:
        cost = "drafting not timed"
    else:
        cost = f"each drafted token at {ratio:.2f} of a target step"
    return f"{lane['lane']}: {accepted:.0%} accepted, {cost}"


def _auto(draft: DraftSettings) -> DraftSettings:
    return dataclasses.replace(draft, schedule="auto")


def _sibling(spec: PairSpec, registry: dict[str, PairSpec], kind: DrafterKind) -> PairSpec | None:
    """The registry's pair drafting as `kind` for `spec`'s target, if any."""
    return next(
        (s for s in registry.values() if s.target == spec.target and s.drafter is kind), None
    )


def _plain_step_s(plain: Sequence[RunRecord]) -> float | None:
    """A plain step's seconds: the median over the plain runs of their median step."""
    medians = [statistics.median(stats.step_s(r)[1:]) for r in plain if len(r.steps) > 1]
    return statistics.median(medians) if medians else None


def _median_run(runs: Sequence[Run]) -> Run:
    """The repeat whose tokens per second is the median (the lower middle of an even count)."""
    ordered = sorted(runs, key=lambda r: stats.tokens_per_s(r.record))
    return ordered[(len(ordered) - 1) // 2]


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _cell(value: float | None, fmt: str) -> str:
    return "—" if value is None else fmt.format(value)
