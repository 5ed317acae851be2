"""What the Shoot-out tab hands its GPU call (`shootout.gpu`): one request, a frozen
dataclass of plain values, as every call's request is (`assisted.ui.requests`). No torch,
no gradio.
"""

from __future__ import annotations

from dataclasses import dataclass

from assisted.core.settings import RunSettings
from assisted.ui.requests import PairPlace, StopFlag


@dataclass(frozen=True)
class ShootoutRequest:
    """One shoot-out: `prompt` raced `repeats` times, plain once a round and each of the
    `lanes` that apply (`assisted.bench.shootout.lanes_for`, counted before the call so that
    its time is priced from them), under `settings`; the ranking keeps each lane's runs'
    `per_step` only where `per_step` asks."""

    pair: PairPlace
    prompt: str
    settings: RunSettings
    repeats: int
    lanes: int
    stop: StopFlag
    per_step: bool = False

    def timed_tokens(self) -> tuple[int, int]:
        """The new tokens the call times: one plain run and one run a lane, each round."""
        tokens = self.repeats * self.settings.max_new_tokens
        return tokens, tokens * self.lanes

    def drafting_cap(self) -> int:
        """The pair's cap: its `auto` lane's, the longest any lane drafts."""
        return self.pair.spec.draft.num_assistant_tokens
