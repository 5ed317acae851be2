"""The GPU check's report: its tables as Markdown, measured then modelled, the drafting
table by path, the end-to-end runs in a paragraph, the runs at an imposed acceptance; and
its files.
"""

from __future__ import annotations

import json
from pathlib import Path

from assisted.core.settings import DrafterKind
from assisted.models.registry import PAIRS
from lab.gpu_check.paths import GAMMA
from lab.gpu_check.speedup import (
    ACCEPTANCE,
    Pricing,
    acceptance_for,
    geomean,
    modelled_speedup,
)

CODE_KINDS = ("edit-code", "write-code")


def ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.2f}"


def tables(results: dict[str, Pricing | None], device_line: str, bandwidth_bps: float) -> str:
    """The check's two tables, measured then modelled, as Markdown."""
    widest = min((len(p.target.rows) for p in results.values() if p), default=1)
    marks = [k for k in (2, 4, 8, 16) if k <= widest]
    head = " | ".join(f"T({k})÷T(1)" for k in marks)
    lines = [
        device_line,
        "",
        f"| pair | T(1) ms | {head} | drafting ms/token (÷ T(1)) | launch floor ms |"
        " bandwidth floor ms |",
        "|---|--:|" + "--:|" * len(marks) + "--:|--:|--:|",
    ]
    for name, pricing in results.items():
        if pricing is None:
            lines.append(f"| {name} | not measured: the time budget ran out |")
            continue
        rows = pricing.target.rows
        ratios = " | ".join(f"{rows[k - 1] / rows[0]:.2f}" for k in marks)
        draft = (
            "—"
            if pricing.draft_s is None
            else (f"{ms(pricing.draft_s)} ({pricing.draft_s / rows[0]:.2f})")
        )
        floor = pricing.target.read_bytes / bandwidth_bps
        lines.append(
            f"| {name} | {ms(rows[0])} | {ratios} | {draft} | "
            f"{ms(pricing.target.launch_floor_s)} | {ms(floor)} |"
        )
    kinds = sorted({k for table in ACCEPTANCE.values() for k in table})
    lines += [
        "",
        "Modelled speedup (best constant γ), at the per-token acceptance the embedded pair "
        "measured on a CPU per prompt kind; not measured on this device:",
        "",
        "| pair | " + " | ".join(kinds) + " | geomean |",
        "|---|" + "--:|" * (len(kinds) + 1),
    ]
    for name, pricing in results.items():
        alphas = acceptance_for(PAIRS[name])
        if pricing is None or pricing.draft_s is None or not alphas:
            lines.append(f"| {name} | " + " | ".join("—" for _ in kinds) + " | — |")
            continue
        cells, speedups = [], []
        for kind in kinds:
            if kind not in alphas:
                cells.append("—")
                continue
            alpha, drafting = alphas[kind]
            if PAIRS[name].drafter.has_model:
                # It drafts at every step: those that did not were a run's last, where
                # the length limit left nothing to draft.
                drafting = 1.0
            speedup, gamma = modelled_speedup(alpha, pricing.target.rows, pricing.draft_s, drafting)
            speedups.append(speedup)
            cells.append(f"{speedup:.2f}x (γ {gamma})")
        overall = f"{geomean(speedups):.2f}x" if speedups else "—"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {overall} |")
    return "\n".join([*lines, "", *path_table(results)])


def path_speedups(pricing: Pricing, draft_s: float | None) -> dict[str, float] | None:
    """The modelled speedup by prompt kind (best constant γ, every step drafting) with
    `draft_s` a drafted token, at the assistant's CPU-measured acceptance; None without
    a drafting cost."""
    if draft_s is None:
        return None
    alphas = ACCEPTANCE[DrafterKind.ASSISTANT.value]
    rows = pricing.target.rows
    return {kind: modelled_speedup(alpha, rows, draft_s)[0] for kind, (alpha, _) in alphas.items()}


def path_table(results: dict[str, Pricing | None]) -> list[str]:
    """The drafting table: per pair with an assistant model, drafting by path, the capture,
    host synchronisations per draft, and the modelled speedup with each path's cost."""
    lines = [
        f"Drafting by path, drafts of {GAMMA} (`lab.gpu_check.paths`): the lean loop on "
        "a DynamicCache, the same on a static cache, the draft replayed as CUDA graphs; "
        "modelled speedups (not measured) with the loop's and the graphs' cost, geomean of "
        f"the kinds and of the code kinds ({', '.join(CODE_KINDS)}):",
        "",
        "| pair | drafting ms/token: loop · static · graphed (÷ T(1)) | capture s |"
        " host syncs per draft: loop · graphed | modelled, loop | modelled, graphed |"
        " code kinds, loop | code kinds, graphed | self-check (positions judged) |"
        " graphed ms/token by cache | graphs |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|---|---|",
    ]
    for name, pricing in results.items():
        drafting = pricing.drafting if pricing else None
        if drafting is None:
            continue
        t1 = pricing.target.rows[0]
        graphed = "—" if drafting.graphed_s is None else ms(drafting.graphed_s)
        ratio = "—" if drafting.graphed_s is None else f"{drafting.graphed_s / t1:.2f}"
        costs = f"{ms(drafting.loop_s)} · {ms(drafting.static_s)} · {graphed} ({ratio})"
        capture = "—" if drafting.capture_s is None else f"{drafting.capture_s:.2f}"
        syncs = " · ".join(
            "—" if n is None else str(n) for n in (drafting.loop_syncs, drafting.graphed_syncs)
        )
        cells = []
        for kinds in (None, CODE_KINDS):
            for draft_s in (drafting.loop_s, drafting.graphed_s):
                speedups = path_speedups(pricing, draft_s)
                if speedups is None:
                    cells.append("—")
                    continue
                chosen = [v for k, v in speedups.items() if kinds is None or k in kinds]
                cells.append(f"{geomean(chosen):.2f}x")
        check = "—" if drafting.check is None else f"{drafting.check} ({drafting.judged})"
        by_cache = " · ".join(
            f"{capacity}: {ms(seconds)}"
            for capacity, seconds in (drafting.by_cache_s or {}).items()
        )
        lines.append(
            f"| {name} | {costs} | {capture} | {syncs} | {' | '.join(cells)} | {check} "
            f"| {by_cache or '—'} | {drafting.reason} |"
        )
    return lines


