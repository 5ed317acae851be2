"""Sampled assisted runs on tiny models: each draft's recorded p and q are what Transformers
accepted it with, each committed token's kind follows the draft, the observed acceptance
agrees with what p and q lead one to expect, and greedy runs record, install and report
nothing new."""

from __future__ import annotations

import math
from contextlib import nullcontext

import pytest
import torch
from transformers.generation import utils as generation_utils

from assisted.analysis import sampling, stats
from assisted.core.record import RunRecord, Step
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.engine.observe import StepObserver
from tests.engine.runs import load

PROMPT = "def add(a, b):"
LOOKUP_PROMPT = "def add(a, b):\n    return a + b\n" * 3
GREEDY = RunSettings(max_new_tokens=24)
DRAFT = DraftSettings(num_assistant_tokens=4, confidence_threshold=0.0)


def sampled(temperature: float = 0.7, top_p: float = 0.9, seed: int = 3, tokens: int = 40):
    return RunSettings(
        max_new_tokens=tokens, sample=True, temperature=temperature, top_p=top_p, seed=seed
    )


def assisted_run(pair, settings, draft=DRAFT, prompt=PROMPT) -> RunRecord:
    ids = encode_prompt(pair, prompt)
    events = decoding.run(pair, ids, "assisted", settings, draft)
    return next(e for e in events if isinstance(e, RunDone)).record


@pytest.fixture(scope="module")
def lookup(tiny_dirs):
    return load(tiny_dirs, assistant=None, drafter=DrafterKind.PROMPT_LOOKUP)


def drafting_steps(record: RunRecord) -> list[Step]:
    steps = [step for step in record.steps if step.drafted]
    assert steps, "the run drafted nothing"
    return steps


def test_an_identical_unwarped_assistant_has_q_equal_to_p_and_every_draft_accepted(self_pair):
    # Temperature 1 and top-p 1: no warper, so the assistant's q is the target's p.
    record = assisted_run(self_pair, sampled(temperature=1.0, top_p=1.0))
    for step in drafting_steps(record):
        assert step.draft_p == pytest.approx(step.draft_q, rel=1e-4)
        assert min(sampling.accept_probs(step)) > 0.999
        assert step.accepted == step.drafted
        assert sampling.CORRECTED not in sampling.kinds(step)
    assert stats.acceptance_rate(record) == 1.0
    assert sampling.expected_acceptance(record)[0] == pytest.approx(1.0, abs=1e-3)


@pytest.fixture
def spied(monkeypatch) -> list:
    """What `_speculative_sampling` is called with, as (p_i, q_i) of each drafted token of
    each call, computed as it computes them."""
    seen = []
    speculative_sampling = generation_utils._speculative_sampling

    def spy(candidate_input_ids, candidate_logits, candidate_length, new_logits, **kwargs):
        drafted = candidate_input_ids[0, -candidate_length:]
        rows = torch.arange(candidate_length)
        q = candidate_logits.softmax(dim=-1)[0, rows, drafted]
        p = new_logits.softmax(dim=-1)[0, rows, drafted]
        seen.append((p.tolist(), q.tolist()))
        return speculative_sampling(
            candidate_input_ids, candidate_logits, candidate_length, new_logits, **kwargs
        )

    monkeypatch.setattr(generation_utils, "_speculative_sampling", spy)
    return seen


def test_p_and_q_are_what_transformers_accepted_each_draft_with(pair, spied):
    seen = spied
    record = assisted_run(pair, sampled())
    steps = drafting_steps(record)
    assert len(steps) == len(seen)
    for step, (p, q) in zip(steps, seen, strict=True):
        assert step.draft_p == pytest.approx(p, rel=1e-6, abs=1e-12)
        assert step.draft_q == pytest.approx(q, rel=1e-6, abs=1e-12)


def test_p_is_warped_once_and_the_assistants_q_twice_as_transformers_does(self_pair):
    """Transformers 5.2x passes the target's warpers to the assistant's `generate()`, which
    adds its own from the same config: the assistant samples at T² (logits / T / T). An
    upgrade that warps once fails here, and `docs/app.md` ("Sampling") must change."""
    temperature = 0.5
    record = assisted_run(self_pair, sampled(temperature=temperature, top_p=1.0))
    first = record.steps[0]
    assert first.drafted
    ids = torch.tensor([encode_prompt(self_pair, PROMPT)])
    with torch.inference_mode():
        logits = self_pair.target(input_ids=ids).logits[0, -1].float()
    token = first.draft_ids[0]
    p = (logits / temperature).softmax(-1)[token].item()
    q = (logits / temperature**2).softmax(-1)[token].item()
    assert first.draft_p[0] == pytest.approx(p, rel=1e-4)
    assert first.draft_q[0] == pytest.approx(q, rel=1e-4)


