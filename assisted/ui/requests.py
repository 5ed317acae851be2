"""What a tab hands its GPU call: one request object per call, built once from the tab's
inputs, given whole to the GPU entry point and to the function that sizes its ZeroGPU
duration (`assisted.ui.gpu_calls`).

On ZeroGPU the call runs in a forked process and its arguments are pickled: a request is
a frozen dataclass of plain values, the settings and a Stop flag that a file carries
across processes (`assisted.ui.stop_flags`). No torch, no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass

from assisted.analysis.sampling_evidence import CheckSettings
from assisted.bench.planning import Variant
from assisted.core.examples import Example
from assisted.core.settings import DraftSettings, RunSettings
from assisted.models.registry import PairSpec
from assisted.policy.learnt import LearntSnapshot
from assisted.ui.stop_flags import StopFlag


@dataclass(frozen=True)
class PairPlace:
    """Where a call finds its pair: loaded on `device` in `dtype`, local folders accepted
    for its ids only with `allow_local`."""

    spec: PairSpec
    device: str
    dtype: str
    allow_local: bool


@dataclass(frozen=True)
class ComparisonRequest:
    """One comparison: `prompt` plain, then assisted with `draft`, under `settings`."""

    pair: PairPlace
    prompt: str
    settings: RunSettings
    draft: DraftSettings
    stop: StopFlag


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
