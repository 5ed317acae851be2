"""What the `auto` policy learns on a pair: a snapshot and restore bring back the acceptance
and keep the costs, in place, for the pair and its siblings alike."""

from __future__ import annotations

import dataclasses

import pytest

from assisted.core.settings import DrafterKind, DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import custom_pair, load_pair
from assisted.policy.learnt import LearntState
from tests.engine.runs import priced

# What a pair carries from run to run is the assistant's acceptance (a lookup's is each
# prompt's own): the target drafting for itself, priced nearly free and its verifications
# flat before each run, drafts in every run and keeps its drafts, so its counts change from
# run to run.
AUTO = DraftSettings(num_assistant_tokens=4, schedule="auto", confidence_threshold=0.0)
SHORT = RunSettings(max_new_tokens=16)
A, L = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["target"]))
    loaded = load_pair(spec, device="cpu", dtype="float32")
    return dataclasses.replace(loaded, learnt=LearntState())


def auto_run(pair, prompt: str) -> None:
    priced(pair, prefill_s=0.0, draft_s=1e-7, draft=AUTO)
    # Verifying as cheap as a plain step, whatever a busy machine timed: drafting pays.
    pair.learnt.verify_s.update(dict.fromkeys(range(1, AUTO.num_assistant_tokens + 2), 1e-3))
    ids = encode_prompt(pair, prompt)
    events = decoding.run(pair, ids, "assisted", SHORT, AUTO)
    assert any(isinstance(event, RunDone) for event in events)


def acceptance(learnt: LearntState) -> dict:
    return {name: p.acceptance for name, p in learnt.precisions.items()}


def costs(learnt: LearntState) -> tuple:
    by_precision = {name: (p.draft_s, p.prefill_s) for name, p in learnt.precisions.items()}
    return dict(learnt.verify_s), by_precision


def test_a_restore_brings_back_the_acceptance_a_run_changed_and_keeps_the_costs(
    pair, trusted_prices
):
    auto_run(pair, "def add(a, b):")
    taught = acceptance(pair.learnt)
    assert taught["none"]  # the run left its counts
    snapshot = pair.learnt.snapshot()
    auto_run(pair, "for i in range(10):\n    print(i * i)\n" * 2)
    assert acceptance(pair.learnt) != taught
    refined = costs(pair.learnt)
    pair.learnt.restore(snapshot)
    assert acceptance(pair.learnt) == taught
    assert costs(pair.learnt) == refined  # the costs the second run refined stay


def test_a_restore_works_in_place_and_siblings_see_it(pair, trusted_prices):
    # As the benchmark makes its drafter variants: a shallow copy sharing the state.
    sibling = dataclasses.replace(pair)
    state = pair.learnt
    assert sibling.learnt is state
    auto_run(pair, "def add(a, b):")
    snapshot = state.snapshot()
    auto_run(sibling, "The quick brown fox jumps over the lazy dog.")
    assert acceptance(pair.learnt) != snapshot.acceptance  # the sibling's run taught the pair
    state.restore(snapshot)
    assert pair.learnt is state and sibling.learnt is state
    assert acceptance(sibling.learnt) == snapshot.acceptance


def counts(value: float) -> dict:
    return {(A, False, 0): ([value] * 4, [value + 1.0] * 4)}


def test_a_snapshot_is_apart_from_what_is_learnt_after_it():
    state = LearntState()
    state.precision("none").acceptance = counts(1.0)
    snapshot = state.snapshot()
    state.precision("none").acceptance[A, False, 0][0][0] = 99.0  # changed in place
    state.precision("int8").acceptance = counts(2.0)  # a precision first seen afterwards
    state.restore(snapshot)
    assert acceptance(state) == {"none": counts(1.0), "int8": {}}
    state.precision("none").acceptance[A, False, 0][0][0] = 99.0
    state.restore(snapshot)  # the same snapshot again
    assert state.precision("none").acceptance == counts(1.0)


def test_a_restore_leaves_every_cost_as_it_is():
    state = LearntState(verify_s={1: 0.01, 5: 0.02})
    state.precision("int8").draft_s = 0.003
    snapshot = state.snapshot()
    state.verify_s[3] = 0.015
    state.precision("int8").prefill_s = 0.0004
    state.restore(snapshot)
    assert state.verify_s == {1: 0.01, 3: 0.015, 5: 0.02}
    assert (state.precision("int8").draft_s, state.precision("int8").prefill_s) == (0.003, 0.0004)


def test_a_restore_brings_back_the_sampled_bands_too():
    state = LearntState()
    state.precision("none").sampled["t<=1"] = counts(1.0)
    snapshot = state.snapshot()
    state.precision("none").sampled["t<=1"] = counts(2.0)
    state.precision("none").sampled["t>1"] = counts(3.0)
    state.precision("none").acceptance = counts(4.0)
    state.restore(snapshot)
    assert state.precision("none").sampled == {"t<=1": counts(1.0)}
    assert state.precision("none").acceptance == {}


def test_a_reads_price_is_the_median_of_the_latest_at_the_targets_level_now():
    from assisted.policy.estimates import WINDOW
    from assisted.policy.learnt import PrecisionLearnt

    learnt = PrecisionLearnt()
    for read_s in (0.005, 0.005, 0.030, 0.005):  # one read timed during a burst
        learnt.keep_read(read_s, t1_s=0.25)
    assert learnt.prefill_s == pytest.approx(0.005)  # the burst sets no price
    learnt.keep_read(0.010, t1_s=0.50)  # the whole machine twice as slow now
    assert learnt.prefill_s == pytest.approx(0.010)  # the same reads, at today's level
    for _ in range(WINDOW):
        learnt.keep_read(0.008, t1_s=0.25)
    assert learnt.prefill_s == pytest.approx(0.008) and len(learnt.reads) == WINDOW
    again = LearntState.from_dict(LearntState(precisions={"int8": learnt}).to_dict())
    assert again.precisions["int8"].reads == learnt.reads


def test_every_run_leaves_its_answer_once_a_prompt_and_none_knows_its_own(pair, monkeypatch):
    monkeypatch.setattr(pair, "learnt", learnt := LearntState())
    priced(pair, prefill_s=0.0, draft_s=1e-7, draft=AUTO)
    ids = encode_prompt(pair, "def add(a, b):")
    for mode in ("plain", "assisted"):  # a comparison: two runs of one prompt
        list(decoding.run(pair, ids, mode, SHORT, DraftSettings(num_assistant_tokens=2)))
    assert len(learnt.answers) == 1  # plain runs leave theirs too, once a prompt
    # A run of the same prompt right after does not expect from its own answer.
    from assisted.engine import engine

    policy = engine.new_policy(pair, AUTO, "none", "greedy", prompt_ids=ids)
    assert policy.answers == ()
    other = engine.new_policy(pair, AUTO, "none", "greedy", prompt_ids=[1, 2, 3])
    assert other.answers == tuple(learnt.answers)
