"""What every tab's GPU call takes: one request object per call, built once from the tab's
inputs, given whole to the GPU entry point and to the function that sizes its ZeroGPU
duration (each tab's `request` and `gpu` modules). This module holds what every request
has (`GpuRequest`): the place of its pair (`PairPlace`), its Stop flag, and the tokens it
times, from which `assisted.ui.gpu_time` sizes its call.

On ZeroGPU the call runs in a forked process and its arguments are pickled: a request is
a frozen dataclass of plain values, the settings and a Stop flag that a file carries
across processes (`assisted.ui.stop_flags`). No torch, no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from assisted.models.registry import PairSpec
from assisted.ui.stop_flags import StopFlag


@dataclass(frozen=True)
class PairPlace:
    """Where a call finds its pair: loaded on `device` in `dtype`, local folders accepted
    for its ids only with `allow_local`."""

    spec: PairSpec
    device: str
    dtype: str
    allow_local: bool


class GpuRequest(Protocol):
    """What every tab's request for a GPU call holds (`compare.request`,
    `benchmark.request`, `shootout.request`)."""

    @property
    def pair(self) -> PairPlace: ...
    @property
    def stop(self) -> StopFlag: ...
    def timed_tokens(self) -> tuple[int, int]:
        """The new tokens the call times, plain and assisted."""
        ...

    def drafting_cap(self) -> int:
        """The longest draft the call's runs ask of the assistant: the cap its drafts are
        captured as graphs for, on CUDA (`assisted.ui.gpu_time.capture_s`)."""
        ...
