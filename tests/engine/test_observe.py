"""The incremental detokenizer on a real byte-level BPE tokenizer, against a reference that
decodes the whole output at every step."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from assisted.core.record import common_prefix_length
from assisted.engine.observe import Detokenizer
from tests.tiny import CORPUS

# Spaces, tabs, newlines, accents, arrows, CJK, Greek, emoji (one a ZWJ sequence): the
# tiny tokenizer knows few of them, so many characters are split over byte tokens.
TEXT = (
    "Héllo wörld, naïve café → 日本語のテキスト 🙂🎉\n"
    "def add(a, b):\n    return a + b  # → the sum\n\n"
    "Ünïcode: €5, ½ cup, Ελληνικά, 中文字符, emoji 👩‍💻 done.\t"
)


@pytest.fixture(scope="module")
def tokenizer(tiny_dirs):
    return AutoTokenizer.from_pretrained(tiny_dirs["target"])


@pytest.fixture(scope="module")
def metaspace_tokenizer():
    """A SentencePiece-style tokenizer: "▁" marks a word's leading space, and decoding drops
    it from a sequence's first token ("▁dog" alone decodes to "dog")."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>"])
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>")


class WholeDecode:
    """The reference: the whole output decoded at every step (quadratic, plainly right)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.emitted = ""

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def add_step(self, token_ids, draft_ids, accepted):
        before, emitted = list(self.ids), len(self.emitted)
        self.ids += token_ids
        text = self.decode(self.ids).rstrip("\ufffd")
        text, self.emitted = text[emitted:], text
        if not draft_ids:
            return text, "", ""
        draft = self.decode(before + list(draft_ids)).rstrip("\ufffd")[emitted:]
        head = self.decode(before + list(draft_ids[:accepted])).rstrip("\ufffd")[emitted:]
        cut = min(common_prefix_length(text, head), common_prefix_length(head, draft))
        return text, text[:cut], draft[cut:]

    def finish(self) -> str:
        return self.decode(self.ids)[len(self.emitted) :]


def decoded_lengths(tokenizer, monkeypatch) -> list[int]:
    """The number of ids each later `tokenizer.decode` call receives."""
    lengths = []
    decode = tokenizer.decode

    def counting(ids, **kwargs):
        lengths.append(len(ids))
        return decode(ids, **kwargs)

    monkeypatch.setattr(tokenizer, "decode", counting)
    return lengths


def test_detokenizer_never_splits_a_character(tokenizer):
    text = "naïve café € 日本語"
    ids = tokenizer(text)["input_ids"]
    detokenizer = Detokenizer(tokenizer)
    pieces = [detokenizer.add((token,)) for token in ids]
    pieces.append(detokenizer.finish())
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces) == text


def test_streamed_token_by_token_the_text_is_the_whole_decode(tokenizer, monkeypatch):
    ids = tokenizer(TEXT * 3)["input_ids"]
    assert any("\ufffd" in tokenizer.decode([token]) for token in ids)  # split characters
    lengths = decoded_lengths(tokenizer, monkeypatch)
    detokenizer = Detokenizer(tokenizer)
    pieces = [detokenizer.add((token,)) for token in ids]
    pieces.append(detokenizer.finish())
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces) == TEXT * 3
    # A window of a few ids per call, never the whole output: one emoji is 4 byte tokens.
    assert len(ids) > 300 and max(lengths) <= 8


def test_steps_and_drafts_match_the_whole_decode(tokenizer, monkeypatch):
    """Steps of 1 to 5 tokens, each with a draft whose first `accepted` candidates are the
    step's and the rest stray tokens (bytes of split characters among them), then an
    output that ends half-way through a character."""
    ids = tokenizer(TEXT * 3)["input_ids"] + tokenizer("🙂")["input_ids"][:1]
    assert tokenizer.decode(ids).endswith("\ufffd")
    rng = random.Random(7)
    steps = []
    while (done := sum(len(step) for step, _, _ in steps)) < len(ids):
        step = tuple(ids[done : done + rng.randint(1, 5)])
        accepted = rng.randint(0, len(step))  # len(step): EOS or the limit cut the step
        stray = tuple(rng.randrange(len(tokenizer)) for _ in range(rng.randint(0, 4)))
        steps.append((step, step[:accepted] + stray, accepted))
    reference = WholeDecode(tokenizer)
    expected = [reference.add_step(*step) for step in steps] + [reference.finish()]
    lengths = decoded_lengths(tokenizer, monkeypatch)
    detokenizer = Detokenizer(tokenizer)
    got = [detokenizer.add_step(*step) for step in steps] + [detokenizer.finish()]
    assert got == expected
    assert any(rejected for _, _, rejected in got[:-1]) and got[-1].endswith("\ufffd")
    # The step, its draft and the steps since the text last ended with a whole character
    # (a few, in a run of characters split over byte tokens), never the whole output.
    assert len(ids) > 400 and max(lengths) <= 40


def test_a_decoder_that_drops_a_first_tokens_space_keeps_every_space(metaspace_tokenizer):
    text = "The quick brown fox jumps over the lazy dog."
    ids = metaspace_tokenizer(text)["input_ids"]
    assert metaspace_tokenizer.decode(ids[1:2]) == "quick"  # alone, without its space
    reference, detokenizer = WholeDecode(metaspace_tokenizer), Detokenizer(metaspace_tokenizer)
    pieces = []
    for i, token in enumerate(ids):
        draft = (ids[(i + 3) % len(ids)],)  # a rejected candidate, decoded after the output
        step = detokenizer.add_step((token,), draft, 0)
        assert step == reference.add_step((token,), draft, 0)
        pieces.append(step[0])
    assert "".join(pieces) == text