def test_a_prompt_lookup_draft_has_q_one_and_is_accepted_with_probability_p(lookup):
    draft = DraftSettings(prompt_lookup_num_tokens=4, lookup="transformers")
    record = assisted_run(lookup, sampled(temperature=1.0), draft, prompt=LOOKUP_PROMPT)
    for step in drafting_steps(record):
        assert step.draft_q == (1.0,) * step.drafted
        assert sampling.accept_probs(step) == pytest.approx(step.draft_p)


def check_kinds(record: RunRecord) -> None:
    """Each committed token has a kind: the accepted candidates, then at most one of the
    target's, a bonus only after a fully accepted draft, corrected only after a rejection."""
    for step in record.steps:
        kinds = sampling.kinds(step)
        assert len(kinds) == len(step.token_ids)
        assert kinds[: step.accepted] == [sampling.ACCEPTED] * step.accepted
        own = kinds[step.accepted :]
        assert len(own) <= 1
        if own == [sampling.BONUS]:
            assert 0 < step.accepted == step.drafted
        if own == [sampling.CORRECTED]:
            assert step.accepted < step.drafted
            assert step.token_ids[step.accepted] != step.draft_ids[step.accepted]
        if own == [sampling.TARGET]:
            assert step.drafted == 0


def test_every_committed_token_has_its_kind(pair, self_pair, lookup):
    runs = [assisted_run(pair, sampled()), assisted_run(self_pair, sampled())]
    lookup_draft = DraftSettings(prompt_lookup_num_tokens=4)
    runs.append(assisted_run(lookup, sampled(), lookup_draft, prompt=LOOKUP_PROMPT))
    seen = set()
    for record in runs:
        check_kinds(record)
        seen.update(kind for step in record.steps for kind in sampling.kinds(step))
    assert {sampling.ACCEPTED, sampling.CORRECTED, sampling.BONUS} <= seen


def test_under_auto_a_free_and_right_lookup_draft_has_q_one_and_a_bonus_after_it(lookup):
    """The `auto` policy drafts long where prompt lookup's drafts are free and every one is
    accepted: here the target all but always samples one token, which the prompt repeats."""
    repeat = lookup.tokenizer("a")["input_ids"][0]

    def nearly_always_repeat(module, args, logits):
        peaked = torch.zeros_like(logits)
        peaked[..., repeat] = 30.0
        return peaked

    handle = lookup.target.lm_head.register_forward_hook(nearly_always_repeat)
    try:
        draft = DraftSettings(prompt_lookup_num_tokens=6, schedule="auto")
        ids = [repeat] * 8
        events = decoding.run(lookup, ids, "assisted", sampled(temperature=1.0), draft)
        record = next(e for e in events if isinstance(e, RunDone)).record
    finally:
        handle.remove()
    check_kinds(record)
    assert all(step.chosen is not None for step in record.steps)  # the policy chose each
    steps = drafting_steps(record)
    assert all(step.draft_q == (1.0,) * step.drafted for step in steps)
    assert all(p == pytest.approx(1.0, abs=1e-6) for step in steps for p in step.draft_p)
    assert any(sampling.kinds(step)[-1] == sampling.BONUS for step in steps)


def test_the_observed_acceptance_agrees_with_the_expected_within_chance(self_pair):
    # Top-p below 1 makes q differ from p (the assistant's warped twice): drafts are refused.
    record = assisted_run(self_pair, sampled(tokens=96))
    expected, sd = sampling.expected_acceptance(record)
    observed = stats.acceptance_rate(record)
    assert 0 < expected < 1 and observed < 1
    assert abs(observed - expected) <= 2 * sd


def test_watching_the_drafts_changes_no_sampled_token_nor_probability(pair, spied, monkeypatch):
    watched = assisted_run(pair, sampled())
    used = list(spied)
    spied.clear()
    monkeypatch.setattr(StepObserver, "watching_drafts", lambda self: nullcontext())
    unwatched = assisted_run(pair, sampled())
    assert watched.token_ids == unwatched.token_ids
    assert spied == used  # Transformers' own p and q, to the bit
    assert all(step.draft_p == () for step in unwatched.steps)


