"""The assistant's precision: int8 and int4 copies of the assistant for drafting on CPUs.

The target verifies every candidate, so the assistant's precision moves the acceptance rate
and the cost of drafting, never the output. Quantizing the target instead would change the
output itself: its own int8 rounding picks other tokens.

The precisions on a CPU (their figures: docs/benchmarks.md, "The assistant's precision"):
- "int8", dynamic int8 with fbgemm's per-tensor weight scales: an int8 assistant drafts
  faster than one in the pair's dtype, and lowers the cost ratio c much more than the
  acceptance. Per-channel scales are no faster and follow the bf16 assistant's greedy text
  for fewer tokens, so "int8" keeps fbgemm's per-tensor default. It runs on fbgemm's AVX2
  kernels too, on CPUs without native bf16, where the pair runs in fp32.
- "int8-wo", int8 weights only with bf16 activations (`_weight_int8pack_mm`): slow with fp32
  activations, so it is no default for CPUs without native bf16.
- "int4-wo", 4-bit weights in groups of 64 (`quantize_int4_weight_only`): what "auto" drafts in on
  a CPU where the pair runs in bf16, as fast as "int8" from half its weights, and, its
  drafting activations never quantized per pass, the oracle's hindsight reproduces more of
  its drafting steps. It reads the context through a dynamic int8 copy of its layers,
  where the int4 kernel is slowest. `python -m lab.precisions` compares them.

4-bit weight-only linear layers for an assistant drafting on a CPU ("int4-wo").

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
dynamic int8 layer, as `quantize_int8` makes it): the read then costs what the int8
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

import copy
import warnings
import weakref
from collections.abc import Iterator

import torch
from torch import nn

from assisted.models.loading import release_memory

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


def quantized_copy(model: nn.Module, precision: str, consume: bool = False) -> nn.Module:
    """A copy of `model` in `precision`. The original stays as it was, unless `consume`:
    then each of its linear layers gives up its weights once copied, so that the two are
    never held whole at once (for an original that is released after; it cannot run)."""
    if precision == "int8":
        return quantize_int8(model, consume)
    if precision == "int8-wo":
        return quantize_int8_weight_only(model, consume)
    if precision == "int4-wo":
        return quantize_int4_weight_only(model, consume)
    raise ValueError(f"unknown assistant precision {precision!r}")


def quantize_int8(model: nn.Module, consume: bool = False) -> nn.Module:
    """Linear layers in int8 with activations quantized on the fly (fbgemm's x86 kernels,
    per-tensor scales); everything else in float32.

    Built layer by layer: each linear layer is widened to float32 a block of rows at a
    time and quantized, so no float32 copy of the model, or of a layer, exists at any time,
    and none is left reachable after (the embedding stays in float32: the int8 model's
    activations are float32). With `consume`, the original's layer gives up its weights as
    well, so the copy's peak stays near the weights kept (`python -m lab.memory`;
    docs/space.md#memory)."""
    quantized = _structure(model)
    for parent, name, linear in _linears(quantized, model if consume else None):
        setattr(parent, name, _dynamic_int8(linear))
    for module in quantized.modules():
        for name, tensor in list(module.named_parameters(recurse=False)):
            setattr(module, name, nn.Parameter(tensor.detach().float(), requires_grad=False))
        for name, tensor in list(module.named_buffers(recurse=False)):
            if tensor.is_floating_point():
                setattr(module, name, tensor.float())  # a buffer stays one, as it was
    return quantized.eval()


def quantize_int8_weight_only(model: nn.Module, consume: bool = False) -> nn.Module:
    """Linear weights in int8 (one scale per output channel), activations in the model's
    own dtype: the product runs in `torch.ops.aten._weight_int8pack_mm`. The rest of the
    model is shared with `model`, not copied (`consume`: as in `quantize_int8`)."""
    quantized = _structure(model)
    for parent, name, linear in _linears(quantized, model if consume else None):
        setattr(parent, name, Int8WeightOnlyLinear(linear))
    return quantized.eval()


