"""Random models at real shapes: a registry model built from its published architecture
(`architectures`) with random weights, on a device, or at toy widths where only its
kernels' launches should cost (a CPU test, the launch-bound floor).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import transformers

from assisted.lab.gpu_check.architectures import Architecture

TOY = {"hidden_size": 64, "intermediate_size": 128, "heads": 4, "head_dim": 16, "vocab": 512}


def toy(architecture: Architecture) -> Architecture:
    """`architecture` at toy widths, its depth and kind kept: its kernels' launches cost
    what they cost, the work in them next to nothing."""
    heads = TOY["heads"]
    kv_heads = heads if architecture.kv_heads == architecture.heads else heads // 2
    return replace(
        architecture,
        hidden_size=TOY["hidden_size"],
        intermediate_size=TOY["intermediate_size"],
        heads=heads,
        kv_heads=kv_heads,
        head_dim=TOY["head_dim"],
        vocab_size=TOY["vocab"],
        extra=tuple(
            (key, TOY["head_dim"] if key == "query_pre_attn_scalar" else value)
            for key, value in architecture.extra
        ),
    )


def build(architecture: Architecture, device: torch.device, dtype: torch.dtype):
    """A model of `architecture` with random weights, made on `device`."""
    config = transformers.AutoConfig.for_model(**architecture.config())
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
