"""The named model pairs: a target, a drafter and the draft settings each starts with.

A spec is plain data (no torch): the CLI lists it, the app offers it, and `assisted.pairs`
loads it. The README's pair table mirrors this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assisted.drafters import DrafterKind
from assisted.settings import DraftSettings


class PairError(ValueError):
    """The pair cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class PairSpec:
    name: str
    target: str
    drafter: DrafterKind
    assistant: str | None = None
    note: str = ""
    early_exit_layer: int | None = None
    draft: DraftSettings = field(default_factory=DraftSettings)

    def __post_init__(self) -> None:
        # A kind given by its name becomes the kind itself.
        object.__setattr__(self, "drafter", DrafterKind(self.drafter))


PAIRS: dict[str, PairSpec] = {
    spec.name: spec
    for spec in (
        PairSpec(
            "embedded",
            "embedded:target",
            DrafterKind.ASSISTANT,
            "embedded:assistant",
            "Qwen2.5-Coder-1.5B-Instruct ← 0.5B, shipped offline (GGUF from PyPI)",
            # The `auto` schedule with cap 8: in one benchmark run on a 2-core AVX512-BF16
            # CPU (README, 24 prompts, 3 repeats) it gave 1.62x against 1.42–1.55x for
            # constant γ = 2, 3, 5, 8 and 1.56x for the heuristic schedule, and no prompt
            # under 0.99x (every other setting lost on the three short-answer passages).
            # The 0.4 threshold cuts a draft short where the assistant is unsure, and the
            # cumulative 0.7 where its draft as a whole has become a gamble (fit against
            # the oracle: docs/benchmarks.md); an int8 assistant drafts about twice as
            # fast on a CPU (assisted.quantize).
            draft=DraftSettings(
                num_assistant_tokens=8,
                schedule="auto",
                confidence_threshold=0.4,
                cumulative_threshold=0.7,
                assistant_quant="auto",
            ),
        ),
        PairSpec(
            "embedded-prompt-lookup",
            "embedded:target",
            DrafterKind.PROMPT_LOOKUP,
            note="Qwen2.5-Coder-1.5B-Instruct drafting from n-grams of its own prompt",
        ),
        PairSpec(
            "qwen2.5-7b",
            "Qwen/Qwen2.5-7B-Instruct",
            DrafterKind.ASSISTANT,
            "Qwen/Qwen2.5-0.5B-Instruct",
            "Qwen2.5-7B-Instruct ← 0.5B (GPU)",
        ),
        PairSpec(
            "smollm2-1.7b",
            "HuggingFaceTB/SmolLM2-1.7B-Instruct",
            DrafterKind.ASSISTANT,
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            "SmolLM2-1.7B-Instruct ← 135M",
        ),
        PairSpec(
            "llama-3.1-8b",
            "meta-llama/Llama-3.1-8B-Instruct",
            DrafterKind.ASSISTANT,
            "meta-llama/Llama-3.2-1B-Instruct",
            "Llama-3.1-8B-Instruct ← 3.2-1B (gated: set HF_TOKEN)",
        ),
        PairSpec(
            "qwen2.5-coder-7b-prompt-lookup",
            "Qwen/Qwen2.5-Coder-7B-Instruct",
            DrafterKind.PROMPT_LOOKUP,
            note="Qwen2.5-Coder-7B-Instruct with prompt lookup: strong on edits of given code",
        ),
        PairSpec(
            "gemma-2-9b-universal",
            "google/gemma-2-9b-it",
            DrafterKind.UNIVERSAL,
            "double7/vicuna-68m",
            "Gemma-2-9B-it ← Vicuna-68M, different tokenizers (universal assisted generation)",
        ),
        PairSpec(
            "layerskip-llama3.2-1b",
            "facebook/layerskip-llama3.2-1B",
            DrafterKind.EARLY_EXIT,
            note="LayerSkip Llama-3.2-1B drafting with its first 4 layers",
            early_exit_layer=4,
        ),
    )
}
DEFAULT_PAIR = "embedded"


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message, to quote in a PairError."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
