"""Where a pair runs and in what precision: the device and dtype policy.

CUDA → bf16 (fp16 where bf16 is unsupported); CPU → bf16 where the CPU has native bf16
instructions, else fp32, as emulated bf16 matmuls run slower than fp32. Large targets on
CUDA may spread over GPU and CPU memory (`assisted.models.loading`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assisted.models.registry import PairError

if TYPE_CHECKING:
    import torch

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")


def choose_device(requested: str = "auto") -> torch.device:
    import torch

    if requested not in DEVICES:
        raise PairError(f"unknown device {requested!r}; choose one of {', '.join(DEVICES)}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise PairError("device 'cuda' was asked for, but no CUDA device is available")
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(requested)


def choose_dtype(device: torch.device, requested: str = "auto") -> torch.dtype:
    import torch

    if requested not in DTYPES:
        raise PairError(f"unknown dtype {requested!r}; choose one of {', '.join(DTYPES)}")
    if requested != "auto":
        return getattr(torch, requested)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX on x86; without them bf16 matmuls are emulated and slower than fp32."""
    import torch

    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def gpu_name(device: torch.device) -> str | None:
    """The GPU `device` is, as torch names it (as `spaces`' configs name the machines, a
    MIG slice's name followed by its profile); None off CUDA."""
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else None
