"""What the Compare tab hands its GPU call (`compare.gpu`): one comparison's request. A
frozen dataclass of plain values, as every call's request is (`assisted.ui.requests`). No
torch, no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass

from assisted.core.settings import DraftSettings, RunSettings
from assisted.ui.requests import PairPlace, StopFlag


@dataclass(frozen=True)
class ComparisonRequest:
    """One comparison: `prompt` plain, then assisted with `draft`, under `settings`."""

    pair: PairPlace
    prompt: str
    settings: RunSettings
    draft: DraftSettings
    stop: StopFlag

    def timed_tokens(self) -> tuple[int, int]:
        """The new tokens the call times: up to `max_new_tokens` plain, and as many
        assisted."""
        return self.settings.max_new_tokens, self.settings.max_new_tokens

    def drafting_cap(self) -> int:
        return self.draft.num_assistant_tokens
