"""4-bit weight-only linear layers for an assistant drafting on a CPU ("int4-wo").

Drafting runs one row at a time, so the assistant's forward pass reads every weight for
each drafted token: it is bound by memory bandwidth, and 4-bit weights are half as many
bytes as int8. With bf16 activations one row through a layer is faster than "int8-wo"'s,
though slower than the dynamic int8 layer's; with float32 activations (the pair's dtype
without native bf16) it is many times slower, so like "int8-wo" it is no choice for such
CPUs. `python -m lab.precisions` measures whether the whole run gains
(docs/lab-notes.md).

Reading many rows is another matter. The kernel unpacks every weight again for each row,
so its time grows with the rows: on a 2-core AMD EPYC with AVX512-BF16, one 896 × 4864
layer took 0.14 ms for one row and 8.1 ms for 151, where bf16's GEMM took 4.0 ms and
fbgemm's dynamic int8 2.4 ms. An assistant reads many rows before it drafts: the whole
context before its first draft, and the tokens of the steps it skipped before a catch-up.
Read in int4, the 0.5B took 4.8–5.3 ms a context token, against 1.8–2.4 ms in int8: 1.1 s
of a 231-token passage's 5 s run, where int8 read it in 0.4 s. So a layer may keep a
second copy of its weights for inputs of `MANY_ROWS` rows or more (`many_rows`: fbgemm's
dynamic int8 layer, `assisted.models.quantize`): the read then costs what the int8
assistant's does, and drafting, one row at a time, what int4's does. The copy is what the
read costs in memory (docs/space.md#memory); the target verifies every candidate either
way, so which copy read the context moves the drafts, never the output.

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
# Rows from which a layer with a copy for many rows reads through it (the module's note).
# The whole 0.5B reading k tokens onto a 151-token context, its int4 layers alone against
# with their int8 copies (AMD EPYC, AVX512-BF16; medians of 7): 1 row 26.9 and 26.5 ms,
# 2 rows 30.6 and 37.0, 4 rows 38.7 and 38.8, 6 rows 56.7 and 41.1, 9 rows 80.1 and 41.2.
MANY_ROWS = 5


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
    activations, scales, zeros and bias in the layer's own dtype. `fits(linear)` must hold.
    `many_rows`, where given, computes the same product for inputs of `MANY_ROWS` rows or
    more (the module's note): a layer taking and giving float32, its bias its own."""

    def __init__(self, linear: nn.Linear, many_rows: nn.Module | None = None):
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
        self.many_rows = many_rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if self.many_rows is not None and rows.shape[0] >= MANY_ROWS:
            return self.many_rows(x.float()).to(x.dtype)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(
            rows, self.weight, GROUP_SIZE, self.scales_and_zeros.to(x.dtype)
        )
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)
