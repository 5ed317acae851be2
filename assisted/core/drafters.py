"""Drafter kinds: the one place that names them and says what differs between them.

A pair is a target plus a drafter, and every drafter is one of Transformers' own mechanisms:
- ASSISTANT: a smaller model sharing the target's tokenizer (`assistant_model=`);
- UNIVERSAL: an assistant model with a tokenizer of its own (`tokenizer=`,
  `assistant_tokenizer=`: universal assisted generation);
- PROMPT_LOOKUP: candidates copied from n-grams of the context (no second model);
- EARLY_EXIT: the target's own first layers draft (`assistant_early_exit=`).

A kind is also a step's **source**: where that step's candidates came from. Under `auto`
a pair with an assistant model draws each step from the assistant or from a prompt-lookup
match, so the source can change from step to step while the pair's drafter stays the same.

Each kind's value is its name in the CLI, the JSON and the API ("assistant",
"prompt-lookup", ...); the enum is a `str`, so it compares equal to that name, serialises as
it and pickles across ZeroGPU's process boundary. No torch here.
"""

from __future__ import annotations

from enum import StrEnum


class DrafterKind(StrEnum):
    ASSISTANT = "assistant"
    UNIVERSAL = "universal"
    PROMPT_LOOKUP = "prompt-lookup"
    EARLY_EXIT = "early-exit"

    def __str__(self) -> str:
        return self.value

    @property
    def has_model(self) -> bool:
        """Runs a model of its own, with its own weights and precision (the assistant)."""
        return self in (DrafterKind.ASSISTANT, DrafterKind.UNIVERSAL)

    @property
    def own_tokenizer(self) -> bool:
        """Drafts in a tokenizer other than the target's."""
        return self is DrafterKind.UNIVERSAL

    @property
    def auto_capable(self) -> bool:
        """The `auto` policy can drive it: it sets the draft length of Transformers' own
        assistant and prompt-lookup candidate generators, step by step."""
        return self in (DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP)

    @property
    def times_drafting(self) -> bool:
        """Drafts with forward passes, which hooks can time (prompt lookup searches n-grams)."""
        return self is not DrafterKind.PROMPT_LOOKUP

    @property
    def label(self) -> str:
        """Its name for people, as a source in charts and legends: the universal drafter is
        an assistant model too."""
        return {
            DrafterKind.ASSISTANT: "assistant",
            DrafterKind.UNIVERSAL: "assistant",
            DrafterKind.PROMPT_LOOKUP: "prompt lookup",
            DrafterKind.EARLY_EXIT: "early exit",
        }[self]

    @classmethod
    def parse(cls, name: str | DrafterKind) -> DrafterKind:
        """The kind called `name`; ValueError naming the kinds for anything else."""
        try:
            return cls(name)
        except ValueError:
            choices = ", ".join(kind.value for kind in cls)
            raise ValueError(f"unknown drafter {name!r}; choose one of {choices}") from None


DRAFTER_NAMES: tuple[str, ...] = tuple(kind.value for kind in DrafterKind)
