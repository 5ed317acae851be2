"""A faster matrix product for the few-row inputs of draft verification on a CPU.

Measured on the 2-core AVX2 machine this project is developed on (MKL, fp32, one
8960×1536 layer): `F.linear` on 1 row takes 2.9 ms, but on 2 rows 7.1 ms and on 4 rows
10.5 ms, because MKL's GEMM packs the whole weight for so few rows. Computing the same
product as `weight @ x.T` (the weight as the left, tall operand) takes 3.4 ms for 2 rows and
3.6 ms for 4. Verifying γ drafted tokens feeds the target γ + 1 rows at a time, so this is
what decides whether assisted generation pays on a CPU. One row keeps `F.linear` (the
plain decoding path, where it is fastest), so plain runs are untouched.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import nn

MAX_ROWS = 16  # beyond this (a long prompt's prefill) the ordinary GEMM is as fast


def _few_rows_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1] if x.numel() else 0
    if not 1 < rows <= MAX_ROWS:
        return F.linear(x, self.weight, self.bias)
    out = torch.mm(self.weight, x.reshape(rows, x.shape[-1]).t()).t()
    if self.bias is not None:
        out = out + self.bias
    return out.reshape(*x.shape[:-1], self.out_features)


def use_few_rows_linear(model: nn.Module) -> int:
    """Route the model's CPU linear layers through `_few_rows_forward`; returns how many."""
    patched = 0
    for module in model.modules():
        if type(module) is nn.Linear and module.weight.device.type == "cpu":
            module.forward = types.MethodType(_few_rows_forward, module)
            patched += 1
    return patched
