"""Every registry pair, imitated by tiny models with its published config facts: each loads
through our own code path and its assisted output equals plain, greedy in fp32, under its
own draft settings and under `auto`. The table pins the facts each pair rests on, so a new
pair cannot be added without them."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest
import torch

from assisted.core.settings import RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models import machines, pairs
from assisted.models.registry import (
    DEFAULT_PAIR,
    PAIRS,
    Size,
    default_pair_for,
)
from lab.gpu_check.architectures import ARCHITECTURES
from tests.tiny import build_model, build_tokenizer


class Facts(NamedTuple):
    """A model's published config (config.json) facts that assisted generation depends on."""

    model_id: str
    model_type: str
    vocab_size: int
    tokenizer: str  # the family: one name, one tokenizer
    tie: bool  # tie_word_embeddings
    size: Size  # parameters (model card) and num_hidden_layers
    sliding_window: int | None = None
    use_sliding_window: bool | None = None  # Qwen2's switch; None where the config has none


QWEN_7B = Facts(
    "Qwen/Qwen2.5-7B-Instruct", "qwen2", 152064, "qwen2.5", False, Size(7.62, 28), 131072, False
)
QWEN_05B = Facts("Qwen/Qwen2.5-0.5B-Instruct", "qwen2", 151936, "qwen2.5", True, Size(0.49, 24))
CODER_15B = Facts(
    "Qwen/Qwen2.5-Coder-1.5B-Instruct", "qwen2", 151936, "qwen2.5", True, Size(1.54, 28)
)
CODER_05B = Facts(
    "Qwen/Qwen2.5-Coder-0.5B-Instruct", "qwen2", 151936, "qwen2.5", True, Size(0.49, 24)
)
CODER_7B = Facts(
    "Qwen/Qwen2.5-Coder-7B-Instruct", "qwen2", 152064, "qwen2.5", False, Size(7.62, 28)
)
SMOL_17B = Facts(
    "HuggingFaceTB/SmolLM2-1.7B-Instruct", "llama", 49152, "smollm2", True, Size(1.71, 24)
)
SMOL_135M = Facts(
    "HuggingFaceTB/SmolLM2-135M-Instruct", "llama", 49152, "smollm2", True, Size(0.135, 30)
)
LLAMA_8B = Facts(
    "meta-llama/Llama-3.1-8B-Instruct", "llama", 128256, "llama3", False, Size(8.03, 32)
)
LLAMA_1B = Facts(
    "meta-llama/Llama-3.2-1B-Instruct", "llama", 128256, "llama3", True, Size(1.24, 16)
)
GEMMA_9B = Facts("google/gemma-2-9b-it", "gemma2", 256000, "gemma", True, Size(9.24, 42), 4096)
VICUNA_68M = Facts("double7/vicuna-68m", "llama", 32000, "llama2", False, Size(0.068, 2))
LAYERSKIP_1B = Facts(
    "facebook/layerskip-llama3.2-1B", "llama", 128256, "llama3", True, Size(1.24, 16)
)

# Each pair's target and assistant (None: no model of its own). The embedded pair's models
# are the GGUF conversions of the Coder 1.5B and 0.5B (assisted.models.embedded).
PAIR_FACTS: dict[str, tuple[str, Facts, str | None, Facts | None]] = {
    "embedded": ("embedded:target", CODER_15B, "embedded:assistant", CODER_05B),
    "embedded-prompt-lookup": ("embedded:target", CODER_15B, None, None),
    "qwen2.5-coder-7b": (CODER_7B.model_id, CODER_7B, CODER_05B.model_id, CODER_05B),
    "qwen2.5-7b": (QWEN_7B.model_id, QWEN_7B, QWEN_05B.model_id, QWEN_05B),
    "smollm2-1.7b": (SMOL_17B.model_id, SMOL_17B, SMOL_135M.model_id, SMOL_135M),
    "llama-3.1-8b": (LLAMA_8B.model_id, LLAMA_8B, LLAMA_1B.model_id, LLAMA_1B),
    "qwen2.5-coder-7b-prompt-lookup": (CODER_7B.model_id, CODER_7B, None, None),
    "gemma-2-9b-universal": (GEMMA_9B.model_id, GEMMA_9B, VICUNA_68M.model_id, VICUNA_68M),
    "layerskip-llama3.2-1b": (LAYERSKIP_1B.model_id, LAYERSKIP_1B, None, None),
}
GREEDY = RunSettings(max_new_tokens=12)


