"""Each registry model's published architecture, from its config.json: enough to build it
with random weights where its own are out of reach (the GPU check times it on a GPU that
reaches no Hub), and to count its parameters against its model card's size
(`registry.Size`, checked in tests/models/test_registry_pairs.py). Plain data, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Architecture:
    """A decoder's config.json facts that set its cost: widths, depth, heads, vocabulary.
    `head_dim` None is `hidden_size // heads`; `extra` holds the config's other keys that
    change its computation (Gemma 2's sliding window and soft caps, Qwen2's window switch)."""

    model_type: str  # "qwen2", "llama" or "gemma2"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layers: int
    heads: int
    kv_heads: int
    tie: bool
    head_dim: int | None = None
    extra: tuple[tuple[str, object], ...] = ()

    @property
    def head_width(self) -> int:
        return self.head_dim or self.hidden_size // self.heads

    def config(self) -> dict:
        """Its config.json's keys, for `transformers.AutoConfig.for_model`."""
        return {
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_width,
            "tie_word_embeddings": self.tie,
            **dict(self.extra),
        }

    def parameters(self) -> int:
        """Its parameter count: embeddings (and an untied head), each layer's attention
        (Qwen2 has biases on q, k and v), gated MLP and norms, the final norm."""
        hidden, queries = self.hidden_size, self.heads * self.head_width
        keys = self.kv_heads * self.head_width
        attention = hidden * queries + 2 * hidden * keys + queries * hidden
        if self.model_type == "qwen2":
            attention += queries + 2 * keys
        norms = (4 if self.model_type == "gemma2" else 2) * hidden
        layer = attention + 3 * hidden * self.intermediate_size + norms
        embeddings = self.vocab_size * hidden * (1 if self.tie else 2)
        return embeddings + self.layers * layer + hidden


QWEN2_WINDOW = (("sliding_window", 131072), ("use_sliding_window", False))  # off, as in all
QWEN2_5_7B = Architecture("qwen2", 152064, 3584, 18944, 28, 28, 4, False, extra=QWEN2_WINDOW)
QWEN2_5_1_5B = Architecture("qwen2", 151936, 1536, 8960, 28, 12, 2, True)
QWEN2_5_0_5B = Architecture("qwen2", 151936, 896, 4864, 24, 14, 2, True)
SMOLLM2_1_7B = Architecture("llama", 49152, 2048, 8192, 24, 32, 32, True)
SMOLLM2_135M = Architecture("llama", 49152, 576, 1536, 30, 9, 3, True)
LLAMA3_1_8B = Architecture("llama", 128256, 4096, 14336, 32, 32, 8, False)
LLAMA3_2_1B = Architecture("llama", 128256, 2048, 8192, 16, 32, 8, True, head_dim=64)
GEMMA2_9B = Architecture(
    "gemma2",
    256000,
    3584,
    14336,
    42,
    16,
    8,
    True,
    head_dim=256,
    extra=(
        ("sliding_window", 4096),
        ("query_pre_attn_scalar", 256),
        ("attn_logit_softcapping", 50.0),
        ("final_logit_softcapping", 30.0),
    ),
)
VICUNA_68M = Architecture("llama", 32000, 768, 3072, 2, 12, 12, False)

# By the model ids the registry names (the embedded pair's are GGUF conversions of the
# Coder 1.5B and 0.5B: the same architectures).
ARCHITECTURES: dict[str, Architecture] = {
    "embedded:target": QWEN2_5_1_5B,
    "embedded:assistant": QWEN2_5_0_5B,
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": QWEN2_5_1_5B,
    "Qwen/Qwen2.5-Coder-0.5B-Instruct": QWEN2_5_0_5B,
    "Qwen/Qwen2.5-0.5B-Instruct": QWEN2_5_0_5B,
    "Qwen/Qwen2.5-Coder-7B-Instruct": QWEN2_5_7B,
    "Qwen/Qwen2.5-7B-Instruct": QWEN2_5_7B,
    "HuggingFaceTB/SmolLM2-1.7B-Instruct": SMOLLM2_1_7B,
    "HuggingFaceTB/SmolLM2-135M-Instruct": SMOLLM2_135M,
    "meta-llama/Llama-3.1-8B-Instruct": LLAMA3_1_8B,
    "meta-llama/Llama-3.2-1B-Instruct": LLAMA3_2_1B,
    "facebook/layerskip-llama3.2-1B": LLAMA3_2_1B,
    "google/gemma-2-9b-it": GEMMA2_9B,
    "double7/vicuna-68m": VICUNA_68M,
}
