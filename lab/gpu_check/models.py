"""Random models at real shapes: a registry model built from its published architecture
(`architectures`) with random weights, on a device, or at toy widths where only its
kernels' launches should cost (a CPU test, the launch-bound floor).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import transformers

from lab.gpu_check.architectures import Architecture

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


def free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


# The input embedding's gain: the residual stream then carries the last token's embedding
# past the sum of the random layers' outputs, each of which sees its input normalised.
EMBEDDING_GAIN = 1000.0


def peaked(model, never: int, seed: int = 0) -> None:
    """Give `model` (random weights, no final logit soft cap) a greedy output that rounding
    cannot flip between a one-row pass and a nine-row verification.

    Random weights give near-uniform logits: of 152k, the top two differ by a few hundredths
    of their spread, and bf16 rounding, which differs by the rows a pass verifies, flips the
    argmax between them. Here the input embedding gains `EMBEDDING_GAIN`, so the final
    hidden state is nearly the last token's embedding e_t, and the output layer becomes the
    embedding's rows in a seeded cycle: after t, the logit of t's successor is e_t·e_t, its
    rivals' e_t·e_s, a margin of about √width of their spreads. The last `never` ids (a word
    tokenizer's markers and end of sequence) get zero rows and are never the argmax, so a
    run runs to its length. Widths and kernels are unchanged, hence every pass's cost; an
    output layer tied to the embedding is untied."""
    text = model.config.get_text_config()
    if getattr(text, "final_logit_softcapping", None):
        raise ValueError("a soft cap squeezes the margin: no peaked logits for this model")
    with torch.no_grad():
        embedding = model.get_input_embeddings().weight
        head = model.get_output_embeddings()
        generator = torch.Generator().manual_seed(seed)
        cycle = torch.randperm(head.weight.shape[0] - never, generator=generator)
        cycle = cycle.to(embedding.device)
        rows = torch.zeros_like(head.weight)
        rows[cycle.roll(-1)] = embedding[cycle]  # t's row goes to its successor's place
        head.weight = torch.nn.Parameter(rows, requires_grad=False)
        text.tie_word_embeddings = False
        embedding.mul_(EMBEDDING_GAIN)
