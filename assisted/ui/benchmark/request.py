"""What the Benchmark tab hands each of its GPU calls (`benchmark.gpu`): one call's
request. A frozen dataclass of plain values, as every call's request is
(`assisted.ui.requests`). No torch, no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass

from assisted.analysis.sampling_evidence import CheckSettings
from assisted.bench.planning import Variant
from assisted.core.examples import Example
from assisted.core.settings import RunSettings
from assisted.policy.learnt import LearntSnapshot
from assisted.ui.requests import PairPlace
from assisted.ui.stop_flags import StopFlag


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
