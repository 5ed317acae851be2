"""What a device's hardware costs, before anything has been timed on it: the figures a first
estimate of a step, a set-up or a worker's start rests on (`assisted.ui.gpu_time` sizes a
ZeroGPU call from them until calls have measured their own). The machines are those the
installed `spaces` knows (`assisted.models.machines`). No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from assisted.models import machines
from assisted.models.machines import Machine
from assisted.models.registry import Size


@dataclass(frozen=True)
class Device:
    """What a step costs on a device before anything has been timed on it: its memory
    bandwidth, the launch cost of one decoder layer's kernels in eager mode at batch 1, and
    the bandwidth at which a call moves weights onto it. A step costs the larger of its
    weights' bytes over the bandwidth and its layers' launches, not their sum: the host
    launches the next kernels while the device runs the last ones, so the two overlap."""

    name: str
    bytes_per_s: float
    launch_s_per_layer: float
    load_bytes_per_s: float

    def step_s(self, size: Size) -> float:
        return max(size.weight_bytes() / self.bytes_per_s, size.layers * self.launch_s_per_layer)


# Memory bandwidth of each GPU model `spaces` names, the whole card.
CARD_BYTES_PER_S = {
    # NVIDIA's H200 datasheet: 4.8 TB/s of HBM3e.
    "NVIDIA H200": 4.8e12,
    # NVIDIA's published specifications of the RTX PRO 6000 Blackwell Server Edition:
    # 1,792 GB/s of GDDR7.
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": 1.792e12,
}
# A `large` call's share of the card: the H200's MIG 3g.71gb is half its memory and
# bandwidth; the Blackwell's `large` is half its memory (hub-docs), and half its bandwidth
# is an estimate (about 0.9 TB/s), not a published figure.
LARGE_SHARE = 0.5
# A layer's dozen kernels and Transformers' Python around them, about 0.35 ms; weights
# moved from host memory at a few GB/s. Estimates for a first request, refined by the
# first call's own timings (`GpuTimes.note`); `python -m lab.gpu_check` measures
# the real ones.
LAUNCH_S_PER_LAYER = 3.5e-4
LOAD_BYTES_PER_S = 4e9
# A fresh worker's CUDA set-up before it moves anything (a context on the device): an
# estimate, until a fresh worker times its whole start.
CUDA_SETUP_S = 3.0


def large_slice(machine: Machine) -> Device:
    """A `large` call's device on `machine`: its share of the card's bandwidth."""
    return Device(
        f"{machine.model}, a large call's half",
        LARGE_SHARE * CARD_BYTES_PER_S[machine.model],
        LAUNCH_S_PER_LAYER,
        LOAD_BYTES_PER_S,
    )


def zerogpu_slice(gpu: str | None = None) -> Device:
    """The device a ZeroGPU call runs on: a `large` call on the machine named `gpu` (as
    `torch.cuda.get_device_name` names it in a GPU worker); where `gpu` is None (the main
    process, which has no GPU) or a machine `spaces` does not know, the slowest of its
    machines, so a first request does not fall short."""
    known = [m for m in machines.machines() if m.model in CARD_BYTES_PER_S]
    # A MIG slice's name follows its card's ("NVIDIA H200 MIG 3g.71gb").
    named = [m for m in known if gpu is not None and gpu.startswith(m.model)]
    if named:
        return large_slice(named[0])
    return min((large_slice(m) for m in known), key=lambda device: device.bytes_per_s)