def quantize_int4_weight_only(model: nn.Module, consume: bool = False) -> nn.Module:
    """Linear weights in 4 bits, a scale and a zero per 64 inputs, activations in the
    model's own dtype (the int4 kernel, above). The rest of the model is shared with `model`
    (`consume`: as in `quantize_int8`).

    A layer whose shape the int4 kernel refuses (`fits`: output features a multiple
    of 16, input features of 64) becomes an int8 weight-only layer instead, so the copy is
    weight-only throughout and runs in one activation dtype. The embedded 0.5B has none
    (its sizes are multiples of 128); a vocabulary of 300, as in a test, does.

    Each int4 layer but the output layer keeps a dynamic int8 copy for reading many rows
    (the module's note): the output layer sees one row whatever the input,
    since the drafters keep only the last position's logits."""
    quantized = _structure(model)
    output_layer = getattr(quantized, "get_output_embeddings", None)
    output = output_layer() if output_layer is not None else None
    for parent, name, linear in _linears(quantized, model if consume else None):
        if not fits(linear):
            layer: nn.Module = Int8WeightOnlyLinear(linear)
        elif linear is output:
            layer = Int4WeightOnlyLinear(linear)
        else:
            layer = Int4WeightOnlyLinear(linear, many_rows=_dynamic_int8(linear))
        setattr(parent, name, layer)
    return quantized.eval()


def weights_bytes(model: nn.Module) -> int:
    """Bytes that `model`'s weights hold: its parameters and buffers, each storage once (a
    tied embedding is one), and the int8 weights that fbgemm's dynamic layers keep packed
    outside them. Counted once per model (a model's weights do not change once loaded or
    made), since the status line and each eviction ask again."""
    if model not in _WEIGHTS_BYTES:
        _WEIGHTS_BYTES[model] = _count_weights_bytes(model)
    return _WEIGHTS_BYTES[model]


_WEIGHTS_BYTES: weakref.WeakKeyDictionary[nn.Module, int] = weakref.WeakKeyDictionary()


def _count_weights_bytes(model: nn.Module) -> int:
    storages, total = set(), 0
    for module in model.modules():
        for tensor in (*module.parameters(recurse=False), *module.buffers(recurse=False)):
            if tensor.data_ptr() not in storages:
                storages.add(tensor.data_ptr())
                total += tensor.numel() * tensor.element_size()
        if isinstance(module, torch.ao.nn.quantized.dynamic.Linear):
            # Counted from the layer's shape: reading `weight()` would unpack a copy. One
            # byte a weight, and a float32 bias.
            total += module.in_features * module.out_features
            total += 4 * module.out_features if module.bias() is not None else 0
    return total


def _structure(model: nn.Module) -> nn.Module:
    """A copy of `model`'s modules that shares its tensors: each is replaced, not changed,
    by the quantization, so the original stays as it was at no cost in memory."""
    shared = {id(tensor): tensor for tensor in (*model.parameters(), *model.buffers())}
    return copy.deepcopy(model, memo=shared)


def _linears(
    model: nn.Module, original: nn.Module | None = None
) -> Iterator[tuple[nn.Module, str, nn.Linear]]:
    """Each linear layer of `model` (a `_structure` copy) with its parent and name. Where
    `original` is given, its layer of the same name drops its weights once the caller has
    copied the layer: its parameters are rebound to empty ones, so a tensor that nothing
    else holds is freed (a tied head's weight stays: the embedding holds it).

    Only the layers' names are listed ahead: a list of the layers themselves would hold
    every one, and its weights, until the last is copied (docs/space.md#memory)."""
    originals = dict(original.named_modules()) if original is not None else {}
    names = [
        (prefix, name)
        for prefix, module in model.named_modules()
        for name, child in module.named_children()
        if type(child) is nn.Linear
    ]
    consumed = 0
    for prefix, name in names:
        module = model.get_submodule(prefix)
        child = getattr(module, name)
        if originals and child.weight.numel() > _LARGE_LAYER:
            release_memory()  # its copy's transients land on the least held
        yield module, name, child
        dtype = child.weight.dtype
        del child  # the caller replaced it: its weights go with the original's
        source = originals.get(f"{prefix}.{name}" if prefix else name)
        if source is not None:
            for weight, _ in list(source.named_parameters(recurse=False)):
                empty = torch.empty(0, dtype=dtype)
                setattr(source, weight, nn.Parameter(empty, requires_grad=False))
            consumed += 1
            if consumed % _RELEASE_EVERY == 0:
                release_memory()
    if consumed:
        release_memory()


# Consumed layers between two hand-backs of freed memory. The replaced layers are freed by
# the garbage collector, not at once, and their weights, a few MB each, sit below glibc's
# mmap threshold, so the process keeps holding them until a collection and a trim. A
# collection takes tens of ms.
_RELEASE_EVERY = 8
# A layer this large (weights) is copied right after a hand-back, and in parts of at most
# this size (`RowSplitLinear`): the 0.5B's 136M-weight output layer becomes five.
_LARGE_LAYER = 32 * 2**20
# Rows of a linear layer widened to float32 at a time. Quantizing the 0.5B's tied output
# layer (151936 × 896) through one float32 copy would hold 545 MB beside it, the largest
# part of the loading peak (`python -m lab.memory`); 4096 rows are 15 MB.
_BLOCK_ROWS = 4096