def test_a_greedy_run_installs_nothing_and_records_no_probabilities(pair, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a greedy run must not watch its drafts")

    monkeypatch.setattr("assisted.engine.observe.DraftProbabilities.watching", refuse)
    record = assisted_run(pair, GREEDY)
    assert all(step.draft_p == step.draft_q == () for step in record.steps)


def test_the_greedy_json_has_no_key_of_sampling(pair):
    ids = encode_prompt(pair, PROMPT)
    plain = next(e for e in decoding.run(pair, ids, "plain", GREEDY) if isinstance(e, RunDone))
    result = stats.report("p", "cpu", "float32", plain.record, assisted_run(pair, GREEDY))
    assert "sampling_check" not in result
    assisted = result["assisted"]
    assert not {"expected_acceptance_rate", "expected_acceptance_sd"} & set(assisted)
    assert set(assisted["per_step"][0]) == {
        "text",
        "t_s",
        "step_s",
        "drafted",
        "accepted",
        "accepted_text",
        "rejected_text",
        "draft_s",
        "source",
    }


def test_the_sampled_json_lists_each_draft_and_kind(pair):
    ids = encode_prompt(pair, PROMPT)
    events = decoding.run(pair, ids, "plain", sampled())
    plain = next(e for e in events if isinstance(e, RunDone)).record
    record = assisted_run(pair, sampled())
    result = stats.report("p", "cpu", "float32", plain, record)
    assert result["sampling_check"] is None  # not checked in this run
    summary = result["assisted"]
    assert summary["expected_acceptance_rate"] == pytest.approx(
        sampling.expected_acceptance(record)[0], abs=1e-4
    )
    for row, step in zip(summary["per_step"], record.steps, strict=True):
        assert [d["token"] for d in row["drafts"]] == list(step.draft_ids)
        assert [d["accepted"] for d in row["drafts"]] == [
            i < step.accepted for i in range(step.drafted)
        ]
        for entry in row["drafts"]:
            assert entry["accept_prob"] == pytest.approx(
                min(1.0, entry["p"] / entry["q"]), rel=1e-3, abs=1e-9
            )
        assert len(row["kinds"]) == len(step.token_ids)
    assert "sampling_check" not in stats.report("p", "cpu", "float32", None, record)


def test_expected_accepted_is_the_mean_and_variance_over_every_outcome():
    probs = [0.9, 0.5, 0.25, 0.8]
    # P(exactly k accepted) = a_1 ⋯ a_k (1 − a_{k+1}), and all four with a_1 ⋯ a_4.
    outcomes = []
    for k in range(len(probs) + 1):
        chance = math.prod(probs[:k]) * (1 - probs[k] if k < len(probs) else 1)
        outcomes.append((k, chance))
    mean = sum(k * chance for k, chance in outcomes)
    variance = sum(k * k * chance for k, chance in outcomes) - mean**2
    assert sampling.expected_accepted(probs) == pytest.approx((mean, variance))
    assert sampling.expected_accepted([]) == (0.0, 0.0)


def test_kinds_and_the_expected_rate_of_hand_made_steps():
    steps = [
        Step((1, 2, 3), "", 2, 2, 0.1, (1, 2), draft_p=(0.5, 0.2), draft_q=(0.5, 0.4)),
        Step((4, 9), "", 3, 1, 0.2, (4, 5, 6), draft_p=(0.9, 0.1, 0.3), draft_q=(0.3, 0.2, 1.0)),
        Step((7,), "", 0, 0, 0.3),
        Step((8,), "", 1, 1, 0.4, (8,), draft_p=(0.6,), draft_q=(1.0,)),  # EOS ends the step
    ]
    assert [sampling.kinds(step) for step in steps] == [
        ["accepted", "accepted", "bonus"],
        ["accepted", "corrected"],
        ["target"],
        ["accepted"],
    ]
    assert sampling.accept_probs(steps[1]) == pytest.approx([1.0, 0.5, 0.3])
    record = RunRecord("assisted", DrafterKind.ASSISTANT, 5, steps, sampled=True)
    means = [1.0 + 0.5, 1.0 + 0.5 + 0.15, 0.6]
    assert sampling.expected_acceptance(record)[0] == pytest.approx(sum(means) / 6)
    unrecorded = RunRecord("assisted", DrafterKind.ASSISTANT, 5, [Step((1,), "", 1, 0, 0.1)])
    assert sampling.expected_acceptance(unrecorded) == (None, None)


def test_a_record_keeps_its_probabilities_through_json_and_older_records_load():
    step = Step((1, 2), "ab", 1, 1, 0.1, (1,), draft_p=(0.25,), draft_q=(0.5,))
    record = RunRecord("assisted", DrafterKind.ASSISTANT, 5, [step], sampled=True)
    data = record.to_dict()
    data["steps"][0]["draft_p"] = list(data["steps"][0]["draft_p"])  # as JSON gives it back
    assert RunRecord.from_dict(data).steps[0] == step
    for key in ("draft_p", "draft_q"):
        del data["steps"][0][key]
    assert RunRecord.from_dict(data).steps[0].draft_p == ()


def test_describe_acceptance_agrees_within_two_standard_deviations_else_says_so():
    summary = {"acceptance_rate": 0.62, "expected_acceptance_rate": 0.60}
    agree = sampling.describe_acceptance({**summary, "expected_acceptance_sd": 0.04})
    assert agree.startswith("observed 62.0%, expected 60.0% ± 4.0% from each draft's p and q")
    assert "they agree within chance" in agree
    apart = sampling.describe_acceptance({**summary, "expected_acceptance_sd": 0.005})
    assert "more than 2 standard deviations apart" in apart and "looks like a bug" in apart
    assert sampling.describe_acceptance({"acceptance_rate": 0.5}) is None
