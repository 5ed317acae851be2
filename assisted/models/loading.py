"""Loading one model into memory, and handing memory back to the system.

The embedded models load from a copy of their cache in the run's dtype (`assisted.models.embedded`
converts once). `from_pretrained` maps a safetensors file rather than reading it, so a
checkpoint already in the run's dtype loads in a second and holds almost nothing until the
first passes read its weights. Decoding reads every weight at every step, though, and
mapped pages are small ones, and plain decoding runs slower from mapped weights than from
the same weights copied into the process's own memory, where the allocator can use huge
pages. So on a CPU each weight is copied in, one shard after the other: a shard's mapping
goes once all its tensors are copied, and the peak stays near the weights plus one shard.

Where a pair runs and in what precision: the device and dtype policy.

CUDA → bf16 (fp16 where bf16 is unsupported); CPU → bf16 where the CPU has native bf16
instructions, else fp32, as emulated bf16 matmuls run slower than fp32. Large targets on
CUDA may spread over GPU and CPU memory (`load_model`'s `offload`).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from assisted.models import embedded
from assisted.models.registry import PairError, first_line

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase


# Verification feeds the target a few rows at once; on a CPU a faster product for that case
# (`use_few_rows_linear`) decides whether assisted generation pays. ASSISTED_CPU_FEW_ROWS=0
# turns it off, to measure without it.
CPU_FEW_ROWS_LINEAR = os.environ.get("ASSISTED_CPU_FEW_ROWS", "1") != "0"
FEW_ROWS = 16  # beyond this (a long prompt's prefill) the ordinary GEMM is as fast

# glibc, whose malloc_trim hands freed memory back to the system (`release_memory`); None
# where the C library is another.
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6")
    _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
except (OSError, AttributeError):
    _LIBC = None


def load_model(
    ref: str,
    source: str,
    device: torch.device,
    dtype: torch.dtype,
    progress: embedded.Progress | None,
    offload: bool = False,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if ref in embedded.MODELS:
        source = str(embedded.in_dtype(Path(source), str(dtype).removeprefix("torch."), progress))
    if progress:
        progress(f"Loading {ref}", None)
    placement = {"device_map": "auto"} if offload and _may_offload(device) else {}
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype, trust_remote_code=False, **placement
        )
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    except (OSError, ValueError) as error:
        raise PairError(f"cannot load {ref!r}: {first_line(error)}") from error
    if not placement:
        model.to(device)
    if device.type == "cpu":
        _copy_in(model, Path(source))
    model.eval()
    if few_rows_linear(device, dtype):
        use_few_rows_linear(model)
    return model, tokenizer


def _may_offload(device: torch.device) -> bool:
    """Whether a large target may spread over GPU and CPU memory (accelerate's device map).
    Not on ZeroGPU: its slice holds every offered pair whole, and a device map has
    Transformers' loader threads write the weights to CUDA, which ZeroGPU emulates only in
    the thread that imported `spaces` (`spaces/zero/torch/patching.py`); loaded on the CPU
    and moved by the caller, the weights reach the device from that thread."""
    from spaces.config import Config

    return device.type == "cuda" and not Config.zero_gpu


def few_rows_linear(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a model loaded on `device` in `dtype` verifies few rows with
    `use_few_rows_linear`'s product: fp32 on a CPU, unless ASSISTED_CPU_FEW_ROWS=0."""
    return device.type == "cpu" and str(dtype) == "torch.float32" and CPU_FEW_ROWS_LINEAR


def use_few_rows_linear(model: torch.nn.Module) -> int:
    """Route the model's CPU linear layers through a faster product for the few-row inputs
    of draft verification; returns how many.

    Measured on a 2-core AVX2 machine (MKL, fp32, one 8960×1536 layer): `F.linear` on 1 row
    takes 2.9 ms, but on 2 rows 7.1 ms and on 4 rows 10.5 ms, because MKL's GEMM packs the
    whole weight for so few rows. The same product as `weight @ x.T` (the weight as the
    left, tall operand) takes 3.4 ms for 2 rows and 3.6 ms for 4. Verifying γ drafted tokens
    feeds the target γ + 1 rows at a time, so this decides whether assisted generation pays
    on a CPU. One row keeps `F.linear` (the plain decoding path, where it is fastest), so
    plain runs are untouched."""
    import types

    import torch
    import torch.nn.functional as F
    from torch import nn

    def few_rows_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1] if x.numel() else 0
        if not 1 < rows <= FEW_ROWS:
            return F.linear(x, self.weight, self.bias)
        out = torch.mm(self.weight, x.reshape(rows, x.shape[-1]).t()).t()
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)

    patched = 0
    for module in model.modules():
        if type(module) is nn.Linear and module.weight.device.type == "cpu":
            module.forward = types.MethodType(few_rows_forward, module)
            patched += 1
    return patched


def _copy_in(model: PreTrainedModel, folder: Path) -> None:
    """Copy each of `model`'s weights from its mapped file into the process's own memory,
    shard by shard in the index's order, so that each shard's mapping goes before the next
    one's pages come in (the module's note). Tensors the index does not name (tied ones,
    buffers made at load) follow; a single-file checkpoint is one shard."""
    import torch

    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    index = folder / "model.safetensors.index.json"
    weight_map = json.loads(index.read_text())["weight_map"] if index.is_file() else {}
    last = "\uffff"  # after every shard's name
    by_shard = sorted(tensors, key=lambda name: weight_map.get(name, last))
    with torch.no_grad():
        for name in by_shard:
            tensors[name].data = tensors[name].data.clone()


def release_memory() -> None:
    """Hand memory that dropped models held back to the system: the CPU allocator keeps
    freed blocks for reuse (glibc's malloc_trim returns them), CUDA's caching allocator too."""
    import torch

    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def end_ids(config: GenerationConfig) -> tuple[int, ...]:
    """The end-of-sequence ids of a generation config, in order: Transformers allows one
    id, a list of them, or None."""
    eos = config.eos_token_id
    if eos is None:
        return ()
    return tuple(eos) if isinstance(eos, list) else (eos,)


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
