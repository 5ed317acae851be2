"""Incremental detokenisation of a run's steps, and of each step's draft (`Detokenizer`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assisted.core.record import common_prefix_length

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class Detokenizer:
    """Incremental text: the new characters of each step, never half a multi-byte character.

    Each step decodes a short window of the ids, not the whole output, which would make a
    run's detokenisation quadratic in its length. As in TGI and vLLM, the window starts
    with ids whose text was emitted a step before, so that the new ids decode as they do
    in context (some decoders drop the leading space of a sequence's first token), and the
    new characters are those past the window's emitted text. A decoder writes U+FFFD for
    an incomplete UTF-8 sequence: while the window's text ends with it, the text before it
    is emitted and the window grows until a token completes the character. Then it moves
    on, keeping only the ids added since it last moved: the next window's context."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self.tokenizer = tokenizer
        self.window: list[int] = []  # the ids of the output from the window's start on
        self.read = 0  # window[:read]: the ids whose text began the window, already emitted
        self.emitted = 0  # characters of the window's text emitted so far

    def add(self, token_ids: tuple[int, ...]) -> str:
        """The text that `token_ids` add to the output, up to its last whole character."""
        self.window.extend(token_ids)
        text = self._decode(self.window)
        whole = text.rstrip("\ufffd")
        delta = whole[self.emitted :]
        if len(whole) < len(text):
            # A character split across tokens waits for the rest; the text before it does not.
            self.emitted = len(whole)
        else:
            self.window = self.window[self.read :]
            self.read = len(self.window)
            self.emitted = len(self._decode(self.window))
        return delta

    def add_step(
        self, token_ids: tuple[int, ...], draft_ids: tuple[int, ...], accepted: int
    ) -> tuple[str, str, str]:
        """The step's text, and its draft's text split into the accepted part and the
        rejected remainder.

        The draft is decoded after everything committed before it (in the window before the
        step), as the step's text is, so a token's leading space or a character spread over
        tokens comes out as it would have in the output. The accepted part is what the
        step's text and the draft both begin with (the accepted candidates' text); a
        character that the boundary splits goes to the remainder."""
        before, emitted = list(self.window), self.emitted
        text = self.add(token_ids)
        if not draft_ids:
            return text, "", ""
        draft = self._decode(before + list(draft_ids)).rstrip("\ufffd")[emitted:]
        if accepted == len(draft_ids):
            head = draft
        else:
            head = self._decode(before + list(draft_ids[:accepted])).rstrip("\ufffd")[emitted:]
        cut = min(common_prefix_length(text, head), common_prefix_length(head, draft))
        return text, text[:cut], draft[cut:]

    def finish(self) -> str:
        """The text held back at the end: an incomplete character, as the decoder marks it."""
        text = self._decode(self.window)
        delta = text[self.emitted :]
        self.emitted = len(text)
        return delta

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)