def _dynamic_int8(linear: nn.Linear) -> nn.Module:
    """`linear` as fbgemm's dynamic int8 layer: the layer `quantize_dynamic` makes of a
    float32 copy of it (per-tensor symmetric scale from its weights' range), widened to
    float32 a block of rows at a time rather than whole. A layer larger than `_LARGE_LAYER`
    becomes several such layers over its rows (`RowSplitLinear`), with the one scale."""
    from torch.ao.quantization.qconfig import default_dynamic_qconfig

    weight = linear.weight.detach()
    bias = None if linear.bias is None else linear.bias.detach().float()
    # torch.ao.quantization announces its deprecation on every call, and again for the
    # quantized tensors it makes; its eager dynamic path is still the fastest int8 on a CPU
    # in this torch (see the measurements above), and tests pin that it works.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", r".*quantized tensor creation", UserWarning)
        observer = default_dynamic_qconfig.weight()
        for start in range(0, weight.shape[0], _BLOCK_ROWS):  # the running min and max
            observer(weight[start : start + _BLOCK_ROWS].float())
        if weight.numel() <= _LARGE_LAYER:
            return _packed(weight, bias, observer)
        rows = max(1, _LARGE_LAYER // weight.shape[1])
        parts = [
            _packed(
                weight[start : start + rows],
                bias[start : start + rows] if bias is not None else None,
                observer,
            )
            for start in range(0, weight.shape[0], rows)
        ]
        return RowSplitLinear(parts)


def _packed(weight: torch.Tensor, bias: torch.Tensor | None, observer: nn.Module) -> nn.Module:
    """fbgemm's dynamic int8 layer for `weight`'s rows, at the scale `observer` chose."""
    from torch.ao.nn.quantized.modules.utils import _clamp_weights

    scale, zero_point = observer.calculate_qparams()
    scale, zero_point = float(scale), int(zero_point)
    int8 = torch.empty(weight.shape, dtype=torch.int8)
    for start in range(0, weight.shape[0], _BLOCK_ROWS):
        block = weight[start : start + _BLOCK_ROWS].float()
        quantized = torch.quantize_per_tensor(block, scale, zero_point, torch.qint8)
        int8[start : start + _BLOCK_ROWS] = quantized.int_repr()
    qweight = torch._make_per_tensor_quantized_tensor(int8, scale, zero_point)
    qweight = _clamp_weights(qweight, observer, scale, zero_point)
    layer = torch.ao.nn.quantized.dynamic.Linear(
        weight.shape[1], weight.shape[0], dtype=torch.qint8
    )
    layer.set_weight_bias(qweight, bias)
    return layer


class RowSplitLinear(nn.Module):
    """One linear layer as several over its output rows, their outputs side by side.

    Packing a dynamic int8 layer holds about four int8 copies of its weights for a moment
    (the layer's own placeholder, the quantized tensor, its clamped copy, fbgemm's packed
    one), and the 0.5B's tied output layer, 151,936 x 896, is the largest by far: its
    packing was the loading peak (`python -m lab.memory`). Packed a part at a time,
    each part's transients are freed before the next. The parts share one per-tensor scale
    and see the same activations, whose quantization each makes alike from the same
    range, so the product is the unsplit layer's, to the bit (tested)."""

    def __init__(self, parts: list[nn.Module]):
        super().__init__()
        self.parts = nn.ModuleList(parts)
        self.in_features = parts[0].in_features
        self.out_features = sum(part.out_features for part in parts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(x) for part in self.parts], dim=-1)


class Int8WeightOnlyLinear(nn.Module):
    """`nn.Linear` with symmetric int8 weights and a float scale per output channel."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()
        scales = weight.abs().amax(dim=1).clamp(min=1e-8) / 127
        int8 = torch.round(weight / scales[:, None]).clamp(-128, 127).to(torch.int8)
        dtype = linear.weight.dtype
        self.register_buffer("weight", int8.contiguous())
        self.register_buffer("scales", scales.to(dtype))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach())
        self.in_features = linear.in_features
        self.out_features = linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        out = torch.ops.aten._weight_int8pack_mm(rows, self.weight, self.scales.to(x.dtype))
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)
