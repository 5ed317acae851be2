"""The assistant's precision on tiny models: quantized assistants stay lossless, the option is
refused where no assistant model exists, the record and the JSON name the precision, and
the torch behaviour the int8 path relies on is pinned."""

from __future__ import annotations

import copy
import gc
import warnings

import pytest
import torch
from torch import nn

from assisted.analysis import stats
from assisted.core.settings import DraftSettings, RunSettings, SettingsError, assistant_precision
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models import pairs, quantize
from assisted.models.pairs import custom_pair, load_pair

PROMPT = "def add(a, b):"
QUANTIZED = ["int8", "int8-wo", "int4-wo"]
GREEDY = RunSettings(max_new_tokens=24)


def draft(quant: str) -> DraftSettings:
    return DraftSettings(num_assistant_tokens=4, confidence_threshold=0.0, assistant_quant=quant)


def records(pair, quant: str) -> dict:
    done = {}
    for event in decoding.compare(pair, PROMPT, GREEDY, draft(quant)):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    return done


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return load_pair(spec, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def self_pair(tiny_dirs):
    target = str(tiny_dirs["target"])
    return load_pair(custom_pair(target, target), device="cpu", dtype="float32")


@pytest.mark.parametrize("quant", QUANTIZED)
def test_a_quantized_assistant_is_lossless(pair, quant):
    done = records(pair, quant)
    plain, assisted = done["plain"], done["assisted"]
    assert stats.drafted(assisted) > 0
    assert assisted.token_ids == plain.token_ids
    assert assisted.assistant_precision == quant
    assert plain.assistant_precision is None


@pytest.mark.parametrize("quant", ["int8", "int8-wo"])
def test_a_quantized_copy_of_the_target_drafts_what_the_target_accepts(self_pair, quant):
    # The same weights, rounded: nearly every candidate should survive verification, and
    # the output is the target's own whatever the assistant drafted. Not int4-wo: in 4
    # bits these random models keep the target's top token at about 40% of positions, as
    # a copy with the weights dequantized by hand does (test_int4 compares the two).
    done = records(self_pair, quant)
    assert done["assisted"].token_ids == done["plain"].token_ids
    assert stats.acceptance_rate(done["assisted"]) > 0.7


@pytest.mark.parametrize("quant", ["int8", "int4-wo"])
def test_a_universal_assistant_with_its_own_tokenizer_takes_a_quantized_copy(tiny_dirs, quant):
    # Its vocabulary of 300 gives an output layer that the int4 kernel refuses (300 rows,
    # not a multiple of 16): int4-wo makes it an int8 weight-only layer.
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other_tokenizer"]), "universal")
    universal = load_pair(spec, device="cpu", dtype="float32")
    done = records(universal, quant)
    assert done["assisted"].assistant_precision == quant
    assert done["assisted"].token_ids == done["plain"].token_ids


def _fresh(tiny_dirs):
    """A pair of its own, loaded again: these tests release and reload its assistant."""
    pairs._loaded.entries.clear()
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return load_pair(spec, device="cpu", dtype="float32")


def test_the_copy_is_made_once_and_the_assistant_as_loaded_is_released_until_asked_for(
    tiny_dirs,
):
    pair = _fresh(tiny_dirs)
    first = pair.drafting_assistant("int8")
    assert pair.drafting_assistant("int8") is first
    assert pair.assistant is None  # only the int8 copy drafts: the float one is released
    loaded = pair.drafting_assistant("none")  # asked for: loaded again from its folder …
    assert any(type(m) is nn.Linear for m in loaded.modules())
    assert pair.drafting_assistant("int8-wo") is not None
    assert pair.drafting_assistant("none") is loaded  # … and kept from then on
    assert not any(type(m) is nn.Linear for m in first.modules())


def test_a_pair_holds_the_target_and_its_quantized_copy_once_the_assistant_is_released(
    tiny_dirs,
):
    pair = _fresh(tiny_dirs)
    loaded = quantize.weights_bytes(pair.assistant)
    assert pair.memory_bytes() == quantize.weights_bytes(pair.target) + loaded
    copy = pair.drafting_assistant("int8")
    linear = [m for m in copy.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    packed = sum(m.weight().numel() for m in linear)  # one byte each
    assert packed and quantize.weights_bytes(copy) >= packed
    assert quantize.weights_bytes(copy) < loaded
    assert pair.memory_bytes() == quantize.weights_bytes(pair.target) + quantize.weights_bytes(copy)


@pytest.mark.parametrize("copies", ["sibling", "pair"])
def test_once_a_sibling_or_the_pair_makes_the_int8_copy_neither_holds_the_assistant(
    tiny_dirs, copies
):
    """The benchmark's drafter variants are copies of the pair sharing its models
    (`bench.with_drafter`): the assistant as loaded is released on every one of them."""
    from assisted import bench

    pair = _fresh(tiny_dirs)
    sibling = bench.with_drafter(pair, "universal")
    assert sibling.assistant is pair.assistant
    (sibling if copies == "sibling" else pair).drafting_assistant("int8")
    held = quantize.weights_bytes(pair.target) + quantize.weights_bytes(
        pair.assistant_copies["int8"]
    )
    assert pair.memory_bytes() == sibling.memory_bytes() == held
    assert pair.assistant is None and sibling.assistant is None
    # Asked for again by one, it is loaded once, for both.
    assert pair.drafting_assistant("none") is sibling.assistant


def test_a_sibling_that_drafted_with_the_assistant_keeps_it_for_all(tiny_dirs):
    from assisted import bench

    pair = _fresh(tiny_dirs)
    sibling = bench.with_drafter(pair, "universal")
    loaded = pair.drafting_assistant("none")
    sibling.drafting_assistant("int8")
    assert pair.assistant is loaded and sibling.assistant is loaded


def test_the_int8_copy_leaves_no_float32_copy_of_the_assistant_s_linear_weights(tiny_dirs):
    # Tensors alive before this pair loads belong to earlier tests (a pair another test left
    # cached holds these same tiny weights); held here, so that their ids are not reused.
    earlier = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
    pair = _fresh(tiny_dirs)
    weights = [m.weight.detach().clone() for m in pair.assistant.modules() if type(m) is nn.Linear]
    embedding = pair.assistant.get_input_embeddings().weight.detach().clone()
    pair.drafting_assistant("int8")
    gc.collect()
    mine = {id(t) for t in (*weights, embedding, *earlier)}  # the clones kept here, and theirs
    reachable = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and id(o) not in mine]
    shapes = {tuple(w.shape) for w in weights}
    float32 = [t for t in reachable if t.dtype == torch.float32 and tuple(t.shape) in shapes]
    # The embedding stays float32 (the int8 model's activations are float32): tied to the
    # output layer in these models, it has that layer's shape, and is allowed.
    leftovers = [
        t for t in float32 for w in weights if torch.equal(t, w) and not torch.equal(t, embedding)
    ]
    assert not leftovers


def test_a_consumed_layer_s_weights_are_freed_before_the_next_layer_is_copied(tiny_dirs):
    import weakref

    original = _fresh(tiny_dirs).assistant
    head = original.get_output_embeddings()  # tied: the embedding keeps its weight
    weights = {
        name: weakref.ref(m.weight)
        for name, m in original.named_modules()
        if type(m) is nn.Linear and m is not head
    }
    copied: list[str] = []
    structure = quantize._structure(original)
    for parent, name, linear in quantize._linears(structure, original):
        # Each layer copied before the last is consumed by now, and nothing holds its weights.
        alive = [done for done in copied[:-1] if done in weights and weights[done]() is not None]
        assert not alive, alive
        setattr(parent, name, nn.Identity())
        del linear
        copied.append(next(n for n, m in structure.named_modules() if m is parent) + f".{name}")
        gc.collect()
    assert len(copied) > 2 and all(ref() is None for ref in weights.values())


def test_the_int8_copy_is_the_one_quantize_dynamic_makes_of_a_float_copy(pair):
    assistant = pair.drafting_assistant("none")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.ao.quantization.quantize_dynamic(
            nn.Module.float(copy.deepcopy(assistant)), {nn.Linear}, dtype=torch.qint8
        )
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.inference_mode():
        expected = reference(input_ids=ids).logits
        got = quantize.quantize_int8(assistant)(input_ids=ids).logits
    assert torch.equal(got, expected)


@pytest.mark.parametrize("precision", QUANTIZED)
def test_a_consumed_assistant_gives_up_each_linear_weight_for_the_same_copy(tiny_dirs, precision):
    pair = _fresh(tiny_dirs)
    assistant = pair.assistant
    embedding = assistant.get_input_embeddings().weight
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.inference_mode():
        expected = quantize.quantized_copy(assistant, precision)(input_ids=ids).logits
        consumed = quantize.quantized_copy(assistant, precision, consume=True)
        got = consumed(input_ids=ids).logits
    assert torch.equal(got, expected)  # the copy is the one a copy without consuming is
    linears = [m for m in assistant.modules() if type(m) is nn.Linear]
    tied = [m for m in linears if m.weight is embedding]  # the embedding still holds it
    assert linears and all(m.weight.numel() == 0 for m in linears if m not in tied)
    assert embedding.numel() > 0


def test_the_int8_copy_consumes_the_assistant_it_releases_and_not_one_kept(tiny_dirs):
    pair = _fresh(tiny_dirs)
    released = pair.assistant
    pair.drafting_assistant("int8")
    assert pair.assistant is None
    assert all(m.weight.numel() == 0 for m in released.modules() if type(m) is nn.Linear)
    kept = pair.drafting_assistant("none")  # loaded again, and kept from now on
    pair.drafting_assistant("int8-wo")
    assert pair.assistant is kept
    assert all(m.weight.numel() > 0 for m in kept.modules() if type(m) is nn.Linear)


def test_a_layer_quantized_block_by_block_is_the_one_quantize_dynamic_makes(monkeypatch):
    monkeypatch.setattr(quantize, "_BLOCK_ROWS", 3)  # 10 rows: four blocks, the last short
    torch.manual_seed(0)
    linear = nn.Linear(16, 10).to(torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wide = nn.Sequential(nn.Module.float(copy.deepcopy(linear)))
        reference = torch.ao.quantization.quantize_dynamic(wide, {nn.Linear}, torch.qint8)[0]
    got = quantize._dynamic_int8(linear)
    assert torch.equal(got.weight().int_repr(), reference.weight().int_repr())
    assert got.weight().q_scale() == reference.weight().q_scale()
    x = torch.randn(2, 16)
    assert torch.equal(got(x), reference(x))


@pytest.mark.parametrize("bias", [True, False])
def test_a_large_layer_split_by_rows_gives_the_unsplit_layers_product(monkeypatch, bias):
    torch.manual_seed(0)
    linear = nn.Linear(16, 10, bias=bias).to(torch.bfloat16)
    whole = quantize._dynamic_int8(linear)
    monkeypatch.setattr(quantize, "_LARGE_LAYER", 16 * 3)  # 3 rows a part: four parts
    split = quantize._dynamic_int8(linear)
    assert isinstance(split, quantize.RowSplitLinear)
    assert [part.out_features for part in split.parts] == [3, 3, 3, 1]
    assert {part.weight().q_scale() for part in split.parts} == {whole.weight().q_scale()}
    x = torch.randn(2, 5, 16)
    assert torch.equal(split(x), whole(x))
    assert quantize.weights_bytes(split) == quantize.weights_bytes(whole)


def test_the_drafting_time_is_measured_on_the_quantized_copy(pair):
    assisted = records(pair, "int8")["assisted"]
    assert assisted.draft_forward_s  # the hooks sat on the model that drafted
    assert stats.cost_ratio(records(pair, "none")["plain"], assisted) is not None


def test_auto_drafts_with_the_4_bit_assistant_on_a_bf16_pair(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    bf16 = load_pair(spec, device="cpu", dtype="bfloat16")
    assisted = records(bf16, "auto")["assisted"]
    assert assisted.assistant_precision == "int4-wo" and stats.drafted(assisted) > 0
    assert set(bf16.assistant_copies) == {"int4-wo"}


def test_the_report_names_the_assistant_precision(pair):
    for quant, expected in (("int8", "int8"), ("none", "float32"), ("auto", "int8")):
        done = records(pair, quant)
        result = stats.report("tiny", "cpu", "float32", done["plain"], done["assisted"])
        assert result["assisted"]["assistant_precision"] == expected


@pytest.mark.parametrize("drafter", ["prompt-lookup", "early-exit"])
@pytest.mark.parametrize("quant", QUANTIZED)
def test_drafters_without_a_model_refuse_an_int8_precision(drafter, quant):
    with pytest.raises(
        SettingsError,
        match=f"'{quant}' applies to assistant models; the "
        f"'{drafter}' drafter runs no separate model",
    ):
        draft(quant).validate_for(drafter)
    # "auto" and "none" mean "as it is" for them
    draft("auto").validate_for(drafter)
    draft("none").validate_for(drafter)


def test_a_prompt_lookup_run_refuses_int8_before_generating(tiny_dirs):
    lookup = load_pair(custom_pair(str(tiny_dirs["target"]), None), "cpu", "float32")
    ids = encode_prompt(lookup, PROMPT)
    with pytest.raises(SettingsError, match="no separate model"):
        next(decoding.run(lookup, ids, "assisted", GREEDY, draft("int8")))
    run = list(decoding.run(lookup, ids, "assisted", GREEDY, draft("auto")))
    assert run[-1].record.assistant_precision is None


def test_auto_is_int4_on_a_bf16_cpu_int8_on_an_fp32_one_and_the_pairs_dtype_on_a_gpu():
    cpu, cuda = "cpu", "cuda"  # the device's type
    bf16, fp32 = "bfloat16", "float32"  # `LoadedPair.dtype_name`
    assert assistant_precision("auto", "assistant", cpu, bf16) == "int4-wo"
    assert assistant_precision("auto", "assistant", cpu, fp32) == "int8"
    assert assistant_precision("auto", "universal", cuda, bf16) == "none"
    assert assistant_precision("none", "assistant", cpu, bf16) == "none"
    assert assistant_precision("int8", "assistant", cpu, bf16) == "int8"
    assert assistant_precision("int8-wo", "assistant", cpu, fp32) == "int8-wo"
    assert assistant_precision("int4-wo", "assistant", cpu, fp32) == "int4-wo"
    assert assistant_precision("auto", "prompt-lookup", cpu, bf16) == "none"
    for quant in QUANTIZED:
        with pytest.raises(SettingsError, match="CPU kernels"):
            assistant_precision(quant, "assistant", cuda, bf16)


def test_an_unknown_precision_is_refused_and_every_known_one_accepted():
    with pytest.raises(SettingsError, match="assistant precision must be one of"):
        draft("int3").validate()
    for quant in ("auto", "none", *QUANTIZED):
        draft(quant).validate_for("assistant")


# -- the torch behaviour the int8 path relies on (an upgrade that changes it must fail here)


def test_dynamic_int8_swaps_every_linear_layer_and_says_nothing(pair):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quantized = quantize.quantize_int8(pair.assistant)
    assert not caught, [str(w.message) for w in caught]
    linear = [m for m in pair.assistant.modules() if type(m) is nn.Linear]
    dynamic = torch.ao.nn.quantized.dynamic.Linear
    swapped = [m for m in quantized.modules() if type(m) is dynamic]
    assert linear and len(swapped) == len(linear)
    assert not any(type(m) is nn.Linear for m in quantized.modules())


def test_weight_only_int8_matches_the_float_product_closely():
    torch.manual_seed(0)
    linear = nn.Linear(64, 32, bias=True)
    x = torch.randn(3, 5, 64)
    quantized = quantize.Int8WeightOnlyLinear(linear)
    assert quantized.weight.dtype == torch.int8
    exact, approx = linear(x), quantized(x)
    assert approx.shape == exact.shape
    assert (approx - exact).abs().max() < 0.05 * exact.abs().max()
