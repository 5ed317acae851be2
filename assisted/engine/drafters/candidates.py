"""The candidate generators the `auto` policy chooses between, and the one that chooses.

Transformers' assisted loop asks a `CandidateGenerator` for each step's candidates and
tells it afterwards how many the target accepted (`get_candidates`,
`update_candidate_strategy`). `PolicyDrafter` is that generator under `auto`: before each
step it asks the policy (`assisted.policy.choice`) to choose between the assistant's draft, a
prompt-lookup match from one of two sources (`SuffixSource`: `assisted.engine.drafters.lookup`'s
matches; `TransformersLookup`: Transformers' own search) and a plain step, and drafts what it chose.
`LookupDrafter` puts `assisted.engine.drafters.lookup`'s matches in place of Transformers' search
under the constant schedule. `assisted.engine.drafters.seam` installs them in `generate()`; nothing
here knows of that seam.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from transformers.generation.candidate_generator import (
    AssistedCandidateGenerator,
    CandidateGenerator,
    PromptLookupCandidateGenerator,
    _prepare_attention_mask,
    _prepare_position_ids,
)

from assisted.core.drafters import DrafterKind
from assisted.core.record import common_prefix_length
from assisted.engine.drafters.lean import LeanDrafter, crop_to_committed
from assisted.engine.drafters.lookup import NO_MATCH, Match, SuffixLookup
from assisted.engine.drafters.static_draft import StaticDrafter
from assisted.policy.choice import Choice, DraftPolicy

# The `auto` policy's draft sources.
ASSISTANT = DrafterKind.ASSISTANT
LOOKUP = DrafterKind.PROMPT_LOOKUP


class SuffixSource:
    """`assisted.engine.drafters.lookup`'s matches, as the policy's lookup source."""

    def __init__(self, lookup: SuffixLookup):
        self.lookup = lookup

    def find(self, input_ids: torch.Tensor, most: int, ids: list[int]) -> Match:
        """A match for the committed `ids` (those of `input_ids`, read once a step)."""
        return self.lookup.find(ids, most)


class TransformersLookup:
    """Transformers' own prompt lookup, as the policy's lookup source: it reports no match
    length, so its acceptance is estimated as one."""

    def __init__(self, generator: PromptLookupCandidateGenerator):
        self.generator = generator

    def find(self, input_ids: torch.Tensor, most: int, ids: list[int]) -> Match:
        if most < 1:
            return NO_MATCH
        self.generator.num_output_tokens = most
        matched, _ = self.generator.get_candidates(input_ids)
        return Match(tuple(matched[0, input_ids.shape[1] :].tolist()), 0)


def _with_tokens(input_ids: torch.LongTensor, tokens: Sequence[int]) -> torch.LongTensor:
    """`input_ids` followed by `tokens`, as candidates."""
    extra = torch.tensor([tokens], dtype=input_ids.dtype, device=input_ids.device)
    return torch.cat([input_ids, extra], dim=1)


class LookupDrafter(CandidateGenerator):
    """Prompt lookup with `assisted.engine.drafters.lookup`'s matches, `num_tokens` at most a step,
    in place of Transformers' own search, for the constant schedule."""

    def __init__(self, lookup: SuffixLookup, num_tokens: int, max_length: int):
        self.lookup = lookup
        self.num_tokens = num_tokens
        self.max_length = max_length

    def get_candidates(self, input_ids: torch.LongTensor, **kwargs):
        # The target adds a token of its own to the candidates: leave room for it.
        most = min(self.num_tokens, self.max_length - input_ids.shape[1] - 1)
        match = self.lookup.find(input_ids[0].tolist(), most)
        if not match.tokens:
            return input_ids, None
        return _with_tokens(input_ids, match.tokens), None

    def update_candidate_strategy(self, input_ids, scores, num_matches) -> None:
        pass


