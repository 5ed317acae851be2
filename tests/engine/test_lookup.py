"""The suffix lookup: drafts from the user's message and the output only, the longest then
the most recent match, never template or special tokens, never past the tokens left."""

from __future__ import annotations

import pytest
import torch

from assisted.bench.measuring import TEMPLATE_RUN, copies_template, template_ngrams
from assisted.core.settings import LONGEST_MATCH, DraftSettings, RunSettings
from assisted.engine import decoding, engine
from assisted.engine.decoding import StepEvent
from assisted.engine.drafters.seam import NO_MATCH, Match, SuffixLookup, user_span
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import custom_pair, load_pair

# A made-up chat: template 90-92, the user's message 10-19, template 93-95, the output.
SYSTEM, END, START = [90, 91, 92], 93, 94
TEMPLATE_TAIL = [END, START, 95]


def chat(message: list[int], output: list[int]) -> tuple[list[int], SuffixLookup]:
    prompt = SYSTEM + message + TEMPLATE_TAIL
    span = (len(SYSTEM), len(SYSTEM) + len(message))
    return prompt + output, SuffixLookup(len(prompt), span, {END, START})


def test_the_first_steps_draft_nothing_since_the_prompt_ends_in_template_text():
    ids, lookup = chat([1, 2, 3, 93, 94, 95, 4], [])
    assert lookup.find(ids, 8) == NO_MATCH
    ids, lookup = chat([1, 2, 3], [7])
    assert lookup.find(ids, 8) == NO_MATCH  # one output token: no suffix of two yet


def test_a_match_continues_as_the_users_text_did_and_stops_at_its_end():
    ids, lookup = chat([1, 2, 3, 4, 5], [9, 2, 3])
    match = lookup.find(ids, 8)
    assert match.tokens == (4, 5) and match.length == 2  # not into the template after it


def test_the_template_is_never_matched_or_copied():
    # The system prompt holds 91 92 and the template tail 93 94 95, the output ends 91 92:
    # only the user's message and the output may be drafted from.
    ids, lookup = chat([5, 6], [91, 92])
    assert lookup.find(ids, 8) == NO_MATCH


def test_a_longer_match_beats_a_more_recent_one():
    ids, lookup = chat([1, 2, 3, 10, 11], [7, 2, 3, 12, 13, 1, 2, 3])
    match = lookup.find(ids, 2)
    assert match.tokens == (10, 11) and match.length == 3


def test_among_equally_long_matches_the_most_recent_wins():
    ids, lookup = chat([2, 3, 10, 11], [2, 3, 12, 13, 2, 3])
    assert lookup.find(ids, 2).tokens == (12, 13)


def test_a_single_shared_token_is_no_match():
    ids, lookup = chat([1, 2, 3], [8, 3])
    assert lookup.find(ids, 8) == NO_MATCH


def test_a_repeating_output_drafts_its_next_periods():
    ids, lookup = chat([1], [5, 6, 5, 6, 5, 6])
    match = lookup.find(ids, 5)
    assert match.tokens == (5, 6, 5, 6, 5) and match.length == 4


def test_matches_are_measured_up_to_the_longest_length():
    # The output's last 5 tokens follow the message's opening: measured as 5.
    ids, lookup = chat([1, 2, 3, 4, 5, 6], [9, 1, 2, 3, 4, 5])
    assert lookup.find(ids, 3) == Match((6,), 5)
    # Its last 12 tokens repeat the message: measured as the longest length, not 12.
    ids, lookup = chat([*range(1, 13), 20], [*range(1, 13)])
    assert lookup.find(ids, 3) == Match((20,), LONGEST_MATCH)
    ids, lookup = chat([1], [5] * 20)
    assert lookup.find(ids, 3) == Match((5, 5, 5), LONGEST_MATCH)


def test_special_tokens_end_a_draft_and_no_draft_exceeds_most():
    ids, lookup = chat([1, 2, 3, 4, 93, 5], [1, 2])
    assert lookup.find(ids, 8).tokens == (3, 4)
    ids, lookup = chat([1, 2, 3, 4, 5, 6], [1, 2])
    assert lookup.find(ids, 2).tokens == (3, 4)
    assert lookup.find(ids, 0) == NO_MATCH


def test_a_prompt_without_a_template_is_all_the_users():
    prompt = [1, 2, 3, 4, 1, 2]
    lookup = SuffixLookup(len(prompt), user_span(prompt, []), set())
    assert lookup.find(prompt, 4).tokens == (3, 4, 1, 2)  # drafts from the first step on


