"""Decoding runs' invariants on tiny models: assisted output equals plain, acceptance with an
identical and a random assistant, every token accounted for in the steps, each step's
draft, prompt lookup, universal assisted generation, sampling and the heuristic schedule."""

from __future__ import annotations

import pytest

from assisted.analysis import stats
from assisted.core.record import RunRecord
from assisted.core.settings import (
    DrafterKind,
    DraftSettings,
    RunSettings,
)
from assisted.engine import decoding
from assisted.engine.decoding import RunDone, StepEvent
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import custom_pair, load_pair
from tests.engine.runs import DRAFT, GREEDY, PROMPT, load, records
from tests.tiny import CORPUS, build_model, build_tokenizer


def test_greedy_assisted_equals_greedy_plain_in_fp32(pair):
    done = records(pair)
    plain, assisted = done["plain"], done["assisted"]
    assert stats.new_tokens(plain) == GREEDY.max_new_tokens or plain.token_ids[-1] in (
        pair.target.generation_config.eos_token_id,
    )
    assert assisted.token_ids == plain.token_ids
    assert assisted.text == plain.text
    assert stats.compare_runs(plain, assisted)["identical"] is True


def test_identical_assistant_accepts_everything(self_pair):
    assisted = records(self_pair, modes=("assisted",))["assisted"]
    assert stats.drafted(assisted) > 0
    assert stats.acceptance_rate(assisted) == 1.0
    assert stats.tokens_per_step(assisted) > 3


def test_random_assistant_accepts_almost_nothing(pair):
    assisted = records(pair, modes=("assisted",))["assisted"]
    assert stats.drafted(assisted) > 20
    assert stats.acceptance_rate(assisted) < 0.15


def test_steps_account_for_every_token(pair):
    assisted = records(pair, modes=("assisted",))["assisted"]
    for step in assisted.steps:
        assert 0 <= step.accepted <= step.drafted <= DRAFT.num_assistant_tokens
        assert len(step.token_ids) == step.accepted + 1
    assert stats.new_tokens(assisted) == stats.accepted(assisted) + len(assisted.steps)
    times = [step.t_s for step in assisted.steps]
    assert times == sorted(times) and times[-1] <= assisted.total_s
    assert assisted.draft_forward_s and all(t > 0 for t in assisted.draft_forward_s)
    # Each step's drafting time covers its passes, the assistant's prefill included.
    assert all(step.draft_s is not None and step.draft_s >= 0 for step in assisted.steps)
    assert sum(step.draft_s for step in assisted.steps) > sum(assisted.draft_forward_s)
    # No policy under a constant schedule, so nothing it expected.
    assert all(step.expected_s is None and step.chosen is None for step in assisted.steps)


def test_plain_steps_are_single_tokens(pair):
    plain = records(pair, modes=("plain",))["plain"]
    assert all(len(s.token_ids) == 1 and s.drafted == 0 for s in plain.steps)
    assert all(s.draft_ids == () and s.draft_s is None for s in plain.steps)


def draft_in_context(tokenizer, before: list[int], draft: tuple[int, ...]) -> str:
    """The draft's text as it would continue the output committed before it."""

    def decode(ids):
        return tokenizer.decode(ids, skip_special_tokens=True).rstrip("\ufffd")

    return decode(before + list(draft))[len(decode(before)) :]


def check_drafts(record, tokenizer) -> None:
    """Every step's draft is what the target verified, split where the step stopped
    agreeing with it: accepted part + rejected part = the draft's text."""
    before: list[int] = []
    for step in record.steps:
        draft, committed = step.draft_ids, step.token_ids
        assert step.drafted == len(draft)
        assert committed[: step.accepted] == draft[: step.accepted]
        if step.accepted < min(len(draft), len(committed)):
            assert committed[step.accepted] != draft[step.accepted]
        assert step.text.startswith(step.accepted_text)
        assert step.accepted_text + step.rejected_text == draft_in_context(tokenizer, before, draft)
        if step.accepted == step.drafted:
            assert step.rejected_text == ""
        before += committed


def test_each_step_keeps_the_draft_the_target_verified(pair):
    assisted = records(pair, modes=("assisted",))["assisted"]
    check_drafts(assisted, pair.tokenizer)
    assert any(step.rejected_text for step in assisted.steps)  # a random assistant errs


def test_an_identical_assistant_drafting_eos_has_every_candidate_accepted(self_pair, monkeypatch):
    ids = encode_prompt(self_pair, PROMPT)
    plain = next(e for e in decoding.run(self_pair, ids, "plain", GREEDY) if isinstance(e, RunDone))
    # Make the target's third token its EOS: the assistant drafts up to it, the target
    # agrees, and the step ends there, with no token of the target's own after the draft.
    eos = plain.record.token_ids[2]
    monkeypatch.setattr(self_pair.target.generation_config, "eos_token_id", eos)
    events = decoding.run(self_pair, ids, "assisted", GREEDY, DRAFT)
    (step,) = [e.step for e in events if isinstance(e, StepEvent)]
    assert step.token_ids == step.draft_ids == tuple(plain.record.token_ids[:3])
    assert step.drafted == step.accepted == 3
    assert step.rejected_text == "" and step.accepted_text == step.text


