"""The engine's boundary with text: a prompt's text becomes token ids here, and nowhere
else in the engine. Everything past it takes ids (a run, its plan, its drafters); the way
back, ids to text as they stream, is the `assisted.engine.detokenizer.Detokenizer`, which
the run's observer applies to each step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from assisted.core.settings import validate_prompt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from assisted.models.pairs import LoadedPair


def encode_prompt(pair: LoadedPair, prompt: str, chat_template: bool = True) -> list[int]:
    """Token ids of `prompt`, wrapped in the target's chat template where it has one."""
    validate_prompt(prompt)
    tokenizer = pair.tokenizer
    if chat_template and tokenizer.chat_template:
        return chat_ids(tokenizer, prompt)
    return list(tokenizer(prompt)["input_ids"])


def chat_ids(tokenizer: PreTrainedTokenizerBase, content: str) -> list[int]:
    """The ids of `content` as a user message in the tokenizer's chat template, followed by
    the assistant's role tokens."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def template_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The chat template's ids around an empty user message (none without a template)."""
    return chat_ids(tokenizer, "") if tokenizer.chat_template else []