def end_to_end_line(result: dict) -> str:
    """The end-to-end check in one paragraph."""
    verdict = "held" if result["held"] else "FAILED"
    return (
        f"End to end ({verdict}): `decoding.run` on {result['pair']}'s shapes, random weights, "
        f"{result['new_tokens']} tokens plain then assisted: output {result['output']}; "
        f"drafting path {result['drafting_path']} "
        f"(expected {result['expected_path']}: {result['drafting_path_reason']}); "
        f"{self_check(result)}; "
        f"{result['graph_replays']} graph replays, {result['drafted']} drafted, "
        f"{result['accepted']} accepted (random weights agree on nothing); drafting "
        f"{ms(result['drafting_s_per_token'])} ms/token; plain {result['plain_tokens_per_s']} "
        f"tok/s, assisted {result['assisted_tokens_per_s']} tok/s; prepared in "
        f"{result['prepare_s']} s (calibration and capture)."
    )


def self_check(result: dict) -> str:
    """A run's graphs' self-check in words, from its JSON-like `result`."""
    if result.get("self_check") is None:
        return "no self-check ran"
    return f"self-check {result['self_check']} ({result['self_check_judged']} positions judged)"


def imposed_lines(result: dict) -> list[str]:
    """The runs measured at an imposed acceptance (`imposed`): a paragraph and a table."""
    verdict = "held" if result["held"] else "FAILED"
    lines = [
        f"Measured at an imposed acceptance ({verdict}): `decoding.run` on {result['pair']}'s "
        f"shapes, random weights, both models peaked so that the target's greedy output is "
        f"known from the plain run, {result['new_tokens']} tokens; the assistant drafts its "
        f"cap at every step on drafting path {result['drafting_path']} "
        f"({result['drafting_path_reason']}; {self_check(result)}) "
        "and its draft is replaced by the known output at each kind's per-token acceptance "
        "measured on a CPU (`speedup.ACCEPTANCE`). The drafts being replaced, this measures "
        "cost at a stated acceptance, not correctness: a wrong replay cannot show here "
        "(that is the self-check's and the end-to-end run's). Plain "
        f"{result['plain_tokens_per_s']} tok/s; speedup = the tokens/s ratio; measured α "
        "within 3 standard errors of the imposed one for its positions:",
        "",
        "| kind | α imposed | α measured (positions, ± tolerance) | assisted tok/s | speedup |"
        " accepted per step | tokens per step | eager assistant passes |"
        " drafts graphed · eager | output |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for kind, run in result["kinds"].items():
        output = "identical" if run["identical"] else "DIFFERS"
        output += ", as imposed" if run["as_imposed"] else ", NOT as imposed"
        lines.append(
            f"| {kind} | {run['imposed_alpha']:.3f} | {run['measured_alpha']:.3f} "
            f"({run['positions']}, ± {run['tolerance']:.3f}) | {run['assisted_tokens_per_s']} | "
            f"{run['speedup']:.2f}x | {run['accepted_per_step']} | {run['tokens_per_step']} | "
            f"{run['eager_assistant_passes']} | {run['graphed_drafts']} · {run['eager_drafts']} "
            f"| {output} |"
        )
    return lines


def write(
    out: Path | None,
    text: str,
    results: dict[str, Pricing | None],
    through: dict | None = None,
    imposed: dict | None = None,
) -> None:
    """The check's Markdown and JSON in `out` (none without it): gpu_check.md, .json, and
    the end-to-end runs' end_to_end.json and the imposed-acceptance runs' imposed.json
    once they ran."""
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.md").write_text(text + "\n", encoding="utf-8")
    report = {
        name: None
        if p is None
        else {
            "rows_s": list(p.target.rows),
            "launch_floor_s": p.target.launch_floor_s,
            "read_bytes": p.target.read_bytes,
            "draft_s": p.draft_s,
            "drafting": p.drafting.to_dict() if p.drafting else None,
        }
        for name, p in results.items()
    }
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    if through is not None:
        (out / "end_to_end.json").write_text(json.dumps(through, indent=1), encoding="utf-8")
    if imposed is not None:
        (out / "imposed.json").write_text(json.dumps(imposed, indent=1), encoding="utf-8")
