"""Tiny models built in the test session: a BPE tokenizer trained on a few sentences and
random models (Qwen2-shaped unless asked otherwise). Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "The quick brown fox jumps over the lazy dog.",
    "Speculative decoding drafts tokens with a small model and verifies them with a large one.",
    "Summarise the following text in one sentence, please.",
    "Héllo wörld, naïve café: ünïcode text with accents and € signs, 日本語 too.",
    "for i in range(10):\n    print(i * i)\n",
]


def build_tokenizer(
    folder: Path, vocab_size: int = 400, corpus: list[str] = CORPUS
) -> PreTrainedTokenizerFast:
    """A BPE tokenizer trained on `corpus`; on another corpus, its vocabulary holds tokens
    that one trained on `CORPUS` lacks."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus * 4, trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    wrapped.save_pretrained(folder)
    return wrapped


def build_model(
    folder: Path,
    tokenizer: PreTrainedTokenizerFast,
    seed: int,
    layers: int = 2,
    vocab_size: int | None = None,
    model_type: str = "qwen2",
    tie: bool = True,
    **config: object,
) -> None:
    """A random model of `model_type` (`config` adds to its config, e.g. sliding_window). A
    large init scale makes logits peaked, so greedy choices are not near-ties that float
    rounding could flip. A `vocab_size` above the tokenizer's pads the embeddings, as
    published checkpoints do, with rows the model never picks (`_never_pick_padding`)."""
    torch.manual_seed(seed)
    config = AutoConfig.for_model(
        model_type,
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=256,
        initializer_range=0.3,
        tie_word_embeddings=tie,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **config,
    )
    model = AutoModelForCausalLM.from_config(config).eval()
    if config.vocab_size > len(tokenizer):
        _never_pick_padding(model, len(tokenizer))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _never_pick_padding(model: torch.nn.Module, real: int) -> None:
    """Make the rows from `real` on lose every choice, as a trained model's padding rows do:
    hidden feature 0 is a constant that no layer writes, and padding rows weigh it -100."""
    with torch.no_grad():
        model.get_input_embeddings().weight[:real, 0] = 1.0
        for name, weight in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                weight[0] = 0.0  # layers leave feature 0 as the embedding set it
        head = model.get_output_embeddings().weight
        head[real:] = 0.0
        head[real:, 0] = -100.0


def build_near_model(folder: Path, source: Path, scale: float = 0.3, seed: int = 7) -> None:
    """A copy of the model in `source` with noise of `scale` on its last MLP's weights: an
    assistant that agrees with it on some tokens only, so that speculative sampling both
    keeps and rejects drafts (a random model is rejected almost always)."""
    model = AutoModelForCausalLM.from_pretrained(source)
    torch.manual_seed(seed)
    last = f"layers.{model.config.num_hidden_layers - 1}.mlp"
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if last in name:
                weight.add_(torch.randn_like(weight) * scale)
    model.save_pretrained(folder)
    PreTrainedTokenizerFast.from_pretrained(source).save_pretrained(folder)
