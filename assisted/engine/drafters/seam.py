"""The seam into Transformers' `generate()`: a policy chooses each step's draft.

The target's `_get_candidate_generator` is overridden on the instance for the run, wrapping
the candidate generator Transformers built so that `assisted.policy.choice` chooses, before
each step, the source of the candidates (the assistant, or a prompt-lookup match) and their
number (0: a plain target step). Transformers still verifies and accepts. The matches come
from the suffix lookup (`SuffixLookup`, below; or Transformers' own search, `lookup:
"transformers"`); under greedy decoding the assistant drafts with the lean loop
(`assisted.engine.drafters.static_draft`), else with its own generator, and either way from a cache
that holds committed ids only. `drafting_policy` installs the generators that draft
(below).

The candidate generators the `auto` policy chooses between, and the one that chooses.

Transformers' assisted loop asks a `CandidateGenerator` for each step's candidates and
tells it afterwards how many the target accepted (`get_candidates`,
`update_candidate_strategy`). `PolicyDrafter` is that generator under `auto`: before each
step it asks the policy (`assisted.policy.choice`) to choose between the assistant's draft, a
prompt-lookup match from one of two sources (`SuffixSource`: the suffix lookup's matches;
`TransformersLookup`: Transformers' own search) and a plain step, and drafts what it chose.
`LookupDrafter` puts the suffix lookup's matches in place of Transformers' search under the
constant schedule. `drafting_policy` installs them in `generate()`; the generators
themselves know nothing of that seam.

Prompt lookup that drafts only what is worth showing: the longest, most recent match in
the user's text and the output, never in the chat template.

Transformers' `PromptLookupCandidateGenerator` searches the whole context, the chat
template's system prompt and role tokens included; it takes the first (leftmost) match of
the longest n-gram up to `max_matching_ngram_size`, and falls back to a single token. So it
drafts the template's system prompt ("You are Qwen, created by Alibaba") and copies
passages the text has moved past, drafts that the target rejects and the assisted column
shows (docs/lab-notes.md).

`SuffixLookup` follows SuffixDecoding (Oliaro et al. 2024, vLLM's `suffix` method): the
draft continues the longest match of the sequence's suffix, here of `SHORTEST_MATCH` to
`LONGEST_MATCH` tokens (a single shared token says little), the most recent one where
matches are equally long (the text nearest to where the answer is). It searches two
segments only, the user's message and the output so far, and a continuation stops at the
end of its segment and before any special token, so it never copies template text. The
caller learns the match's length: the `auto` policy keeps acceptance estimates by it
(`assisted.policy.estimates`), since a longer match is likelier to continue.

No torch here: ids in, ids out.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers.generation.candidate_generator import (
    AssistedCandidateGenerator,
    CandidateGenerator,
    PromptLookupCandidateGenerator,
    _prepare_attention_mask,
    _prepare_position_ids,
)

from assisted.core.record import common_prefix_length
from assisted.core.settings import LONGEST_MATCH, SHORTEST_MATCH, DrafterKind, DraftSettings
from assisted.engine.drafters import draft_graphs
from assisted.engine.drafters.static_draft import LeanDrafter, StaticDrafter, crop_to_committed
from assisted.models.loading import end_ids
from assisted.policy.choice import Choice, DraftPolicy

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class Match:
    """A draft copied from the context: `tokens` followed an earlier occurrence of the
    sequence's last `length` tokens."""

    tokens: tuple[int, ...]
    length: int


NO_MATCH = Match((), 0)


