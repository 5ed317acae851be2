"""The GPU check's model of a speedup: the costs it measured, and the per-token acceptance
by prompt kind it prices them at, measured on a CPU.

A step of a constant draft length γ commits E = (1 − α^(γ+1)) / (1 − α) tokens for
γ·d + T(γ+1) seconds, against T(1) a token plain (`modelled_speedup`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from assisted.core.settings import DrafterKind
from assisted.models.registry import PairSpec
from lab.gpu_check.paths import Drafting

# Per-token acceptance α by prompt kind (examples/ categories) and the share of steps that
# drafted, the embedded pair on a 2-core AMD EPYC with AVX512-BF16, bf16 with the bf16
# assistant, greedy, 64 tokens, two prompts a kind (2026-12-03). The assistant drafted 8
# a step under a constant schedule with no confidence cut, so each draft ran to its first
# wrong token; prompt lookup ran under `auto` (8 at most), which drafts where a match is
# found and pays, so its share understates the matches. α = accepted / (accepted + drafts
# a wrong token cut): `python -m lab.gpu_check --acceptance bench-accept/runs.jsonl`
# after `python -m assisted.bench --drafters assistant,prompt-lookup --schedule constant
#  --num-assistant-tokens 8 --prompt-lookup-num-tokens 8 --confidence-threshold 0
#  --assistant-quant none --limit 2 --repeats 1 --max-new-tokens 64 --out bench-accept`.
ACCEPTANCE: dict[str, dict[str, tuple[float, float]]] = {
    DrafterKind.ASSISTANT.value: {
        "answer-from-passage": (0.917, 1.0),
        "chat": (0.724, 1.0),
        "edit-code": (0.833, 1.0),
        "long-passage": (0.714, 1.0),
        "math": (0.85, 0.962),
        "summarise": (0.847, 1.0),
        "translate": (0.798, 0.97),
        "write-code": (0.94, 1.0),
    },
    DrafterKind.PROMPT_LOOKUP.value: {
        "answer-from-passage": (0.802, 0.512),
        "chat": (0.6, 0.059),
        "edit-code": (0.621, 0.118),
        "long-passage": (0.5, 0.167),
        "math": (0.533, 0.221),
        "summarise": (0.662, 0.282),
        "translate": (0.907, 0.09),
        "write-code": (0.727, 0.096),
    },
}


@dataclass(frozen=True)
class Costs:
    """One model's measured seconds: `rows[k - 1]` is T(k); its launch-bound floor; the
    bytes of weights a pass reads (all but an untied input embedding, of which it reads
    a row a token)."""

    rows: tuple[float, ...]
    launch_floor_s: float
    read_bytes: int


@dataclass(frozen=True)
class Pricing:
    """A pair's costs on this device: the target's, and its drafting seconds per token
    (0 for prompt lookup; None where it could not be measured)."""

    target: Costs
    draft_s: float | None
    drafting: Drafting | None = None  # by path, for a pair with an assistant model


def modelled_speedup(
    alpha: float, rows: Sequence[float], draft_s: float, drafting: float = 1.0
) -> tuple[float, int]:
    """The best constant γ's speedup over plain decoding and that γ (0: drafting never
    pays), for per-token acceptance `alpha`, T(k) = `rows[k - 1]`, `draft_s` a drafted
    token, and a share `drafting` of the steps that draft (the rest are plain steps)."""
    best, best_gamma = 1.0, 0
    for gamma in range(1, len(rows)):
        tokens = gamma + 1 if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)
        step_tokens = drafting * tokens + (1 - drafting)
        step_s = drafting * (gamma * draft_s + rows[gamma]) + (1 - drafting) * rows[0]
        speedup = step_tokens * rows[0] / step_s
        if speedup > best:
            best, best_gamma = speedup, gamma
    return best, best_gamma


def per_token_acceptance(path: Path) -> dict[str, dict[str, tuple[float, float]]]:
    """(α, the share of steps that drafted) by drafter and prompt kind from a benchmark's
    runs.jsonl (a constant schedule, no confidence cut), α as `per_token_alpha` counts it."""
    steps: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for text in path.read_text(encoding="utf-8").splitlines():
        line = json.loads(text) if text else None
        if not line or line["drafter"] is None:
            continue
        key = (line["drafter"], line.get("category") or "-")
        counts = ((step["drafted"], step["accepted"]) for step in line["record"]["steps"])
        steps.setdefault(key, []).extend(counts)
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for (drafter, kind), counts in sorted(steps.items()):
        alpha, _ = per_token_alpha(counts)
        drafting = sum(1 for drafted, _ in counts if drafted) / max(len(counts), 1)
        table.setdefault(drafter, {})[kind] = (round(alpha, 3), round(drafting, 3))
    return table


def per_token_alpha(steps: Iterable[tuple[int, int]]) -> tuple[float, int]:
    """α from steps given as (drafted, accepted), and the positions it counts: the accepted
    tokens over those plus the drafts a wrong token cut (a draft kept whole was cut by
    nothing). Where each position holds with probability α, this is its estimate."""
    accepted = cut = 0
    for drafted, kept in steps:
        if drafted:
            accepted += kept
            cut += kept < drafted
    return accepted / max(accepted + cut, 1), accepted + cut


def geomean(values: Iterable[float]) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def acceptance_for(spec: PairSpec) -> dict[str, tuple[float, float]] | None:
    """The (α, drafting share) by kind a pair is priced at: lookup's for lookup, the
    assistant's (every step drafting) for a pair with an assistant model; none for early
    exit."""
    if spec.drafter is DrafterKind.PROMPT_LOOKUP:
        return ACCEPTANCE[DrafterKind.PROMPT_LOOKUP.value]
    if spec.drafter.has_model:
        return ACCEPTANCE[DrafterKind.ASSISTANT.value]
    return None
