"""The 4-bit weight-only assistant ("int4-wo"): the layer computes what its dequantized
weights do (pinning the torch kernels' format), its weights take about a quarter of bf16's
bytes, many rows read through its int8 copy, and a tiny model's int4 copy drafts
(losslessness is in test_quantize)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from assisted.models import quantize


def _linear(inputs: int, outputs: int, dtype: torch.dtype, bias: bool = True) -> nn.Linear:
    torch.manual_seed(0)
    linear = nn.Linear(inputs, outputs, bias=bias)
    with torch.no_grad():
        linear.weight.add_(torch.randn(outputs, 1) * 0.1)  # groups off zero, unlike the init
    return linear.to(dtype)


def _reference(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """The product with the weights dequantized by hand: (q − 8)·s + z, in float32."""
    levels, scales, zeros = quantize.quantize_groups(linear.weight.detach(), linear.weight.dtype)
    weight = quantize.dequantize(levels, scales, zeros)
    bias = None if linear.bias is None else linear.bias.detach().float()
    return nn.functional.linear(x.float(), weight, bias)


@pytest.mark.parametrize("bias", [True, False])
def test_the_layer_s_product_is_that_of_its_dequantized_weights_in_float32(bias):
    # 4160 rows: two packing blocks (`_BLOCK_ROWS`), the second short.
    linear = _linear(128, 4160, torch.float32, bias)
    layer = quantize.Int4WeightOnlyLinear(linear)
    x = torch.randn(2, 3, 128)
    got, expected = layer(x), _reference(linear, x)
    assert got.shape == (2, 3, 4160) and got.dtype == torch.float32
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5 * expected.abs().max())


def test_the_layer_s_product_is_that_of_its_dequantized_weights_in_bfloat16():
    linear = _linear(256, 192, torch.bfloat16)
    layer = quantize.Int4WeightOnlyLinear(linear)
    x = torch.randn(5, 256).to(torch.bfloat16)
    got, expected = layer(x), _reference(linear, x)
    assert got.dtype == torch.bfloat16
    # bf16 has 8 significant bits: the kernel rounds its dequantized weights and its output.
    assert (got.float() - expected).abs().max() < 2**-7 * expected.abs().max()


def test_each_weight_is_within_half_a_step_of_its_level_and_the_levels_span_4_bits():
    weight = _linear(192, 32, torch.float32).weight.detach()
    levels, scales, zeros = quantize.quantize_groups(weight, torch.float32)
    assert levels.min() == 0 and levels.max() == 15
    steps = scales.repeat_interleave(quantize.GROUP_SIZE, dim=1)
    error = (quantize.dequantize(levels, scales, zeros) - weight).abs()
    assert (error <= steps / 2 * (1 + 1e-4)).all()


def test_a_group_of_equal_weights_comes_back_exactly():
    weight = torch.zeros(16, 64)
    weight[3] = 0.25
    levels, scales, zeros = quantize.quantize_groups(weight, torch.bfloat16)
    assert levels.min() >= 0 and levels.max() <= 15
    assert torch.equal(quantize.dequantize(levels, scales, zeros), weight)


def test_the_kernel_takes_multiples_of_16_rows_and_64_inputs_only():
    assert quantize.fits(nn.Linear(64, 16)) and quantize.fits(nn.Linear(896, 151936))
    assert not quantize.fits(nn.Linear(64, 300)) and not quantize.fits(nn.Linear(96, 32))


def test_the_weights_take_about_a_quarter_of_bf16_s_bytes():
    # Four bits a weight, plus a bf16 scale and zero per 64: 9/32 of bf16's 16 bits.
    linear = _linear(896, 4864, torch.bfloat16, bias=False)
    ratio = quantize.weights_bytes(quantize.Int4WeightOnlyLinear(linear)) / quantize.weights_bytes(
        linear
    )
    assert ratio == pytest.approx(9 / 32)


def test_many_rows_read_through_the_int8_copy_and_fewer_through_the_int4_kernel():
    linear = _linear(256, 192, torch.bfloat16)
    (layer,) = quantize.quantized_copy(nn.Sequential(linear), "int4-wo")
    assert layer.many_rows is not None
    alone = quantize.Int4WeightOnlyLinear(linear)
    torch.manual_seed(1)
    with torch.inference_mode():
        for rows in range(1, quantize.MANY_ROWS):
            x = torch.randn(1, rows, 256).to(torch.bfloat16)
            assert torch.equal(layer(x), alone(x)), rows
        x = torch.randn(1, quantize.MANY_ROWS, 256).to(torch.bfloat16)
        got = layer(x)
        assert got.dtype == torch.bfloat16 and got.shape == (1, quantize.MANY_ROWS, 192)
        assert torch.equal(got, layer.many_rows(x.float()).to(torch.bfloat16))
        assert not torch.equal(got, alone(x))
        # Per-tensor int8 weights and activations: within a few percent of the float product.
        expected = nn.functional.linear(x.float(), linear.weight.float(), linear.bias.float())
        assert (got.float() - expected).abs().max() < 0.05 * expected.abs().max()


def test_a_tiny_model_s_int4_copy_computes_what_its_dequantized_weights_do_and_generates(
    tiny_dirs, monkeypatch
):
    # The int4 kernel's product, at every number of rows: the int8 copies are the test above's.
    monkeypatch.setattr(quantize, "MANY_ROWS", 10**9)
    model = AutoModelForCausalLM.from_pretrained(tiny_dirs["other"]).eval()
    quantized = quantize.quantized_copy(model, "int4-wo")
    layers = dict(quantized.named_modules())
    reference = copy.deepcopy(model)
    # The embedding is tied to the output layer: it keeps its float weights in the copy.
    embedding = reference.get_input_embeddings()
    embedding.weight = nn.Parameter(embedding.weight.detach().clone())
    linears = [(n, m) for n, m in reference.named_modules() if type(m) is nn.Linear]
    assert linears and all(type(layers[n]) is quantize.Int4WeightOnlyLinear for n, _ in linears)
    with torch.no_grad():
        for _, linear in linears:
            levels, scales, zeros = quantize.quantize_groups(linear.weight, linear.weight.dtype)
            linear.weight.copy_(quantize.dequantize(levels, scales, zeros))
    ids = torch.tensor([[5, 17, 42, 99, 7, 250, 3]])
    with torch.inference_mode():
        got, expected = quantized(ids).logits, reference(ids).logits
        assert torch.allclose(got, expected, atol=1e-5 * expected.abs().max())
        out = quantized.generate(ids, max_new_tokens=6, do_sample=False)
    assert out.shape == (1, 13)


def test_a_bf16_model_s_int4_copy_drafts_from_about_a_quarter_of_its_linear_bytes(tiny_dirs):
    model = AutoModelForCausalLM.from_pretrained(tiny_dirs["other"], dtype=torch.bfloat16)
    quantized = quantize.quantized_copy(model, "int4-wo")
    layers = dict(quantized.named_modules())
    output = quantized.get_output_embeddings()
    linears = [(n, m) for n, m in model.named_modules() if type(m) is nn.Linear]
    assert linears
    for name, linear in linears:
        layer, bf16_bytes = layers[name], quantize.weights_bytes(linear)
        # The output layer reads one row whatever the input (the drafters keep the last
        # position's logits): it needs no copy for many rows; every other layer has one.
        assert (layer.many_rows is None) == (layer is output), name
        read = quantize.weights_bytes(layer.many_rows) if layer.many_rows is not None else 0
        ratio = (quantize.weights_bytes(layer) - read) / bf16_bytes
        assert 0.25 < ratio < 0.3, name  # 9/32, and a bias, where there is one, in bf16
        if layer.many_rows is not None:
            assert 0.5 <= read / bf16_bytes < 0.6, name  # a byte a weight, a float32 bias


def test_a_layer_the_kernel_refuses_becomes_int8_weight_only():
    model = nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 300))  # 32 inputs; 300 rows
    model.append(nn.Linear(300, 64))  # 300 inputs
    copy = quantize.quantized_copy(model, "int4-wo")
    kinds = [type(layer) for layer in copy]
    assert kinds == [
        quantize.Int4WeightOnlyLinear,
        quantize.Int8WeightOnlyLinear,
        quantize.Int8WeightOnlyLinear,
    ]
    first, second, third = model
    x = torch.randn(2, 64)
    with torch.inference_mode():
        expected = quantize.Int8WeightOnlyLinear(third)(
            quantize.Int8WeightOnlyLinear(second)(quantize.Int4WeightOnlyLinear(first)(x))
        )
        assert torch.equal(copy(x), expected)
