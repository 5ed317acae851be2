"""Run and draft settings with their limits: plain values, validated before any model work.

No torch here, so the UI can validate input and show limits without loading anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

MAX_NEW_TOKENS_CAP = 1024  # longer runs tie the device up for minutes on a CPU
MAX_PROMPT_CHARS = 32_000  # checked before tokenising; token length is checked against the model
MAX_DRAFT_TOKENS = 32

Schedule = Literal["constant", "heuristic"]


class SettingsError(ValueError):
    """A setting is out of range; the message says which and what is allowed."""


@dataclass(frozen=True)
class DraftSettings:
    """How the drafter proposes candidates. Applied where Transformers reads them.

    `num_assistant_tokens` is the draft length γ per step (the starting value under the
    heuristic schedule, which adds 2 after a fully accepted step and removes 1 otherwise).
    `confidence_threshold`: the assistant stops drafting a step early when its top
    probability falls below this (0 disables it).
    """

    # Transformers' own default threshold; on a GPU, where verification is nearly free,
    # 5 candidates a step is a common choice.
    num_assistant_tokens: int = 5
    schedule: Schedule = "constant"
    confidence_threshold: float = 0.4
    prompt_lookup_num_tokens: int = 10
    max_matching_ngram_size: int = 2

    def validate(self) -> DraftSettings:
        _check_int("draft length", self.num_assistant_tokens, 1, MAX_DRAFT_TOKENS)
        _check_int("prompt-lookup tokens", self.prompt_lookup_num_tokens, 1, MAX_DRAFT_TOKENS)
        _check_int("prompt-lookup n-gram size", self.max_matching_ngram_size, 1, 8)
        if self.schedule not in ("constant", "heuristic"):
            raise SettingsError(
                f"schedule must be 'constant' or 'heuristic', not {self.schedule!r}"
            )
        if not 0.0 <= self.confidence_threshold < 1.0:
            raise SettingsError(
                f"confidence threshold must be in [0, 1), not {self.confidence_threshold}"
            )
        return self


@dataclass(frozen=True)
class RunSettings:
    """What every run of a comparison shares: length, sampling, prompt formatting."""

    max_new_tokens: int = 128
    sample: bool = False
    temperature: float = 0.7
    top_p: float = 0.9
    seed: int = 0
    chat_template: bool = True

    def validate(self) -> RunSettings:
        _check_int("max new tokens", self.max_new_tokens, 1, MAX_NEW_TOKENS_CAP)
        if self.sample:
            if not 0.0 < self.temperature <= 5.0:
                raise SettingsError(f"temperature must be in (0, 5], not {self.temperature}")
            if not 0.0 < self.top_p <= 1.0:
                raise SettingsError(f"top-p must be in (0, 1], not {self.top_p}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SettingsError(f"seed must be a non-negative integer, not {self.seed!r}")
        return self

    def with_(self, **changes) -> RunSettings:
        return replace(self, **changes)


def validate_prompt(prompt: str) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise SettingsError("the prompt is empty: type something to generate from")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise SettingsError(
            f"the prompt has {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}"
        )
    return prompt


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"{name} must be a whole number, not {value!r}")
    if not low <= value <= high:
        raise SettingsError(f"{name} must be between {low} and {high}, not {value}")