class SuffixLookup:
    """Drafts from matches in the user's message and the output (the module's note)."""

    def __init__(self, prompt_len: int, user_span: tuple[int, int], special_ids: Collection[int]):
        """`prompt_len` is the prompt's length in tokens (the output starts there),
        `user_span` the (start, end) positions of the user's message in the prompt, and
        `special_ids` the tokens never drafted (role markers, end of sequence)."""
        self.prompt_len = prompt_len
        self.user_span = user_span
        self.special_ids = frozenset(special_ids)

    def find(self, ids: Sequence[int], most: int) -> Match:
        """The draft for the sequence `ids` (prompt and output so far): at most `most`
        tokens following the longest, most recent earlier occurrence of its suffix."""
        length = len(ids)
        segments = self._segments(length)
        # The suffix itself must lie in the latest segment: a prompt in a chat template
        # ends with the assistant's role tokens, which no draft should follow.
        key_start = segments[0][0]
        if most < 1 or length - key_start < SHORTEST_MATCH:
            return NO_MATCH
        best = NO_MATCH
        last = ids[-1]
        for start, end in segments:
            # Where an earlier occurrence of the suffix may end: not at the suffix itself,
            # with a token of continuation before the segment's end, most recent first.
            for stop in range(min(end, length - 1) - 1, start + SHORTEST_MATCH - 2, -1):
                if ids[stop] != last:
                    continue
                matched = _match_length(ids, stop, start, key_start)
                # Equally long is not enough: segments and stops come most recent first.
                if matched < SHORTEST_MATCH or matched <= best.length:
                    continue
                tokens = self._continuation(ids, stop, end, most)
                if tokens:
                    best = Match(tokens, matched)
                if best.length == LONGEST_MATCH:
                    return best
        return best

    def _segments(self, length: int) -> list[tuple[int, int]]:
        """Where drafts may come from, the most recent first: the output, then the user's
        message; one segment where the message ends the prompt (no chat template)."""
        user_start, user_end = self.user_span
        if user_end == self.prompt_len:
            return [(user_start, length)]
        return [(self.prompt_len, length), self.user_span]

    def _continuation(self, ids: Sequence[int], stop: int, end: int, most: int) -> tuple[int, ...]:
        """Up to `most` tokens after position `stop`, within its segment (ending at `end`),
        cut before the first special token. Past the sequence's end the text after the
        match is the draft itself: a repeating pattern drafts its next period."""
        period = len(ids) - 1 - stop
        tokens: list[int] = []
        for offset in range(most):
            position = stop + 1 + offset
            if position >= end and position < len(ids):
                break
            token = ids[position] if position < len(ids) else tokens[offset - period]
            if token in self.special_ids:
                break
            tokens.append(token)
        return tuple(tokens)


def _match_length(ids: Sequence[int], stop: int, start: int, key_start: int) -> int:
    """How many tokens, up to `LONGEST_MATCH`, end at `stop` (none before `start`) and equal
    the sequence's last tokens (none before `key_start`)."""
    last = len(ids) - 1
    matched = 0
    while (
        matched < LONGEST_MATCH
        and stop - matched >= start
        and last - matched >= key_start
        and ids[stop - matched] == ids[last - matched]
    ):
        matched += 1
    return matched


def user_span(prompt_ids: Sequence[int], empty_ids: Sequence[int]) -> tuple[int, int]:
    """The (start, end) positions of the user's message in `prompt_ids`, given the same chat
    template rendered around an empty message (`empty_ids`): what the two share at the
    start (system prompt, role tokens) and at the end (end of turn, the assistant's role) is
    the template's. A prompt sent without the template shares nothing, and is all the
    user's."""
    head = 0
    while head < min(len(prompt_ids), len(empty_ids)) and prompt_ids[head] == empty_ids[head]:
        head += 1
    tail = 0
    room = min(len(prompt_ids) - head, len(empty_ids) - head)
    while tail < room and prompt_ids[-1 - tail] == empty_ids[-1 - tail]:
        tail += 1
    return head, len(prompt_ids) - tail


# The `auto` policy's draft sources.
ASSISTANT = DrafterKind.ASSISTANT
LOOKUP = DrafterKind.PROMPT_LOOKUP


