"""The named model pairs: a target, a drafter and the draft settings each starts with.

A spec is plain data (no torch): the CLI lists it, the app offers it, and `assisted.models.pairs`
loads it. The README's pair table mirrors this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assisted.core.settings import DrafterKind, DraftSettings
from assisted.models import machines


class PairError(ValueError):
    """The pair cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class Size:
    """A model's published size (its config.json and model card): parameters in billions
    and decoder layers. Enough to price it before it has run: its weights' bytes bound a
    step where memory bandwidth does, its layers where kernel launches do."""

    billions: float
    layers: int

    def weight_bytes(self, bytes_per_weight: int = 2) -> float:
        """Bytes of its weights, in bf16 unless told otherwise."""
        return self.billions * 1e9 * bytes_per_weight


@dataclass(frozen=True)
class PairSpec:
    name: str
    target: str
    drafter: DrafterKind
    assistant: str | None = None
    note: str = ""
    early_exit_layer: int | None = None
    draft: DraftSettings = field(default_factory=DraftSettings)
    target_size: Size | None = None  # None for custom pairs: nothing is known before loading
    assistant_size: Size | None = None

    def __post_init__(self) -> None:
        # A kind given by its name becomes the kind itself.
        object.__setattr__(self, "drafter", DrafterKind(self.drafter))

    def weight_bytes(self) -> float | None:
        """The bf16 weights of both models; None where a size is unknown."""
        sizes = [self.target_size, self.assistant_size if self.drafter.has_model else None]
        if sizes[0] is None or (self.drafter.has_model and sizes[1] is None):
            return None
        return sum(size.weight_bytes() for size in sizes if size is not None)


# The `auto` schedule with cap 8, as every pair with an assistant model drafts by default:
# it measures T(k) and the drafting cost on the device it runs on and drafts only where
# that pays, each draft ending where its next candidate would not (docs/auto-policy.md).
# The 0.4 threshold is Transformers' own, for the schedules it drafts (a constant γ, the
# heuristic, sampled drafting).
AUTO = DraftSettings(
    num_assistant_tokens=8,
    schedule="auto",
    confidence_threshold=0.4,
    assistant_quant="auto",
)
CODER_7B = Size(7.62, 28)
CODER_1_5B = Size(1.54, 28)
QWEN_0_5B = Size(0.49, 24)  # Qwen2.5-0.5B and Qwen2.5-Coder-0.5B alike
QWEN_7B = Size(7.62, 28)
LLAMA_1B = Size(1.24, 16)