def test_every_registry_pair_has_its_facts():
    assert set(PAIR_FACTS) == set(PAIRS)
    for name, (target, _, assistant, assistant_facts) in PAIR_FACTS.items():
        spec = PAIRS[name]
        assert (spec.target, spec.assistant) == (target, assistant), name
        assert (assistant_facts is not None) == spec.drafter.has_model, name
        assert spec.target_size == PAIR_FACTS[name][1].size, name
        assert spec.assistant_size == (assistant_facts.size if assistant_facts else None), name


def test_each_models_architecture_is_its_published_config_and_size():
    """What the GPU check builds each model from (`lab.gpu_check.architectures`): the
    facts above, and widths whose parameter count is the model card's."""
    models = {m: f for m, f, a, g in PAIR_FACTS.values() for m, f in ((m, f), (a, g)) if f}
    assert set(models) | {"Qwen/Qwen2.5-Coder-1.5B-Instruct"} == set(ARCHITECTURES)
    for model_id, facts in models.items():
        architecture = ARCHITECTURES[model_id]
        assert architecture.model_type == facts.model_type, model_id
        assert architecture.vocab_size == facts.vocab_size, model_id
        assert (architecture.tie, architecture.layers) == (facts.tie, facts.size.layers)
        assert architecture.parameters() / 1e9 == pytest.approx(facts.size.billions, rel=0.01)
        extra = dict(architecture.extra)
        if facts.sliding_window is not None:  # where the facts pin a window (Qwen's is off)
            assert extra.get("sliding_window") == facts.sliding_window, model_id
            assert extra.get("use_sliding_window") == facts.use_sliding_window, model_id
    assert ARCHITECTURES["embedded:target"] is ARCHITECTURES[CODER_15B.model_id]


def test_every_pair_with_an_assistant_model_that_auto_drives_drafts_under_auto():
    for spec in PAIRS.values():
        if spec.drafter.has_model and spec.drafter.auto_capable:
            assert spec.draft.schedule == "auto", spec.name


def test_the_default_pair_is_a_large_target_on_a_gpu_and_the_embedded_one_on_a_cpu():
    assert default_pair_for("cpu") == DEFAULT_PAIR == "embedded"
    gpu = PAIRS[default_pair_for("cuda")]
    assert gpu.name == default_pair_for("cuda:0") == "qwen2.5-coder-7b"
    assert gpu.target_size.billions >= 7 and gpu.drafter.has_model
    assert gpu.weight_bytes() <= machines.smallest_large_bytes() / 2  # room for caches
    # Offered without it, the next qualifying pair; with none, the default as on a CPU.
    rest = {name: spec for name, spec in PAIRS.items() if name != gpu.name}
    assert default_pair_for("cuda", rest) == "qwen2.5-7b"
    small = {name: PAIRS[name] for name in ("embedded", "smollm2-1.7b")}
    assert default_pair_for("cuda", small) == "embedded"
    assert default_pair_for("cuda", {"smollm2-1.7b": PAIRS["smollm2-1.7b"]}) == "smollm2-1.7b"