class SuffixSource:
    """The suffix lookup's matches (`SuffixLookup`), as the policy's lookup source."""

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
    """Prompt lookup with the suffix lookup's matches, `num_tokens` at most a step,
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


# A lean drafting loop the seam builds for a greedy run: on a DynamicCache, or on a static
# one (graphed where captured). A run's record reads the path it took.
DraftLoop = LeanDrafter | StaticDrafter


@contextmanager
def drafting_policy(
    target: PreTrainedModel,
    policy: DraftPolicy | None,
    draft: DraftSettings | None = None,
    lookup: SuffixLookup | None = None,
    lean: bool = True,
    built: list[DraftLoop] | None = None,
) -> Iterator[None]:
    """Within the block, `target.generate()` drafts as `policy` chooses, and prompt lookup
    matches with `lookup` (`SuffixLookup`; None: Transformers' own search). Under
    a policy and greedy decoding the assistant drafts with the lean loop where `lean`
    (`assisted.engine.drafters.static_draft`: on a static cache, graphed where captured), else with
    its generator's `generate()`. Each lean drafter built is appended to `built`, where
    given, for the run's report of the path it took.

    Overrides the private `GenerationMixin._get_candidate_generator` on this instance only
    (tests/engine/test_transformers_facts.py pins it), wrapping the generator Transformers builds.
    Under a policy, where it builds an assistant's generator, prompt lookup joins it as a second
    source. Without a policy only a prompt-lookup generator is replaced, by `lookup`."""
    build = type(target)._get_candidate_generator
    draft = draft or DraftSettings()

    def get_candidate_generator(*args, **kwargs) -> CandidateGenerator:
        generator = build(target, *args, **kwargs)
        config = kwargs["generation_config"]
        prompt_lookup = type(generator) is PromptLookupCandidateGenerator
        if policy is None:
            if prompt_lookup and lookup is not None:
                return LookupDrafter(lookup, generator.num_output_tokens, config.max_length)
            return generator
        if not prompt_lookup and type(generator) is not AssistedCandidateGenerator:
            # Subclasses (universal, early exit, MTP) draft and read their length elsewhere.
            raise TypeError(f"the auto schedule cannot drive {type(generator).__name__}")
        if lookup is not None:
            source = SuffixSource(lookup)
        elif prompt_lookup:
            source = TransformersLookup(generator)
        else:
            search = PromptLookupCandidateGenerator(
                eos_token_id=config._eos_token_tensor,
                max_matching_ngram_size=draft.max_matching_ngram_size,
                max_length=config.max_length,
                logits_processor=kwargs["logits_processor"],
                vocab_size=target.config.get_text_config().vocab_size,
            )
            source = TransformersLookup(search)
        if prompt_lookup:
            return PolicyDrafter(None, source, policy, config.max_length)
        # Greedy: the target needs the candidates' ids only (the lean loop, `static_draft`).
        sampled = config.do_sample
        loop = _lean_drafter(generator, config, draft) if lean and not sampled else None
        if loop is not None and built is not None:
            built.append(loop)
        return PolicyDrafter(generator, source, policy, config.max_length, loop)

    target._get_candidate_generator = get_candidate_generator
    try:
        yield
    finally:
        del target._get_candidate_generator


def _lean_drafter(generator: AssistedCandidateGenerator, config, draft: DraftSettings) -> DraftLoop:
    """A lean loop drafting for `generator`'s assistant under `config`'s end of sequence,
    for a run of at most `config.max_length` tokens drafting at most `draft`'s cap a step
    (`assisted.engine.drafters.draft_graphs.drafter_for_run`: graphed where captured). The
    policy prices where each draft ends (`Choice.floors`), so the assistant's fixed
    confidence threshold, Transformers' rule for its own drafting, does not apply; a
    cumulative threshold the caller set stands beside the policy's floors."""
    eos_ids = end_ids(config)
    model, cap = generator.assistant_model, draft.num_assistant_tokens
    return draft_graphs.drafter_for_run(
        model, 0.0, eos_ids, draft.cumulative_threshold, config.max_length, cap
    )