PAIRS: dict[str, PairSpec] = {
    spec.name: spec
    for spec in (
        PairSpec(
            "embedded",
            "embedded:target",
            DrafterKind.ASSISTANT,
            "embedded:assistant",
            "Qwen2.5-Coder-1.5B-Instruct ← 0.5B, shipped offline (GGUF from PyPI)",
            draft=AUTO,
            target_size=CODER_1_5B,
            assistant_size=QWEN_0_5B,
        ),
        PairSpec(
            "embedded-prompt-lookup",
            "embedded:target",
            DrafterKind.PROMPT_LOOKUP,
            note="Qwen2.5-Coder-1.5B-Instruct drafting from n-grams of its own prompt",
            target_size=CODER_1_5B,
        ),
        PairSpec(
            "qwen2.5-coder-7b",
            "Qwen/Qwen2.5-Coder-7B-Instruct",
            DrafterKind.ASSISTANT,
            "Qwen/Qwen2.5-Coder-0.5B-Instruct",
            "Qwen2.5-Coder-7B-Instruct ← 0.5B (GPU): one tokenizer, 15 times the size",
            draft=AUTO,
            target_size=CODER_7B,
            assistant_size=QWEN_0_5B,
        ),
        PairSpec(
            "qwen2.5-7b",
            "Qwen/Qwen2.5-7B-Instruct",
            DrafterKind.ASSISTANT,
            "Qwen/Qwen2.5-0.5B-Instruct",
            "Qwen2.5-7B-Instruct ← 0.5B (GPU)",
            draft=AUTO,
            target_size=QWEN_7B,
            assistant_size=QWEN_0_5B,
        ),
        PairSpec(
            "smollm2-1.7b",
            "HuggingFaceTB/SmolLM2-1.7B-Instruct",
            DrafterKind.ASSISTANT,
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            "SmolLM2-1.7B-Instruct ← 135M",
            draft=AUTO,
            target_size=Size(1.71, 24),
            assistant_size=Size(0.135, 30),
        ),
        PairSpec(
            "llama-3.1-8b",
            "meta-llama/Llama-3.1-8B-Instruct",
            DrafterKind.ASSISTANT,
            "meta-llama/Llama-3.2-1B-Instruct",
            "Llama-3.1-8B-Instruct ← 3.2-1B (gated: set HF_TOKEN)",
            draft=AUTO,
            target_size=Size(8.03, 32),
            assistant_size=LLAMA_1B,
        ),
        PairSpec(
            "qwen2.5-coder-7b-prompt-lookup",
            "Qwen/Qwen2.5-Coder-7B-Instruct",
            DrafterKind.PROMPT_LOOKUP,
            note="Qwen2.5-Coder-7B-Instruct with prompt lookup: strong on edits of given code",
            target_size=CODER_7B,
        ),
        PairSpec(
            "gemma-2-9b-universal",
            "google/gemma-2-9b-it",
            DrafterKind.UNIVERSAL,
            "double7/vicuna-68m",
            "Gemma-2-9B-it ← Vicuna-68M, different tokenizers (universal assisted generation)",
            target_size=Size(9.24, 42),
            assistant_size=Size(0.068, 2),
        ),
        PairSpec(
            "layerskip-llama3.2-1b",
            "facebook/layerskip-llama3.2-1B",
            DrafterKind.EARLY_EXIT,
            note="LayerSkip Llama-3.2-1B drafting with its first 4 layers",
            early_exit_layer=4,
            target_size=LLAMA_1B,
        ),
    )
}
DEFAULT_PAIR = "embedded"  # on a CPU, and wherever no GPU pair qualifies

# A GPU pair pays where drafting a token costs a small share of a target step. On the
# Space's `large` call, half an RTX PRO 6000 Blackwell (about 0.9 TB/s, an estimate), an
# eager step at batch 1 costs the larger of its weights' bytes and its layers' launches: a
# 1.5B target's 28 layers' launches (about 10 ms), which a 24-layer 0.5B drafting eagerly
# nearly matches; the 7B's 15 GB (about 17 ms). Replayed as CUDA graphs
# (`assisted.engine.drafters.draft_graphs`) the 0.5B's draft cost 4.2 ms a token on an
# H200, the one card measured (docs/space.md): a small share of the 7B's step on the
# slice, a large one of the 1.5B's. So the default is the 7B.
GPU_TARGET_BILLIONS = 7.0
SLICE_SHARE = 0.8  # of the slice the weights may hold: the rest for caches and activations


def default_pair_for(device: str, registry: dict[str, PairSpec] | None = None) -> str:
    """The pair a visitor starts with on `device` ("cuda", "cuda:0" or "cpu"): on CUDA the
    first pair, in the registry's order, whose assistant model `auto` drives and whose
    target has at least `GPU_TARGET_BILLIONS` parameters, both models' bf16 weights within
    a share of the smallest `large` ZeroGPU call's memory (`machines.smallest_large_bytes`:
    48 GB, half an RTX PRO 6000 Blackwell), so the preloaded pair keeps the calls `large`;
    elsewhere, or where none qualifies, `DEFAULT_PAIR`."""
    registry = PAIRS if registry is None else registry
    if device.startswith("cuda"):
        slice_bytes = machines.smallest_large_bytes()
        for spec in registry.values():
            size, weights = spec.target_size, spec.weight_bytes()
            if not (spec.drafter.has_model and spec.drafter.auto_capable) or weights is None:
                continue
            big = size is not None and size.billions >= GPU_TARGET_BILLIONS
            if big and weights <= SLICE_SHARE * slice_bytes:
                return spec.name
    return DEFAULT_PAIR if DEFAULT_PAIR in registry else next(iter(registry))


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message, to quote in a PairError."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