def test_a_step_the_length_limit_cuts_counts_every_committed_candidate(lookup_pair):
    lookup, repeat = lookup_pair
    # Transformers' lookup: it drafts past the limit, which ours never does.
    lookup_draft = DraftSettings(prompt_lookup_num_tokens=4, lookup="transformers")
    # 7 new tokens: a full step of 4 candidates + the target's own, then 2 of the next 4
    # candidates fit; the limit cuts the step before the target's own token.
    events = decoding.run(
        lookup, [repeat] * 8, "assisted", RunSettings(max_new_tokens=7), lookup_draft
    )
    steps = [e.step for e in events if isinstance(e, StepEvent)]
    assert [(s.drafted, s.accepted, len(s.token_ids)) for s in steps] == [(4, 4, 5), (4, 2, 2)]
    assert steps[1].rejected_text == "aa"  # the two candidates past the limit
    assert all(step.draft_s is None for step in steps)  # a lookup is not timed apart
    record = RunRecord(
        mode="assisted", drafter=DrafterKind.PROMPT_LOOKUP, prompt_tokens=8, steps=steps
    )
    check_drafts(record, lookup.tokenizer)


def test_prompt_lookup_is_lossless(tiny_dirs):
    lookup = load(tiny_dirs, assistant=None, drafter=DrafterKind.PROMPT_LOOKUP)
    prompt = "def add(a, b):\n    return a + b\n" * 3
    done = records(lookup, prompt=prompt)
    assert done["assisted"].token_ids == done["plain"].token_ids
    assert done["assisted"].drafter is DrafterKind.PROMPT_LOOKUP


def test_universal_assistant_with_another_tokenizer_is_lossless(tiny_dirs):
    universal = load(tiny_dirs, assistant="other_tokenizer", drafter=DrafterKind.UNIVERSAL)
    done = records(universal)
    assert done["assisted"].token_ids == done["plain"].token_ids


@pytest.mark.parametrize("vocabulary", ["within the target's", "of its own"])
def test_a_universal_assistant_samples_and_stays_whole_for_greedy_runs(
    tiny_dirs, tmp_path, vocabulary
):
    # Found by tests/engine/test_every_setting.py: Transformers' sampled universal path
    # failed on an assistant vocabulary within the target's (AttributeError), and on one
    # of its own pruned the assistant's head in place for every later run.
    folder = tiny_dirs["other_tokenizer"]
    if vocabulary == "of its own":
        folder = tmp_path / "own"
        corpus = [text.upper() for text in CORPUS]
        build_model(folder, build_tokenizer(tmp_path / "tokenizer", 300, corpus), seed=3)
    spec = custom_pair(str(tiny_dirs["target"]), str(folder), DrafterKind.UNIVERSAL)
    universal = load_pair(spec, device="cpu", dtype="float32")
    rows = universal.assistant.get_output_embeddings().weight.shape[0]
    sampled = RunSettings(max_new_tokens=12, sample=True, temperature=1.0, seed=3)
    done = records(universal, settings=sampled)
    assert all(record.token_ids for record in done.values())
    assert universal.assistant.get_output_embeddings().weight.shape[0] == rows
    greedy = records(universal)
    assert greedy["assisted"].token_ids == greedy["plain"].token_ids


def test_sampling_with_a_seed_is_reproducible(pair):
    sampled = RunSettings(max_new_tokens=16, sample=True, temperature=1.0, top_p=0.95, seed=7)
    ids = encode_prompt(pair, PROMPT)
    first = [e for e in decoding.run(pair, ids, "plain", sampled) if isinstance(e, RunDone)]
    second = [e for e in decoding.run(pair, ids, "plain", sampled) if isinstance(e, RunDone)]
    assert first[0].record.token_ids == second[0].record.token_ids


def test_heuristic_schedule_is_reset_between_runs(self_pair):
    heuristic = DraftSettings(num_assistant_tokens=2, schedule="heuristic", confidence_threshold=0)
    ids = encode_prompt(self_pair, PROMPT)

    def drafted_per_step():
        events = decoding.run(self_pair, ids, "assisted", GREEDY, heuristic)
        return [e.step.drafted for e in events if isinstance(e, StepEvent)]

    first = drafted_per_step()
    assert first[0] == 2 and max(first) > 2  # it grew (everything is accepted)
    assert drafted_per_step() == first  # and starts again from 2
