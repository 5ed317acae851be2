"""Pair validation and loading: every bad input is a clear PairError and breaks nothing."""

from __future__ import annotations

import json
from collections import OrderedDict

import pytest
import torch
from transformers import AutoConfig, AutoTokenizer, MambaConfig, ViTConfig

from assisted.core.settings import DrafterKind
from assisted.models import loading, pairs, registry
from assisted.models.pairs import PairError, custom_pair, get_spec, load_pair, resolve_model_ref
from tests.tiny import build_model


@pytest.fixture(autouse=True)
def empty_cache():
    pairs._loaded.entries.clear()
    yield
    pairs._loaded.entries.clear()


def test_registry_has_every_drafter_kind_and_an_offline_default():
    kinds = {spec.drafter for spec in registry.PAIRS.values()}
    assert kinds == set(DrafterKind)
    default = get_spec(registry.DEFAULT_PAIR)
    assert default.target.startswith("embedded:") and default.assistant.startswith("embedded:")


def test_unknown_pair():
    with pytest.raises(PairError, match=r"unknown pair 'nope'.*embedded"):
        get_spec("nope")


@pytest.mark.parametrize(
    "ref",
    [
        "../no-such-model",
        "a/b/c",
        "https://evil.example/model",
        "bad id",
        "owner/na me",
        "",
        "-x/y",
    ],
)
def test_malformed_model_ids_are_refused(ref):
    with pytest.raises(PairError, match="not a model id"):
        resolve_model_ref(ref)


def test_hub_ids_pass_validation_without_network():
    assert resolve_model_ref("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert resolve_model_ref("gpt2") == "gpt2"


def test_local_folders_need_a_config(tmp_path):
    with pytest.raises(PairError, match=r"without config\.json"):
        resolve_model_ref(str(tmp_path))


def test_local_folders_can_be_disallowed(tiny_dirs):
    with pytest.raises(PairError, match="not a model id"):
        resolve_model_ref(str(tiny_dirs["target"]), allow_local=False)


def test_custom_pair_checks_the_drafter():
    with pytest.raises(PairError, match="needs an assistant"):
        custom_pair("a/b", None, "assistant")
    with pytest.raises(PairError, match="uses no assistant"):
        custom_pair("a/b", "c/d", "prompt-lookup")
    with pytest.raises(PairError, match="unknown drafter"):
        custom_pair("a/b", "c/d", "telepathy")
    assert custom_pair("a/b", None).drafter == "prompt-lookup"


def test_different_tokenizers_need_the_universal_drafter(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other_tokenizer"]))
    with pytest.raises(PairError, match=r"different tokenizers.*universal"):
        load_pair(spec, device="cpu", dtype="float32")
    universal = custom_pair(
        str(tiny_dirs["target"]), str(tiny_dirs["other_tokenizer"]), "universal"
    )
    assert load_pair(universal, device="cpu", dtype="float32").assistant is not None


def test_a_pair_that_generate_would_refuse_is_refused_before_its_weights_load(
    tiny_dirs, monkeypatch
):
    kept = load_pair(custom_pair(str(tiny_dirs["target"]), None), "cpu")
    loads = []
    monkeypatch.setattr(pairs, "load_model", lambda *args, **kwargs: loads.append(args))
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other_tokenizer"]))
    with pytest.raises(PairError, match=r"different tokenizers; pick the 'universal' drafter"):
        load_pair(spec, device="cpu", dtype="float32")
    assert loads == [] and pairs.loaded_pairs() == [kept.spec.name]


def test_a_pair_is_checked_once_and_its_verdict_kept(tiny_dirs, monkeypatch):
    """Checking loads both tokenizers (seconds for a real pair): once per process."""
    monkeypatch.setattr(pairs, "_verdicts", {})
    checked, check = [], pairs.check_pair

    def counted(spec, folders):
        checked.append(spec)
        check(spec, folders)

    monkeypatch.setattr(pairs, "check_pair", counted)
    target = str(tiny_dirs["target"])
    good = custom_pair(target, str(tiny_dirs["other"]))
    bad = custom_pair(target, str(tiny_dirs["other_tokenizer"]))
    for _ in range(3):
        pairs.fetch_pair(good)
        with pytest.raises(PairError, match=r"different tokenizers; pick the 'universal'"):
            pairs.fetch_pair(bad)
    assert load_pair(good, device="cpu", dtype="float32").assistant is not None
    assert load_pair(good, device="cpu", dtype="float32") is pairs.loaded(good, "cpu", "float32")
    assert checked == [good, bad]


def test_one_tokenizer_is_known_from_its_files_without_loading_it(tiny_dirs, monkeypatch):
    import transformers

    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    folders = [str(tiny_dirs["target"]), str(tiny_dirs["other"])]
    assert pairs.same_tokenizer_files(folders)
    assert not pairs.same_tokenizer_files([folders[0], str(tiny_dirs["other_tokenizer"])])

    def unloadable(*args, **kwargs):
        raise AssertionError("loaded a tokenizer its files already told apart")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", unloadable)
    pairs.check_pair(spec, folders)  # passes: one tokenizer
    with pytest.raises(PairError, match="share one tokenizer"):
        pairs.check_pair(custom_pair(*folders, "universal"), folders)


def test_the_universal_drafter_needs_vocab_sizes_that_differ(tiny_dirs, tmp_path):
    """Transformers tells tokenizers apart by the configs' vocab sizes: with equal ones it
    refuses `assistant_tokenizer` ("not required")."""
    target = str(tiny_dirs["target"])
    same = custom_pair(target, str(tiny_dirs["other"]), "universal")
    with pytest.raises(PairError, match="share one tokenizer; pick the 'assistant' drafter"):
        load_pair(same, device="cpu", dtype="float32")
    other = AutoTokenizer.from_pretrained(tiny_dirs["other_tokenizer"])
    size = AutoConfig.from_pretrained(target).vocab_size
    build_model(tmp_path, other, seed=6, vocab_size=size)  # another tokenizer, padded to 400
    lookalike = custom_pair(target, str(tmp_path), "universal")
    with pytest.raises(PairError, match=r"same vocabulary size \(400\).*cannot run universal"):
        load_pair(lookalike, device="cpu", dtype="float32")


def test_a_padded_assistant_takes_the_target_vocab_size_and_reads_any_target_id(padded_dirs):
    pair = load_pair(
        custom_pair(str(padded_dirs["target"]), str(padded_dirs["assistant"])), "cpu", "float32"
    )
    assert pair.assistant.config.vocab_size == pair.target.config.vocab_size == 152064
    # An id of the target's padding rows, which the assistant has no row for.
    ids = torch.tensor([[5, 152063]])
    for precision in ("none", "int8", "int8-wo", "int4-wo"):
        logits = pair.drafting_assistant(precision)(ids).logits
        assert logits.shape == (1, 2, 152064)
        assert (logits[..., 151936:] == torch.finfo(logits.dtype).min).all()


def test_a_model_that_is_not_a_causal_lm_is_refused(tmp_path):
    ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2).save_pretrained(tmp_path)
    spec = custom_pair(str(tmp_path), None)
    with pytest.raises(PairError, match="not a causal language model"):
        load_pair(spec, device="cpu")


def test_a_model_whose_cache_cannot_be_cropped_is_refused(tmp_path):
    MambaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1).save_pretrained(tmp_path)
    spec = custom_pair(str(tmp_path), None)
    with pytest.raises(PairError, match="cannot be cropped"):
        load_pair(spec, device="cpu")


