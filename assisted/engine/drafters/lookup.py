"""Prompt lookup that drafts only what is worth showing: the longest, most recent match in
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
(`assisted.policy.acceptance`), since a longer match is likelier to continue.

No torch here: ids in, ids out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from assisted.core.settings import LONGEST_MATCH, SHORTEST_MATCH


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
