"""What a device's hardware costs, before anything has been timed on it: the figures a first
estimate of a step, a set-up or a worker's start rests on (`assisted.ui.gpu_time` sizes a
ZeroGPU call from them until calls have measured their own). No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from assisted.models.registry import Size


@dataclass(frozen=True)
class Device:
    """What a step costs on a device before anything has been timed on it: its memory
    bandwidth, the launch cost of one decoder layer's kernels in eager mode at batch 1, and
    the bandwidth at which a call moves weights onto it."""

    name: str
    bytes_per_s: float
    launch_s_per_layer: float
    load_bytes_per_s: float

    def step_s(self, size: Size) -> float:
        return size.weight_bytes() / self.bytes_per_s + size.layers * self.launch_s_per_layer


# The ZeroGPU slice, half an H200 (MIG 3g.71gb: half its memory and bandwidth of 4.8 TB/s);
# a layer's dozen kernels and Transformers' Python around them, about 0.35 ms; weights
# moved from host memory at a few GB/s. Estimates for a first request, refined by the
# first call's own timings (`GpuTimes.note`); `python -m assisted.lab.gpu_check` measures
# the real ones.
ZEROGPU_SLICE = Device("H200 MIG 3g.71gb", 2.4e12, 3.5e-4, 4e9)
# A fresh worker's CUDA set-up before it moves anything (a context on the device): an
# estimate, until a fresh worker times its whole start.
CUDA_SETUP_S = 3.0
