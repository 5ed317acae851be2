"""The assistant's draft as a bare loop of forward passes on a cache of its own.

Transformers drafts with the assistant's whole `generate()`: per call it copies the
generation config, builds logits processors and stopping criteria, prepares the cache and
masks, and returns scores the target only reads when it samples. On a CPU that work is a
sizable share of a small assistant's drafting call, against a bare loop of forward passes,
which raises the effective cost ratio c (`python -m lab.lean_timing` times both
ways and prints c; docs/lab-notes.md). Under greedy
decoding the target needs the candidates' ids only, so the `auto` schedule drafts with
this loop instead; the target still verifies every candidate in Transformers' own loop,
so the output cannot change.

It drafts the argmax at each position, stopping after an end-of-sequence token, and where
the product of its probabilities over the draft so far (its reach, its own estimate that
the whole draft is kept) falls below the floor the `auto` policy priced for that position
(`assisted.policy.choice`: the next candidate no longer pays), or below a cumulative
threshold a caller set (`DraftSettings.cumulative_threshold`). A per-token confidence
threshold (Transformers' `ConfidenceCriteria`) is kept as a rule too, for callers that set
one; the `auto` seam does not. Its cache holds committed ids only: before
each draft it keeps the prefix that the committed ids confirm and reads the rest, so a
draft never rests on candidates the target rejected.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from assisted.core.record import EAGER, DraftingPath, common_prefix_length

if TYPE_CHECKING:
    from transformers import Cache, PreTrainedModel


class DraftEnd:
    """Where a greedy draft ends (the module's note): after an end-of-sequence token, a token
    whose probability falls below `threshold`, or the token at which the product of the
    draft's probabilities (its reach) falls below `cumulative`, or below `floors[k - 1]` at
    its k-th token (the `auto` policy's price of drafting on: `assisted.policy.choice`).
    One per draft: it keeps that product."""

    def __init__(
        self,
        eos_ids: frozenset[int],
        threshold: float,
        cumulative: float,
        floors: Sequence[float] = (),
    ):
        self.eos_ids = eos_ids
        self.threshold = threshold
        self.cumulative = cumulative
        self.floors = floors
        self.reach = 1.0  # the product of the draft's probabilities so far
        self.tokens = 0  # the draft's tokens so far

    @property
    def weighs_confidence(self) -> bool:
        """Whether `after` needs each token's probability (a read of the device)."""
        return bool(self.threshold or self.cumulative or any(self.floors))

    def after(self, token: int, confidence: float | None = None) -> bool:
        """Whether the draft ends with `token`, whose probability was `confidence` (read
        only where `weighs_confidence`)."""
        self.tokens += 1
        if token in self.eos_ids:
            return True
        if confidence is None or not self.weighs_confidence:
            return False
        self.reach *= confidence
        floor = self.floors[self.tokens - 1] if self.tokens <= len(self.floors) else 0.0
        return confidence < self.threshold or self.reach < max(self.cumulative, floor)


def confidence_of(logits: torch.Tensor, token: int) -> float:
    """The probability `logits` (one position's) give `token`."""
    return logits.float().softmax(-1)[token].item()


class LeanDrafter:
    """Greedy drafts from `model`, a loop of forward passes (the module's note)."""

    def __init__(
        self,
        model: PreTrainedModel,
        threshold: float,
        eos_ids: Collection[int],
        cumulative: float = 0.0,
        path: DraftingPath | None = None,
    ):
        self.model = model
        self.threshold = threshold
        self.cumulative = cumulative
        self.eos_ids = frozenset(eos_ids)
        self.cache = DynamicCache(config=model.config)
        # As Transformers does for every assistant's cache: a sliding-window layer keeps the
        # states past its window until the next crop, so a draft can be taken back.
        self.cache.activate_past_recording()
        self.held: list[int] = []  # the ids whose keys and values the cache holds
        # `assisted.engine.drafters.static_draft` drafts on a static cache, except for an
        # assistant with sliding-window layers, or whose graphs failed their capture or
        # self-check (`assisted.engine.drafters.draft_graphs`, which then gives `path`).
        self.path = path or DraftingPath(EAGER, "sliding-window layers: a dynamic cache")

    def draft(
        self,
        input_ids: torch.LongTensor,
        gamma: int,
        ids: list[int] | None = None,
        floors: Sequence[float] = (),
    ) -> list[int]:
        """Up to `gamma` candidates to follow `input_ids` (one sequence), whose ids the
        caller may have read already (`ids`), ending where `floors` say (`DraftEnd`)."""
        if ids is None:
            ids = input_ids[0].tolist()
        # At least the last id is read again: its logits give the first candidate.
        keep = crop_to_committed(self.cache, self.held, ids, len(ids) - 1)
        feed = input_ids[:, keep:].to(self.model.device)
        drafted: list[int] = []
        end = DraftEnd(self.eos_ids, self.threshold, self.cumulative, floors)
        with torch.inference_mode():
            for _ in range(gamma):
                logits = self.model(
                    input_ids=feed, past_key_values=self.cache, use_cache=True, logits_to_keep=1
                ).logits[0, -1]
                token = int(logits.argmax())
                drafted.append(token)
                weighed = confidence_of(logits, token) if end.weighs_confidence else None
                if end.after(token, weighed):
                    break
                feed = torch.tensor([[token]], device=feed.device)
        # The last candidate was never read: the cache holds the ids and the rest.
        self.held = ids + drafted[:-1]
        return drafted


def crop_to_committed(cache: Cache, held: list[int], ids: list[int], most: int) -> int:
    """Crop `cache`, which holds the keys and values of `held`, to the prefix of `held` that
    the committed `ids` confirm, and to at most `most` tokens; the tokens it then holds."""
    keep = min(common_prefix_length(held, ids), most)
    length = cache.get_seq_length()
    if length and length >= keep:
        # 5.23: a negative count removes that many tokens. Cropped even when none is stale:
        # a sliding-window layer recording its past then drops the states outside its
        # window (Transformers crops its assistant's cache before every draft too).
        cache.crop(keep - length)
    return min(keep, cache.get_seq_length())