class PolicyDrafter(CandidateGenerator):
    """The assistant's generator and a lookup source, one chosen per step with its draft
    length.

    Before each step the lookup searches for a match (an n-gram search, far cheaper than a
    forward pass), and the policy weighs it against the assistant's draft and a plain
    step. The assistant's generator reads `num_assistant_tokens` at each `get_candidates`;
    a step without it leaves its cache behind, and its next drafting pass reads the tokens
    it missed first. Zero candidates make the target verify one row: a plain step."""

    def __init__(
        self,
        assistant: AssistedCandidateGenerator | None,
        lookup: SuffixSource | TransformersLookup,
        policy: DraftPolicy,
        max_length: int,
        lean: LeanDrafter | StaticDrafter | None = None,
    ):
        """`lean`, where given, drafts the assistant's candidates in place of its
        generator's `generate()`."""
        self.assistant = assistant
        self.lean = lean
        self.lookup = lookup
        self.policy = policy
        self.max_length = max_length
        self.length = 0  # the sequence's length before the step
        self.matched: tuple[int, ...] = ()  # this step's lookup candidates
        self.held: list[int] = []  # the ids whose keys and values the assistant's cache holds

    def get_candidates(self, input_ids: torch.LongTensor, **kwargs):
        length = input_ids.shape[1]
        tokens_left = self.max_length - length
        # Read once, for the lookup and the lean loop: on a GPU each read waits on it.
        ids = input_ids[0].tolist()
        # The target adds a token of its own to the candidates: leave room for it.
        match = self.lookup.find(input_ids, min(self.policy.cap, tokens_left - 1), ids)
        self.length, self.matched = length, match.tokens
        offers = {LOOKUP: len(match.tokens)}
        if self.assistant is not None:
            offers[ASSISTANT] = tokens_left - 1
        choice = self.policy.choose(
            offers, tokens_left=tokens_left, context=length, match_length=match.length
        )
        if choice.source == LOOKUP:
            return _with_tokens(input_ids, match.tokens[: choice.gamma]), None
        if choice.source == ASSISTANT:
            return self._draft(input_ids, choice, ids, **kwargs)
        return input_ids, None

    def _draft(self, input_ids: torch.LongTensor, choice: Choice, ids: list[int], **kwargs):
        """The assistant's candidates for `choice`, from a cache holding committed ids only:
        the lean loop's end where the policy's floors put it, `generate()`'s at its own
        confidence threshold."""
        gamma = choice.gamma
        if self.lean is not None:
            started = time.perf_counter()
            # Read back: a synchronisation.
            drafted = self.lean.draft(input_ids, gamma, ids, choice.floors)
            self.policy.costs.observe_call(time.perf_counter() - started)
            return _with_tokens(input_ids, drafted), None
        assistant = self.assistant
        assistant.num_assistant_tokens = gamma
        cache = assistant.assistant_kwargs.get("past_key_values")
        if cache is None:
            # Transformers extends the assistant's attention mask and position ids only
            # once it has a cache; an assistant that starts after the first step needs
            # them as long as the ids it prefills.
            length = input_ids.shape[1]
            kwargs_ = _prepare_attention_mask(assistant.assistant_kwargs, length, False)
            assistant.assistant_kwargs = _prepare_position_ids(kwargs_, length, False)
        else:
            # Transformers trims the cache by length only, as if the assistant had drafted
            # the step before; after steps it skipped, the cache still holds the candidates
            # of its last draft, rejected or not. Keep what the committed ids confirm, and
            # no more than the generator keeps (all but the last two ids, which it feeds):
            # its own crop is then none, as a sliding-window layer cannot be cropped twice
            # past its window without losing a state inside it.
            crop_to_committed(cache, self.held, ids, input_ids.shape[1] - 2)
        started = time.perf_counter()
        candidate_ids, candidate_logits = assistant.get_candidates(input_ids, **kwargs)
        # generate() has synchronised the device before returning the draft's ids.
        self.policy.costs.observe_call(time.perf_counter() - started)
        cache = assistant.assistant_kwargs.get("past_key_values")
        held = cache.get_seq_length() if cache is not None else 0
        self.held = candidate_ids[0, :held].tolist()
        return candidate_ids, candidate_logits

    def update_candidate_strategy(
        self, input_ids: torch.LongTensor, scores: torch.Tensor, num_matches: int
    ) -> None:
        if self.policy.choice.source == ASSISTANT and self.lean is None:
            self.assistant.update_candidate_strategy(input_ids, scores, num_matches)
        # `scores` holds one row per candidate plus the target's own token.
        self.policy.observe(scores.shape[1] - 1, num_matches)
        # A match not chosen is scored against what the step committed.
        committed = input_ids[0, self.length :].tolist()
        agreed = common_prefix_length(self.matched, committed)
        self.policy.observe_unverified(LOOKUP, len(self.matched), agreed, len(committed))
