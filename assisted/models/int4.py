"""4-bit weight-only linear layers for an assistant drafting on a CPU ("int4-wo").

Drafting runs one row at a time, so the assistant's forward pass reads every weight for
each drafted token: it is bound by memory bandwidth, and 4-bit weights are half as many
bytes as int8. With bf16 activations one row through a layer is faster than "int8-wo"'s,
though slower than the dynamic int8 layer's; with float32 activations (the pair's dtype
without native bf16) it is many times slower, so like "int8-wo" it is no choice for such
CPUs. `python -m assisted.lab.precisions` measures whether the whole run gains
(docs/lab-notes.md).

The format, as torch 2.13's CPU kernels take it (tested against a dequantized reference):
- weights in groups of `GROUP_SIZE` along the input dimension; each group has a scale s
  and a zero z, and a weight is stored as a level q in 0 … 15 standing for (q − 8)·s + z,
  so z is the value of the middle level (the group's minimum plus 8 s);
- `_convert_weight_to_int4pack_for_cpu` packs the levels, int32 [N, K], into uint8
  [N, K / 2]; `_weight_int4pack_mm_for_cpu(x, packed, GROUP_SIZE, scales_and_zeros)`
  multiplies, with scales and zeros as [K / GROUP_SIZE, N, 2] in x's dtype;
- the kernel needs N a multiple of 16 and K of the group size (`fits`).
"""

from __future__ import annotations

import torch
from torch import nn

GROUP_SIZE = 64  # inputs sharing a scale and a zero: the usual choice for 4-bit LLM weights
LEVELS = 16
# Rows quantized and packed at a time, so that no float32 or int32 copy of a whole layer
# exists (the 0.5B's output layer, 151936 × 896, would be 545 MB either way). The packing
# interleaves blocks of 64 rows, so blocks of a multiple of 64 pack as the whole layer does.
_BLOCK_ROWS = 4096


def fits(linear: nn.Linear) -> bool:
    """Whether the int4 kernel takes `linear`'s shape."""
    return linear.out_features % 16 == 0 and linear.in_features % GROUP_SIZE == 0


def quantize_groups(
    weight: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`weight` [N, K] as levels (int32 [N, K], 0 … 15), scales and zeros ([N, K / group],
    in `dtype`): asymmetric, from each group's minimum and maximum. The levels are chosen
    with the scales and zeros rounded to `dtype`, as the kernel will read them, so each
    weight gets the nearest level it can have."""
    rows, inputs = weight.shape
    groups = weight.float().reshape(rows, inputs // GROUP_SIZE, GROUP_SIZE)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)
    # A group of equal weights has no range: the smallest normal scale keeps it divisible.
    scales = ((high - low) / (LEVELS - 1)).clamp(min=torch.finfo(dtype).tiny).to(dtype)
    zeros = (low + LEVELS // 2 * scales.float()).to(dtype)
    levels = (groups - zeros.float()[..., None]) / scales.float()[..., None] + LEVELS // 2
    levels = levels.round().clamp(0, LEVELS - 1).to(torch.int32)
    return levels.reshape(rows, inputs), scales, zeros


def dequantize(levels: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """The float32 weights that `quantize_groups`' output stands for: (q − 8)·s + z."""
    rows, inputs = levels.shape
    groups = levels.float().reshape(rows, inputs // GROUP_SIZE, GROUP_SIZE) - LEVELS // 2
    return (groups * scales.float()[..., None] + zeros.float()[..., None]).reshape(rows, inputs)


class Int4WeightOnlyLinear(nn.Module):
    """`nn.Linear` with 4-bit weights (`quantize_groups`) packed for the CPU kernel, and
    activations, scales, zeros and bias in the layer's own dtype. `fits(linear)` must hold."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach()
        rows, inputs = weight.shape
        dtype = weight.dtype
        packed = torch.empty(rows, inputs // 2, dtype=torch.uint8)
        scales_and_zeros = torch.empty(inputs // GROUP_SIZE, rows, 2, dtype=dtype)
        for start in range(0, rows, _BLOCK_ROWS):
            block = slice(start, start + _BLOCK_ROWS)
            levels, scales, zeros = quantize_groups(weight[block], dtype)
            # The second argument (inner k tiles) shapes the GPU's layout; on a CPU every
            # value packs alike.
            packed[block] = torch.ops.aten._convert_weight_to_int4pack_for_cpu(levels, 1)
            scales_and_zeros[:, block, 0] = scales.t()
            scales_and_zeros[:, block, 1] = zeros.t()
        self.register_buffer("weight", packed)
        self.register_buffer("scales_and_zeros", scales_and_zeros)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach())
        self.in_features = linear.in_features
        self.out_features = linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(
            rows, self.weight, GROUP_SIZE, self.scales_and_zeros.to(x.dtype)
        )
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)
