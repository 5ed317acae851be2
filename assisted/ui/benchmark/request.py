"""What the Benchmark tab hands each of its GPU calls (`benchmark.gpu`): one call's
request, a frozen dataclass of plain values, as every call's request is
(`assisted.ui.requests`); and on ZeroGPU a benchmark split into as many calls as its limit
needs (`split`). No torch, no gradio.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from assisted.analysis.sampling import CheckSettings
from assisted.bench.planning import Variant
from assisted.core.settings import Example, RunSettings
from assisted.policy.learnt import LearntSnapshot
from assisted.ui.gpu_time import CHECK_SAMPLE_TOKENS, GpuTimes
from assisted.ui.requests import PairPlace, StopFlag


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
