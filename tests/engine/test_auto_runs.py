"""Runs under the `auto` schedule: lossless, their choices recorded, long drafts where
drafting is free and right, prompt lookup driven, sampled and bare runs; refused for
drafters it cannot drive."""

from __future__ import annotations

import dataclasses

import pytest

from assisted.analysis import oracle, stats
from assisted.core.record import RunRecord
from assisted.core.settings import (
    DrafterKind,
    DraftSettings,
    RunSettings,
    SettingsError,
)
from assisted.engine import decoding
from assisted.engine.decoding import RunDone, StepEvent
from assisted.engine.engine import Engine, encode_prompt
from tests.engine.runs import AUTO, GREEDY, PROMPT, events_record, fresh_copy, load, records


@pytest.mark.parametrize("cumulative", [0.0, 0.6])
def test_the_auto_schedule_is_lossless_and_records_its_choices(pair, cumulative):
    done = records(pair, draft=dataclasses.replace(AUTO, cumulative_threshold=cumulative))
    plain, assisted = done["plain"], done["assisted"]
    assert assisted.token_ids == plain.token_ids
    assert all(step.chosen is not None and 0 <= step.chosen <= 4 for step in assisted.steps)
    assert all(step.drafted <= step.chosen for step in assisted.steps)
    assert [k for k, _ in assisted.verify_cost_s] == [1, 2, 3, 4, 5]
    assert all(seconds > 0 for _, seconds in assisted.verify_cost_s)
    summary = stats.summarize(assisted)
    assert len(summary["verify_cost_s"]) == 5
    assert "chosen" in summary["per_step"][0]
    assert RunRecord.from_dict(assisted.to_dict()) == assisted
    assert "verify_cost_s" not in stats.summarize(plain)
    # Each step keeps what the policy expected of its choice, and they make the prediction.
    for step in assisted.steps:
        assert step.expected_tokens >= 1 and step.expected_s > 0 and step.plain_step_s > 0
        if step.chosen == 0:
            assert (step.expected_tokens, step.expected_s) == (1.0, step.plain_step_s)
    assert "expected_tokens" in summary["per_step"][0]
    assert stats.compare_runs(plain, assisted)["prediction"] == stats.POLICY
    assert all(step.expected_s is None for step in plain.steps)


def test_the_auto_schedule_drafts_long_when_drafts_are_free_and_right(lookup_pair):
    # Prompt lookup drafts for free, T(k) is flat, and every candidate is accepted: the cap
    # is the best choice. T(k) is priced, not timed: a calibration of sub-millisecond passes
    # on a busy machine can find T(2) dearer than T(7), or T(1) cheapest of all. Priced far
    # above any pass here (a second), each timed verification lowers every row alike and its
    # own, the chosen one, further: the machine's timings cannot turn the policy from the cap.
    lookup, repeat = lookup_pair
    fresh = fresh_copy(lookup)
    auto = DraftSettings(prompt_lookup_num_tokens=6, schedule="auto")
    Engine.of(fresh).prepare(auto)
    fresh.learnt.verify_s.update({k: 1.0 for k in range(1, 8)})
    settings = RunSettings(max_new_tokens=40)
    events = list(decoding.run(fresh, [repeat] * 8, "assisted", settings, auto))
    steps = [e.step for e in events if isinstance(e, StepEvent)]
    # Five steps of 7 tokens, then the limit leaves room for 4 candidates and the target's own.
    assert [step.chosen for step in steps] == [6, 6, 6, 6, 6, 4]
    assert all(step.accepted == step.drafted for step in steps)
    # The oracle, without an assistant: the lookup's every proposal found again in hindsight.
    found = oracle.report(None, events_record(events))
    assert found["reason"] is None and found["best_constant_gamma"] is None
    assert found["agreement"] == 1.0


def test_the_auto_schedule_drives_prompt_lookup_losslessly(tiny_dirs):
    lookup = load(tiny_dirs, assistant=None, drafter=DrafterKind.PROMPT_LOOKUP)
    prompt = "def add(a, b):\n    return a + b\n" * 3
    auto = DraftSettings(prompt_lookup_num_tokens=6, schedule="auto")
    done = records(lookup, prompt=prompt, draft=auto)
    assert done["assisted"].token_ids == done["plain"].token_ids
    assert len(done["assisted"].verify_cost_s) == 7


def test_the_auto_schedule_samples_and_runs_bare(pair):
    sampled = RunSettings(max_new_tokens=12, sample=True, temperature=1.0, top_p=0.95, seed=3)
    ids = encode_prompt(pair, PROMPT)
    (done,) = [
        e for e in decoding.run(pair, ids, "assisted", sampled, AUTO) if isinstance(e, RunDone)
    ]
    assert stats.new_tokens(done.record) == 12
    bare, _ = decoding.run_bare(pair, ids, "assisted", GREEDY, AUTO)
    assert bare == records(pair, modes=("plain",))["plain"].token_ids
    assert "_get_candidate_generator" not in vars(pair.target)


def test_the_auto_schedule_is_refused_for_drafters_it_cannot_drive(tiny_dirs):
    universal = load(tiny_dirs, assistant="other_tokenizer", drafter=DrafterKind.UNIVERSAL)
    with pytest.raises(SettingsError, match="auto"):
        list(decoding.compare(universal, PROMPT, GREEDY, AUTO))