def test_the_facts_say_which_pairs_transformers_takes_for_two_tokenizers():
    """Same tokenizer, other config sizes (padded vocabularies) are the pairs that fit."""
    padded = {
        name
        for name, (_, target, _, assistant) in PAIR_FACTS.items()
        if assistant and assistant.tokenizer == target.tokenizer
        if assistant.vocab_size != target.vocab_size
    }
    assert padded == {"qwen2.5-7b", "qwen2.5-coder-7b"}
    gemma = PAIR_FACTS["gemma-2-9b-universal"]
    assert gemma[1].tokenizer != gemma[3].tokenizer  # universal: the sizes must differ too
    assert gemma[1].vocab_size != gemma[3].vocab_size


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, str]:
    """A folder per model id: a tiny model with its published facts. One small tokenizer
    per family (400 real ids; the configs' sizes are the published, padded ones)."""
    root = tmp_path_factory.mktemp("registry")
    tokenizers = {}
    folders = {}
    facts = {f for _, t, _, a in PAIR_FACTS.values() for f in (t, a) if f is not None}
    for seed, model in enumerate(sorted(facts)):
        if model.tokenizer not in tokenizers:  # families differ in their vocabularies
            size = 400 - 25 * len(tokenizers)
            tokenizers[model.tokenizer] = build_tokenizer(root / model.tokenizer, size)
        extra = {"sliding_window": model.sliding_window} if model.sliding_window else {}
        if model.use_sliding_window is not None:
            extra["use_sliding_window"] = model.use_sliding_window
        folder = root / model.model_id.replace("/", "--")
        build_model(
            folder,
            tokenizers[model.tokenizer],
            seed,
            layers=6 if model is LAYERSKIP_1B else 2,
            vocab_size=model.vocab_size,
            model_type=model.model_type,
            tie=model.tie,
            **extra,
        )
        folders[model.model_id] = str(folder)
    return folders


def tiny_spec(name: str, folders: dict[str, str]) -> pairs.PairSpec:
    """The registry pair `name` with its models replaced by tiny ones of the same facts."""
    _, target, _, assistant = PAIR_FACTS[name]
    return dataclasses.replace(
        PAIRS[name],
        target=folders[target.model_id],
        assistant=folders[assistant.model_id] if assistant else None,
    )


def token_ids(pair, draft) -> dict[str, list[int]]:
    done = {}
    for event in decoding.compare(pair, "def add(a, b):", GREEDY, draft):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record.token_ids
    return done


@pytest.mark.parametrize("name", list(PAIRS))
def test_each_registry_pair_assists_losslessly(name, tiny_models):
    spec = tiny_spec(name, tiny_models)
    pair = pairs.load_pair(spec, device="cpu", dtype="float32")
    target_facts = PAIR_FACTS[name][1]
    assert pair.target.config.vocab_size == target_facts.vocab_size
    drafts = [spec.draft]
    if spec.drafter.auto_capable:  # "auto" on a CPU drafts with the int8 assistant
        drafts.append(dataclasses.replace(spec.draft, schedule="auto", assistant_quant="auto"))
    for draft in drafts:
        done = token_ids(pair, draft)
        assert len(done["plain"]) == GREEDY.max_new_tokens  # padding rows never win
        assert max(done["plain"]) < len(pair.tokenizer)
        assert done["assisted"] == done["plain"], (name, draft)


def test_a_padded_pair_samples_with_the_assistant_at_the_target_width(tiny_models):
    """Under sampling Transformers subtracts the assistant's probabilities from the
    target's: one width, and q = 0 where the assistant has no row."""
    pair = pairs.load_pair(tiny_spec("qwen2.5-7b", tiny_models), device="cpu", dtype="float32")
    ids = torch.tensor([encode_prompt(pair, "hello")])
    own_rows = PAIR_FACTS["qwen2.5-7b"][3].vocab_size
    for precision in ("none", "int8"):
        assistant = pair.drafting_assistant(precision)
        with torch.inference_mode():
            logits = assistant(ids).logits
        assert logits.shape[-1] == QWEN_7B.vocab_size
        assert (logits.softmax(-1)[..., own_rows:] == 0).all()
    sampled = RunSettings(max_new_tokens=12, sample=True, seed=3)
    draft = dataclasses.replace(pair.spec.draft, num_assistant_tokens=4)
    runs = [
        event.record
        for event in decoding.compare(pair, "def add(a, b):", sampled, draft)
        if isinstance(event, RunDone)
    ]
    assert [run.mode for run in runs] == ["plain", "assisted"]
    assert all(len(run.token_ids) == 12 for run in runs)