def test_the_users_span_is_what_the_template_around_an_empty_message_lacks():
    empty = [90, 91, 92, 93, 94, 95]
    assert user_span([90, 91, 92, 1, 2, 93, 94, 95], empty) == (3, 5)
    assert user_span([1, 2, 3], empty) == (0, 3)  # no template
    assert user_span([1, 2, 3], []) == (0, 3)


def test_a_draft_copies_the_template_with_a_special_token_or_a_run_of_its_text():
    special = {90, 95}
    # <|im_start|> system \n You are Qwen , created <|im_end|> ... <|im_start|> assistant \n
    template = [90, 10, 11, 20, 21, 22, 23, 24, 95, 11, 90, 12, 11]
    ngrams = template_ngrams(template, special)
    assert ngrams and all(len(run) == TEMPLATE_RUN and 90 not in run for run in ngrams)
    assert copies_template([7, 21, 22, 23, 24], special, ngrams)  # the system prompt
    assert copies_template([7, 95], special, ngrams)  # an end of turn
    assert not copies_template([21, 22, 23, 7], special, ngrams)  # three tokens of it
    assert not copies_template([12, 11, 7, 8], special, ngrams)  # a role name


@pytest.fixture(scope="module")
def lookup_pair(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), None, "prompt-lookup")
    return load_pair(spec, device="cpu", dtype="float32")


def test_no_draft_of_a_run_holds_template_tokens_and_the_output_is_plains(lookup_pair):
    prompt = "def add(a, b):\n    return a + b\n" * 3
    settings = RunSettings(max_new_tokens=24)
    tokenizer = lookup_pair.tokenizer
    # Role markers are added special tokens, which `all_special_ids` leaves out.
    special = set(tokenizer.all_special_ids)
    special |= {i for i, token in tokenizer.added_tokens_decoder.items() if token.special}
    assert {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>")} <= special
    ids = encode_prompt(lookup_pair, prompt)
    plain = [t for e in decoding.run(lookup_pair, ids, "plain", settings) for t in tokens(e)]
    for lookup in ("suffix", "transformers"):
        draft = DraftSettings(prompt_lookup_num_tokens=4, lookup=lookup)
        events = decoding.run(lookup_pair, ids, "assisted", settings, draft)
        steps = [e.step for e in events if isinstance(e, StepEvent)]
        assert [t for step in steps for t in step.token_ids] == plain
        if lookup == "suffix":
            assert not steps[0].draft_ids  # the prompt ends with the template's tail
            assert not {t for step in steps for t in step.draft_ids} & special


def tokens(event) -> tuple[int, ...]:
    return event.step.token_ids if isinstance(event, StepEvent) else ()


def test_role_markers_are_never_drafted_even_where_typed_into_the_prompt(lookup_pair):
    tokenizer = lookup_pair.tokenizer
    never = engine.never_drafted(lookup_pair)
    assert {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>")} <= never
    words = tokenizer("quick brown")["input_ids"]
    typed = words + tokenizer("<|im_start|> fox ")["input_ids"] + words
    lookup = SuffixLookup(len(typed), (0, len(typed)), never)  # all of it the user's
    assert lookup.find(typed, 4) == NO_MATCH  # "quick brown" is followed by a role marker
    assert SuffixLookup(len(typed), (0, len(typed)), set()).find(typed, 4).tokens


def test_a_run_never_drafts_a_role_marker_typed_into_the_prompt(lookup_pair):
    """End to end: the prompt repeats "a a <|im_start|>" and the target always says "a", so
    the longest match is always followed by the role marker; no step drafts it, and every
    step after the first drafts the "a"s before it."""
    tokenizer = lookup_pair.tokenizer
    a, marker = tokenizer("a")["input_ids"][0], tokenizer.convert_tokens_to_ids("<|im_start|>")

    def always_a(module, args, logits):
        forced = torch.zeros_like(logits)
        forced[..., a] = 1.0
        return forced

    handle = lookup_pair.target.lm_head.register_forward_hook(always_a)
    try:
        draft = DraftSettings(prompt_lookup_num_tokens=4)
        events = decoding.run(lookup_pair, [a, a, marker] * 3, "assisted", RunSettings(12), draft)
        steps = [e.step for e in events if isinstance(e, StepEvent)]
    finally:
        handle.remove()
    assert [t for step in steps for t in step.token_ids] == [a] * 12
    assert all(marker not in step.draft_ids for step in steps)
    assert any(step.draft_ids for step in steps)