def test_remote_code_is_never_trusted(tmp_path):
    config = {"model_type": "totally_custom", "auto_map": {"AutoConfig": "x.Config"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "x.py").write_text("raise SystemExit('remote code ran')\n")
    with pytest.raises(PairError, match="cannot load the config"):
        load_pair(custom_pair(str(tmp_path), None), device="cpu")


def test_oversized_weights_are_refused_before_loading(tiny_dirs, monkeypatch):
    monkeypatch.setattr(pairs, "MAX_MODEL_GB", 1e-6)
    with pytest.raises(PairError, match="ASSISTED_MAX_MODEL_GB"):
        load_pair(custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"])), device="cpu")


def test_a_failed_load_keeps_the_loaded_pairs(tiny_dirs, tmp_path, monkeypatch):
    monkeypatch.setattr(pairs, "MAX_LOADED_PAIRS", 2)
    lookup = load_pair(custom_pair(str(tiny_dirs["target"]), None), "cpu")
    good = load_pair(custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"])), "cpu")
    MambaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1).save_pretrained(tmp_path)
    with pytest.raises(PairError):  # the cache is full, yet nothing is evicted for this
        load_pair(custom_pair(str(tmp_path), None), device="cpu")
    assert pairs.loaded_pairs() == [lookup.spec.name, good.spec.name]
    again = load_pair(custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"])), "cpu")
    assert again is good  # served from the cache, not reloaded


def test_at_most_max_loaded_pairs_stay_in_memory(tiny_dirs, monkeypatch):
    monkeypatch.setattr(pairs, "MAX_LOADED_PAIRS", 2)
    target = str(tiny_dirs["target"])
    specs = [
        custom_pair(target, str(tiny_dirs["other"])),
        custom_pair(target, str(tiny_dirs["target"])),
        custom_pair(target, None, "prompt-lookup"),
    ]
    for spec in specs:
        load_pair(spec, device="cpu", dtype="float32")
    assert pairs.loaded_pairs() == [specs[1].name, specs[2].name]


def test_pairs_that_name_one_target_hold_one_copy_of_it(tiny_dirs, monkeypatch):
    from assisted.models.quantize import weights_bytes

    monkeypatch.setattr(pairs, "MAX_LOADED_PAIRS", 3)
    target = str(tiny_dirs["target"])
    drafted = load_pair(custom_pair(target, str(tiny_dirs["other"])), "cpu", "float32")
    alone = pairs.memory_in_use()
    lookup = load_pair(custom_pair(target, None), "cpu", "float32")
    assert lookup.target is drafted.target and lookup.tokenizer is drafted.tokenizer
    assert pairs.memory_in_use() == alone  # the second pair added no weights
    assert alone == weights_bytes(drafted.target) + weights_bytes(drafted.assistant)
    # In another dtype the target is another copy.
    bf16 = load_pair(custom_pair(target, None), "cpu", "bfloat16")
    assert bf16.target is not drafted.target
    # Evicting the first pair leaves the second its target.
    pairs._loaded.evict(next(iter(pairs._loaded.entries)))
    assert pairs.loaded_pairs() == [lookup.spec.name, bf16.spec.name]
    assert next(lookup.target.parameters()).is_floating_point()


def test_dtype_policy():
    cpu = torch.device("cpu")
    native = loading.cpu_has_native_bf16()
    assert loading.choose_dtype(cpu) == (torch.bfloat16 if native else torch.float32)
    assert loading.choose_dtype(cpu, "float32") == torch.float32
    assert loading.choose_dtype(cpu, "bfloat16") == torch.bfloat16
    with pytest.raises(PairError, match="unknown dtype"):
        loading.choose_dtype(cpu, "float8")


def test_device_policy():
    assert pairs.choose_device("cpu").type == "cpu"
    with pytest.raises(PairError, match="unknown device"):
        pairs.choose_device("tpu")
    if not torch.cuda.is_available():
        assert pairs.choose_device().type == "cpu"
        with pytest.raises(PairError, match="no CUDA device"):
            pairs.choose_device("cuda")


def test_pairs_are_evicted_on_the_memory_they_hold(tiny_dirs, monkeypatch):
    monkeypatch.setattr(pairs, "MAX_LOADED_PAIRS", 3)
    target = str(tiny_dirs["target"])
    first = load_pair(custom_pair(target, None), "cpu", "float32")
    one_pair = first.memory_bytes()
    tensors = [*first.target.parameters(), *first.target.buffers()]
    assert one_pair == sum(t.numel() * t.element_size() for t in tensors)  # no assistant
    # Room for one such pair and a half: the second evicts the first, the count allowing 3.
    monkeypatch.setattr(pairs, "MAX_MODEL_GB", 1.5 * one_pair / 1e9)
    second = load_pair(custom_pair(str(tiny_dirs["other"]), None), "cpu", "float32")
    assert pairs.loaded_pairs() == [second.spec.name]
    assert pairs.memory_in_use() == second.memory_bytes() == one_pair


def test_a_pinned_pair_stays_in_memory_whatever_loads_after(tiny_dirs, monkeypatch):
    monkeypatch.setattr(pairs._loaded, "entries", OrderedDict())
    monkeypatch.setattr(pairs._loaded, "pinned", set())
    monkeypatch.setattr(pairs, "MAX_LOADED_PAIRS", 1)
    target = str(tiny_dirs["target"])
    first = pairs.custom_pair(target, str(tiny_dirs["other"]))
    pairs.load_pair(first, device="cpu", dtype="float32")
    pairs.pin(first)
    pairs.load_pair(pairs.custom_pair(target, None), device="cpu", dtype="float32")
    assert pairs.loaded(first, device="cpu", dtype="float32") is not None
    assert len(pairs.loaded_pairs()) == 2  # over the count: a pinned pair is never evicted
    # Nor for memory: room for the next pair's files, not for all three pairs' weights.
    monkeypatch.setattr(pairs, "MAX_MODEL_GB", pairs.memory_in_use() * 0.75 / 1e9)
    pairs.load_pair(pairs.custom_pair(str(tiny_dirs["other"]), None), "cpu", "float32")
    assert pairs.loaded(first, device="cpu", dtype="float32") is not None
