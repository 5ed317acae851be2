"""`python -m lab.gpu_check.replays --out DIR`: the one command for a lent GPU
(about 3 minutes on an H100 or H200, at most 6), which says whether the assistant's CUDA
graphs replay right on it, what they cost, and what they buy.

On the Space's default GPU pair's shapes (`end_to_end.PAIR`, random weights), in order:
- **the runs at an imposed acceptance** (`imposed.run`): the product's path end to end,
  its graphs captured and self-checked as a Space captures them, and the speedup at each
  prompt kind's CPU-measured acceptance, with the self-check's verdict, the positions it
  judged and its largest probability gap;
- **each cache's replays against eager passes**, the assistant alone, peaked (`models.
  peaked`) and its output layer scaled by `SOFTEN`, so that its top probability sits well
  below 1 (where a last bit shows) and far above its runner-up (so that every position is
  judged): per cache and draft length, after the probe and near the cache's end, the
  self-check's own comparison (`graph_check.replays`: two replays against each other,
  and against the eager draft, its ids to a near-tie and its probabilities within the
  dtype's bound, the positions judged, the largest gap and where), two eager drafts of the
  cap against each other (the eager path's own determinism), and the replays' seconds.

It writes one JSON (graphs_check.json under `--out`) and prints one table, a row per cache,
under a paragraph with the verdict and the speedups. On a CPU (`--tiny`, the tests) there
are no graphs to compare, and it says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from assisted.core.settings import DrafterKind
from assisted.engine.drafters import draft_graphs
from assisted.engine.drafters.static_draft import (
    DraftGraphs,
    eager_draft,
    near_the_end,
    replays,
    same,
    tolerance,
)
from assisted.models.registry import PAIRS
from lab.gpu_check import end_to_end, imposed
from lab.gpu_check.architectures import ARCHITECTURES
from lab.gpu_check.models import build, free, peaked, toy
from lab.gpu_check.speedup import ACCEPTANCE

SOFTEN = 0.7  # the peaked head's scale: a top probability near 0.6–0.9 on the 0.5B's width
PROBE = 32  # the probe's ids, as a preparation's warm-up prefix is about as long
JSON_NAME = "graphs_check.json"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m lab.gpu_check.replays", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens of each run")
    kinds = list(ACCEPTANCE[DrafterKind.ASSISTANT.value])
    parser.add_argument("--kinds", default=",".join(kinds), help="comma list of prompt kinds")
    parser.add_argument("--tiny", action="store_true", help="toy widths (a CPU test)")
    parser.add_argument("--out", type=Path, help=f"a folder for {JSON_NAME}")
    args = parser.parse_args(argv)
    asked = [kind for kind in args.kinds.split(",") if kind]
    if unknown := sorted(set(asked) - set(kinds)):
        parser.error(f"unknown kinds: {', '.join(unknown)}; known: {', '.join(kinds)}")
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    started = time.monotonic()
    result = {"device": _device_name(device), "dtype": args.dtype, "tiny": args.tiny}
    result["imposed"] = imposed.run(device, dtype, args.tiny, args.tokens, asked)
    _progress("imposed", started)
    result["caches"] = caches(device, dtype, args.tiny)
    _progress("caches", started)
    result["seconds"] = round(time.monotonic() - started, 1)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / JSON_NAME).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print("\n".join(table(result)))


def caches(device: torch.device, dtype: torch.dtype, tiny: bool) -> dict:
    """The assistant's graphs captured as the product captures them, and each cache's
    replays against eager passes (the module's note)."""
    spec = PAIRS[end_to_end.PAIR]
    architecture = ARCHITECTURES[spec.assistant]
    model = build(toy(architecture) if tiny else architecture, device, dtype)
    try:
        peaked(model, end_to_end.MARKERS, end_to_end.SEED)
        with torch.no_grad():
            head = model.get_output_embeddings()
            head.weight.mul_(SOFTEN)
        cap = spec.draft.num_assistant_tokens
        vocab = model.config.get_text_config().vocab_size - end_to_end.MARKERS
        generator = torch.Generator().manual_seed(end_to_end.SEED)
        probe = torch.randint(0, vocab, (1, PROBE), generator=generator).to(device)
        capture_s = draft_graphs.capture(model, cap, probe)
        outcome = draft_graphs.outcome_of(model)
        verdict = outcome.verdict if outcome is not None else None
        found = {
            "capture_s": None if capture_s is None else round(capture_s, 3),
            "reason": draft_graphs.for_run(model, PROBE + 1, cap)[1],
            "check": verdict.check if verdict else None,
            "judged": verdict.judged if verdict else None,
            "gap": verdict.gap if verdict else None,
            "gap_at": verdict.gap_at if verdict else None,
            "by_cache": [],
        }
        if outcome is None or outcome.graphs is None:
            return found
        margin = tolerance(model)
        for graphs in outcome.graphs:
            found["by_cache"].append(_cache(graphs, probe, margin))
        return found
    finally:
        del model
        free(device)


def _cache(graphs: DraftGraphs, probe: torch.Tensor, margin: float) -> dict:
    """One cache's comparisons, by context and draft length (`graph_check.replays`, the
    self-check's own), beside two eager drafts of the cap against each other; and its
    replays' seconds."""
    state, cap = graphs.state, graphs.cap
    contexts = {"after the probe": probe}
    if (filled := near_the_end(state.capacity, cap, probe)) is not None:
        contexts["near the end"] = filled
    rows = []
    with torch.inference_mode():
        for name, ids in contexts.items():
            length, pair = ids.shape[1] - 2, ids[0, -2:]
            state.rewind(0)
            state.feed(ids[:, :length])
            first, second = (eager_draft(state, length, pair, cap, margin)[0] for _ in range(2))
            eager = {
                "eager_equal": same(first, second),
                "eager_gap": float((first[1] - second[1]).abs().nan_to_num(0.0).max()),
            }
            for found in replays(graphs, length, pair, range(1, cap + 1), margin):
                rows.append(
                    {
                        "context": name,
                        "gamma": found.gamma,
                        **eager,
                        "agrees": not found.wrong,
                        "wrong": found.wrong,
                        "judged": found.judged,
                        "gap": found.gap.size,
                        "gap_at": found.gap.at,
                        "replays_equal": found.differs_at is None,
                    }
                )
        state.rewind(0)
        state.feed(probe[:, :-2])
    return {
        "capacity": state.capacity,
        "replay_s": {str(gamma): seconds for gamma, seconds in (graphs.replay_s or {}).items()},
        "rows": rows,
    }


def table(result: dict) -> list[str]:
    """The paragraph and the table, a row per cache (the module's note)."""
    run, found = result["imposed"], result["caches"]
    speedups = ", ".join(
        f"{kind} {figures['speedup']:.2f}x at α {figures['imposed_alpha']:.2f}"
        for kind, figures in run["kinds"].items()
    )
    gap = "—" if found["gap"] is None else f"{found['gap']:.3g} ({found['gap_at'] or 'none'})"
    lines = [
        f"Graphs on {result['device']}, {result['dtype']}"
        f"{' at toy widths' if result['tiny'] else ''}, {result['seconds']} s. "
        f"Self-check **{found['check']}**, {found['judged']} positions judged, largest "
        f"probability gap {gap}; captured in {found['capture_s']} s ({found['reason']}). "
        f"Imposed runs {'held' if run['held'] else 'FAILED'} on {run['drafting_path']}: "
        f"{speedups}.",
        "",
        "| cache | eager = eager | replay = eager within the bound (judged) |"
        " largest gap (γ, where) | replay = replay | replay ms: γ 1 · 4 · 8 |",
        "|--:|---|---|--:|---|--:|",
    ]
    if not found["by_cache"]:
        lines.append("| — | no graphs on this device | | | | |")
    for cache in found["by_cache"]:
        rows = cache["rows"]
        worst = max(rows, key=lambda row: row["gap"])
        where = f"γ {worst['gamma']}, {worst['gap_at']}, {worst['context']}"
        if not worst["gap"]:
            where = "bit for bit"
        replay_ms = " · ".join(
            f"{cache['replay_s'][str(gamma)] * 1e3:.2f}"
            for gamma in (1, 4, 8)
            if str(gamma) in cache["replay_s"]
        )
        lines.append(
            f"| {cache['capacity']} | {_all(rows, 'eager_equal')} | "
            f"{_all(rows, 'agrees')} ({sum(row['judged'] for row in rows)}) | "
            f"{worst['gap']:.3g} ({where}) | {_all(rows, 'replays_equal')} | {replay_ms} |"
        )
    return lines


def _all(rows: list[dict], key: str) -> str:
    failed = sum(not row[key] for row in rows)
    return "yes" if not failed else f"**no** ({failed} of {len(rows)})"


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


def _progress(what: str, started: float) -> None:
    print(f"[{time.monotonic() - started:6.1f} s] {what}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
