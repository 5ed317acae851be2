"""Decoding runs on tiny models: losslessness, acceptance invariants, events, stop, errors,
and the Transformers behaviour the observer relies on."""

from __future__ import annotations

import dataclasses
import inspect
import threading

import pytest
import torch
from transformers.generation.candidate_generator import (
    AssistedCandidateGenerator,
    PromptLookupCandidateGenerator,
)
from transformers.generation.streamers import BaseStreamer
from transformers.generation.utils import GenerationMixin

from assisted.analysis import oracle, stats
from assisted.core.drafters import DrafterKind
from assisted.core.record import RunRecord
from assisted.core.settings import (
    MAX_NEW_TOKENS_CAP,
    WARMUP_TOKENS,
    DraftSettings,
    RunSettings,
    SettingsError,
)
from assisted.engine import calibration as calibrating
from assisted.engine import comparison, decoding, plan, prepare, running
from assisted.engine.decoding import RunDone, StepEvent
from assisted.engine.drafters import candidates, seam
from assisted.engine.drafters.lean import LeanDrafter
from assisted.engine.drafters.static_draft import StaticDrafter
from assisted.models import learnt_store, quantize
from assisted.models.learnt_store import LearntFile
from assisted.models.pairs import LoadedPair, custom_pair, load_pair
from assisted.policy import costs
from assisted.policy.learnt import LearntState
from tests.scripted import Scripted

PROMPT = "def add(a, b):"
GREEDY = RunSettings(max_new_tokens=24)
DRAFT = DraftSettings(num_assistant_tokens=4, confidence_threshold=0.0)


def load(dirs, assistant="other", drafter=None):
    assistant_dir = str(dirs[assistant]) if assistant else None
    spec = custom_pair(str(dirs["target"]), assistant_dir, drafter)
    return load_pair(spec, device="cpu", dtype="float32")


def records(pair, prompt=PROMPT, settings=GREEDY, draft=DRAFT, **kwargs):
    done = {}
    for event in comparison.compare(pair, prompt, settings, draft, **kwargs):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    return done


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return load(tiny_dirs)


@pytest.fixture(scope="module")
def self_pair(tiny_dirs):
    return load(tiny_dirs, assistant="target")


# -- Transformers behaviour we rely on (an upgrade that changes it must fail here) --------


class RecordingStreamer(BaseStreamer):
    def __init__(self):
        self.puts = []

    def put(self, value):
        self.puts.append(tuple(value.shape))

    def end(self):
        pass


def test_generate_puts_the_prompt_then_one_put_per_step(pair):
    ids = running.encode_prompt(pair, PROMPT)
    model_inputs = torch.tensor([ids])
    plain = RecordingStreamer()
    pair.target.generate(model_inputs, max_new_tokens=6, do_sample=False, streamer=plain)
    assert plain.puts[0] == (1, len(ids))  # the prompt, once
    assert plain.puts[1:] == [(1,)] * 6  # then one token per step

    assisted = RecordingStreamer()
    pair.assistant.generation_config.num_assistant_tokens = 3
    pair.assistant.generation_config.assistant_confidence_threshold = 0.0
    pair.target.generate(
        model_inputs,
        max_new_tokens=12,
        do_sample=False,
        streamer=assisted,
        assistant_model=pair.assistant,
    )
    assert assisted.puts[0] == (1, len(ids))
    # afterwards one (1, accepted + 1) tensor per step
    assert all(shape[0] == 1 and 1 <= shape[1] <= 4 for shape in assisted.puts[1:])
    assert sum(shape[1] for shape in assisted.puts[1:]) == 12


def test_target_hook_sees_prompt_plus_drafts_then_drafts_plus_one(self_pair):
    seen = []

    def hook(module, args, kwargs):
        cache = kwargs.get("past_key_values")
        seen.append((kwargs["input_ids"].shape[1], cache.get_seq_length() if cache else 0))

    ids = running.encode_prompt(self_pair, PROMPT)
    self_pair.assistant.generation_config.num_assistant_tokens = 3
    self_pair.assistant.generation_config.assistant_confidence_threshold = 0.0
    handle = self_pair.target.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        self_pair.target.generate(
            torch.tensor([ids]),
            max_new_tokens=9,
            do_sample=False,
            assistant_model=self_pair.assistant,
        )
    finally:
        handle.remove()
    # First forward fuses prefill and the first verification: prompt + 3 drafted, no cache.
    assert seen[0] == (len(ids) + 3, 0)
    # With an identical assistant all 3 are accepted, so each later step feeds the last
    # committed token + 3 drafted on top of a cache holding everything before it.
    assert seen[1] == (4, len(ids) + 3)


# -- invariants ----------------------------------------------------------------------------


def test_greedy_assisted_equals_greedy_plain_in_fp32(pair):
    done = records(pair)
    plain, assisted = done["plain"], done["assisted"]
    assert stats.new_tokens(plain) == GREEDY.max_new_tokens or plain.token_ids[-1] in (
        pair.target.generation_config.eos_token_id,
    )
    assert assisted.token_ids == plain.token_ids
    assert assisted.text == plain.text
    assert stats.compare(plain, assisted)["identical"] is True


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
    ids = running.encode_prompt(self_pair, PROMPT)
    plain = next(e for e in running.run(self_pair, ids, "plain", GREEDY) if isinstance(e, RunDone))
    # Make the target's third token its EOS: the assistant drafts up to it, the target
    # agrees, and the step ends there, with no token of the target's own after the draft.
    eos = plain.record.token_ids[2]
    monkeypatch.setattr(self_pair.target.generation_config, "eos_token_id", eos)
    events = running.run(self_pair, ids, "assisted", GREEDY, DRAFT)
    (step,) = [e.step for e in events if isinstance(e, StepEvent)]
    assert step.token_ids == step.draft_ids == tuple(plain.record.token_ids[:3])
    assert step.drafted == step.accepted == 3
    assert step.rejected_text == "" and step.accepted_text == step.text


def events_record(events) -> RunRecord:
    return next(e.record for e in events if isinstance(e, RunDone))


@pytest.fixture
def lookup_pair(tiny_dirs):
    """Prompt lookup on a target that always predicts one token, `repeat`: drafts copied
    from a prompt of that token repeated are all accepted."""
    lookup = load(tiny_dirs, assistant=None, drafter=DrafterKind.PROMPT_LOOKUP)
    repeat = lookup.tokenizer("a")["input_ids"][0]

    def always_repeat(module, args, logits):
        forced = torch.zeros_like(logits)
        forced[..., repeat] = 1.0
        return forced

    handle = lookup.target.lm_head.register_forward_hook(always_repeat)
    yield lookup, repeat
    handle.remove()


def test_a_step_the_length_limit_cuts_counts_every_committed_candidate(lookup_pair):
    lookup, repeat = lookup_pair
    # Transformers' lookup: it drafts past the limit, which ours never does.
    lookup_draft = DraftSettings(prompt_lookup_num_tokens=4, lookup="transformers")
    # 7 new tokens: a full step of 4 candidates + the target's own, then 2 of the next 4
    # candidates fit; the limit cuts the step before the target's own token.
    events = running.run(
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


def test_sampling_with_a_seed_is_reproducible(pair):
    sampled = RunSettings(max_new_tokens=16, sample=True, temperature=1.0, top_p=0.95, seed=7)
    ids = running.encode_prompt(pair, PROMPT)
    first = [e for e in running.run(pair, ids, "plain", sampled) if isinstance(e, RunDone)]
    second = [e for e in running.run(pair, ids, "plain", sampled) if isinstance(e, RunDone)]
    assert first[0].record.token_ids == second[0].record.token_ids


def test_heuristic_schedule_is_reset_between_runs(self_pair):
    heuristic = DraftSettings(num_assistant_tokens=2, schedule="heuristic", confidence_threshold=0)
    ids = running.encode_prompt(self_pair, PROMPT)

    def drafted_per_step():
        events = running.run(self_pair, ids, "assisted", GREEDY, heuristic)
        return [e.step.drafted for e in events if isinstance(e, StepEvent)]

    first = drafted_per_step()
    assert first[0] == 2 and max(first) > 2  # it grew (everything is accepted)
    assert drafted_per_step() == first  # and starts again from 2


# -- the auto schedule ---------------------------------------------------------------------

AUTO = DraftSettings(num_assistant_tokens=4, schedule="auto", confidence_threshold=0.0)


def generate_with(pair, policy, prompt=PROMPT, lean=True, **kwargs):
    """Greedy ids of one generate() under `policy`, and the rows of each target pass."""
    rows = []
    hook = pair.target.register_forward_pre_hook(
        lambda module, args, kw: rows.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    ids = torch.tensor([running.encode_prompt(pair, prompt)])
    try:
        with seam.drafting_policy(pair.target, policy, lean=lean):
            out = pair.target.generate(ids, max_new_tokens=16, do_sample=False, **kwargs)
    finally:
        hook.remove()
    return out[0, ids.shape[1] :].tolist(), rows[1:]  # rows[0] is the prompt's prefill


def plain_ids(pair, prompt=PROMPT):
    ids = torch.tensor([running.encode_prompt(pair, prompt)])
    out = pair.target.generate(ids, max_new_tokens=16, do_sample=False)
    return out[0, ids.shape[1] :].tolist()


def test_get_candidate_generator_is_the_seam_the_auto_schedule_overrides():
    """Pin: Transformers builds the candidate generator in this private method, calls it
    on the instance with these arguments, and reads the draft length from these
    attributes at every step. An upgrade that changes any of it must fail here."""
    seam = inspect.signature(GenerationMixin._get_candidate_generator)
    assert list(seam.parameters) == [
        "self",
        "generation_config",
        "input_ids",
        "inputs_tensor",
        "logits_processor",
        "model_kwargs",
        "assistant_model",
        "target_tokenizer",
        "assistant_tokenizer",
    ]
    assert "self._get_candidate_generator(" in inspect.getsource(GenerationMixin._assisted_decoding)
    assert "self.num_assistant_tokens" in inspect.getsource(
        AssistedCandidateGenerator._calculate_new_tokens
    )
    assert "self.num_output_tokens" in inspect.getsource(
        PromptLookupCandidateGenerator.get_candidates
    )


def test_the_seam_drives_each_step_and_is_removed_afterwards(pair):
    pair.assistant.generation_config.num_assistant_tokens_schedule = "constant"
    pair.assistant.generation_config.assistant_confidence_threshold = 0.0
    policy = Scripted([3])
    _, rows = generate_with(pair, policy, assistant_model=pair.assistant)
    # Near the length limit Transformers drafts fewer: the last steps are left out.
    assert len(policy.seen) > 5 and all(drafted == 3 for drafted, _ in policy.seen[:-3])
    assert all(r == 4 for r in rows[:-3])  # last committed token + 3 candidates
    assert "_get_candidate_generator" not in vars(pair.target)


def test_zero_candidates_make_a_plain_target_step(pair):
    """γ = 0 at every step: the target verifies one row a step, the assistant never runs,
    and the output is plain decoding's."""
    pair.assistant.generation_config.num_assistant_tokens_schedule = "constant"
    passes = []
    hook = pair.assistant.register_forward_pre_hook(lambda *args: passes.append(1))
    try:
        ids, rows = generate_with(pair, Scripted([0]), assistant_model=pair.assistant)
    finally:
        hook.remove()
    assert set(rows) == {1}
    assert passes == []
    assert ids == plain_ids(pair)


@pytest.mark.parametrize("first", [[0, 0, 3], [0, 3], [2]])
def test_the_assistant_can_start_after_the_first_step(pair, first):
    """Transformers extends the assistant's attention mask only once the assistant has a
    cache; the drafter extends it for an assistant that starts late."""
    pair.assistant.generation_config.num_assistant_tokens_schedule = "constant"
    policy = Scripted(first + [3] * 20)
    ids, rows = generate_with(pair, policy, assistant_model=pair.assistant)
    assert [drafted for drafted, _ in policy.seen[: len(first)]] == first
    assert ids == plain_ids(pair) and max(rows) == 4


def test_lookup_matches_and_assistant_drafts_mix_losslessly(self_pair, pair):
    prompt = "def add(a, b):\n    return a + b\n" * 3
    lookup, assistant = candidates.LOOKUP, candidates.ASSISTANT
    for model_pair in (self_pair, pair):
        model_pair.assistant.generation_config.num_assistant_tokens_schedule = "constant"
        model_pair.assistant.generation_config.assistant_confidence_threshold = 0.0
        policy = Scripted([3, 2, 0], sources=(lookup, assistant, lookup, lookup))
        ids, _ = generate_with(model_pair, policy, prompt, assistant_model=model_pair.assistant)
        assert ids == plain_ids(model_pair, prompt)
        assert all(offers[assistant] > 0 for offers in policy.offered[:8])
        assert any(offers[lookup] for offers in policy.offered)  # the prompt repeats itself


@pytest.mark.parametrize("lengths", [[0, 3], [4, 0, 0, 2, 1], [0, 0, 0, 4]])
def test_switching_between_zero_and_k_within_one_generate_is_lossless(self_pair, pair, lengths):
    for model_pair in (self_pair, pair):  # all accepted; almost nothing accepted
        model_pair.assistant.generation_config.num_assistant_tokens_schedule = "constant"
        model_pair.assistant.generation_config.assistant_confidence_threshold = 0.0
        policy = Scripted(lengths)
        ids, rows = generate_with(model_pair, policy, assistant_model=model_pair.assistant)
        assert ids == plain_ids(model_pair)
        assert 1 in rows and max(rows) > 1


@pytest.mark.parametrize("lean", [True, False])
def test_the_assistant_drafts_from_the_committed_ids_alone(pair, monkeypatch, lean):
    """After steps the assistant skipped, its cache still holds its last draft's rejected
    candidates; the drafter crops them, so every draft equals a fresh assistant's (no
    cache) from the committed ids, drafted by the lean loop or by the assistant's
    generate(). Without the crop, the second draft here differs."""
    drafts = []
    if lean:
        for kind in (LeanDrafter, StaticDrafter):  # a dynamic cache, or a static one

            def recording(self, input_ids, gamma, ids=None, draft=kind.draft):
                drafted = draft(self, input_ids, gamma, ids)
                drafts.append((input_ids.clone(), drafted))
                return drafted

            monkeypatch.setattr(kind, "draft", recording)
    else:
        get_candidates = AssistedCandidateGenerator.get_candidates

        def recording(self, input_ids, **kwargs):
            candidate_ids, logits = get_candidates(self, input_ids, **kwargs)
            drafts.append((input_ids.clone(), candidate_ids[0, input_ids.shape[1] :].tolist()))
            return candidate_ids, logits

        monkeypatch.setattr(AssistedCandidateGenerator, "get_candidates", recording)
    pair.assistant.generation_config.num_assistant_tokens_schedule = "constant"
    pair.assistant.generation_config.assistant_confidence_threshold = 0.0
    policy = Scripted([4, 0, 0, 0, 3, 0, 0, 2, 0, 0, 0])
    ids, _ = generate_with(pair, policy, lean=lean, assistant_model=pair.assistant)
    assert ids == plain_ids(pair)
    assert len(drafts) >= 3 and any(accepted < 3 for _, accepted in policy.seen)
    for input_ids, draft_ids in drafts:
        fresh = pair.assistant.generate(
            input_ids, max_new_tokens=len(draft_ids), do_sample=False, use_cache=False
        )
        assert fresh[0, input_ids.shape[1] :].tolist() == draft_ids


def test_switching_prompt_lookup_between_zero_and_k_is_lossless(tiny_dirs):
    lookup = load(tiny_dirs, assistant=None, drafter=DrafterKind.PROMPT_LOOKUP)
    prompt = "def add(a, b):\n    return a + b\n" * 3
    policy = Scripted([0, 4])
    ids, rows = generate_with(lookup, policy, prompt=prompt, prompt_lookup_num_tokens=4)
    assert ids == plain_ids(lookup, prompt)
    assert {drafted for drafted, _ in policy.seen[1::2]} - {0}  # it drafted
    assert all(drafted == 0 for drafted, _ in policy.seen[::2])
    assert set(rows[1::2]) == {1}  # the γ = 0 steps after the first: one row each


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
    assert stats.compare(plain, assisted)["prediction"] == stats.POLICY
    assert all(step.expected_s is None for step in plain.steps)


def test_the_auto_schedule_drafts_long_when_drafts_are_free_and_right(lookup_pair):
    # Prompt lookup drafts for free, the tiny target's T(k) is nearly flat on a CPU, and
    # every candidate is accepted: the cap is the best choice.
    lookup, repeat = lookup_pair
    auto = DraftSettings(prompt_lookup_num_tokens=6, schedule="auto")
    settings = RunSettings(max_new_tokens=40)
    events = list(running.run(lookup, [repeat] * 8, "assisted", settings, auto))
    steps = [e.step for e in events if isinstance(e, StepEvent)]
    # Timings of sub-millisecond passes are noisy on a busy machine: long, not always 6.
    chosen = [step.chosen for step in steps]
    assert max(chosen) == 6 and sum(chosen) / len(chosen) >= 3
    assert all(step.accepted == step.drafted for step in steps[:-1])  # the limit cuts the last
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
    ids = running.encode_prompt(pair, PROMPT)
    (done,) = [
        e for e in running.run(pair, ids, "assisted", sampled, AUTO) if isinstance(e, RunDone)
    ]
    assert stats.new_tokens(done.record) == 12
    bare, _ = running.generate_bare(pair, ids, "assisted", GREEDY, AUTO)
    assert bare == records(pair, modes=("plain",))["plain"].token_ids
    assert "_get_candidate_generator" not in vars(pair.target)


def prefix(pair):
    return torch.tensor([running.encode_prompt(pair, PROMPT)])


def test_calibration_times_one_row_and_cap_plus_one_and_interpolates(pair, monkeypatch):
    fresh = dataclasses.replace(pair, learnt=LearntState())
    timed = []

    def fake(model, prefix, rows, device):
        timed.append(rows)
        return {k: 0.01 * k for k in rows}

    monkeypatch.setattr(calibrating, "_time_forwards", fake)
    verify_s, drafter_s, prefill_s = calibrating.calibrate(
        fresh, prefix(pair), pair.assistant, "none", 4
    )
    # The target's two ends; the assistant's one row and its block of prefill rows.
    assert timed == [[1, 5], [1, calibrating._PREFILL_ROWS]]
    assert verify_s == pytest.approx({k: 0.01 * k for k in range(1, 6)})
    assert drafter_s == 0.01 and prefill_s == pytest.approx(0.01)


def test_a_disturbed_calibration_is_timed_again(pair, monkeypatch):
    fresh = dataclasses.replace(pair, learnt=LearntState())
    timings = iter([{1: 0.01, 5: 0.5}, {1: 0.02, 5: 0.03}])  # 5 rows at 50× one: disturbed
    monkeypatch.setattr(calibrating, "_time_forwards", lambda m, p, rows, d: next(timings))
    verify_s, _, _ = calibrating.calibrate(fresh, prefix(pair), None, "none", 4)
    assert verify_s[1] == 0.01 and verify_s[5] == 0.03  # the fastest of the two attempts


def test_a_runs_verifications_refine_the_pairs_calibration(pair):
    fresh = dataclasses.replace(pair, learnt=LearntState())
    # Transformers' lookup offers a match at every step (the chat template's included), so
    # the run verifies rows of several lengths whatever the random models do.
    records(fresh, draft=dataclasses.replace(AUTO, lookup="transformers"))
    verified = set(fresh.learnt.verify_s)
    assert {1, 5} <= verified and len(verified) > 2  # timed ends + rows the run verified
    # Estimates by source, streak and match bucket: the assistant's, without a streak, first.
    estimates = set(fresh.learnt.precision("none").acceptance)
    assert (candidates.ASSISTANT, False, 0) in estimates
    assert {source for source, _, _ in estimates} <= {candidates.ASSISTANT, candidates.LOOKUP}


def test_a_plain_runs_steps_set_the_pairs_t1_and_keep_it(pair, tmp_path, monkeypatch):
    # Plain steps are T(1)'s only direct timings, and an `auto` run seldom takes one.
    slow = {k: 100.0 for k in range(1, 6)}  # far slower than any pass of the tiny target
    file = LearntFile(tmp_path / "p.json", {"pair": "p"})
    fresh = dataclasses.replace(pair, learnt=LearntState(verify_s=dict(slow)), learnt_file=file)
    ids = running.encode_prompt(fresh, PROMPT)
    passes = []
    keep = costs.PlainSteps.observe_verify
    monkeypatch.setattr(
        costs.PlainSteps,
        "observe_verify",
        lambda self, rows, seconds: passes.append(seconds) or keep(self, rows, seconds),
    )
    list(running.run(fresh, ids, "plain", GREEDY))
    # Every step after the prompt's prefill, timed; their median is T(1), and only T(1).
    assert len(passes) == GREEDY.max_new_tokens - 1
    assert fresh.learnt.verify_s == {**slow, 1: pytest.approx(sorted(passes)[len(passes) // 2])}
    assert learnt_store.load(file).verify_s == pytest.approx(fresh.learnt.verify_s)
    # A stopped run's few passes set nothing, nor a warm-up's; nor does a pair nothing has
    # calibrated.
    assert WARMUP_TOKENS <= costs.PLAIN_STEPS
    fresh.learnt.verify_s[1] = slow[1]
    list(running.run(fresh, ids, "plain", RunSettings(max_new_tokens=costs.PLAIN_STEPS)))
    assert fresh.learnt.verify_s[1] == slow[1]
    bare = fresh_copy(pair)
    list(running.run(bare, ids, "plain", GREEDY))
    assert bare.learnt.verify_s == {}


def test_calibration_is_timed_once_per_pair(pair, monkeypatch):
    calibrating.calibrate(pair, prefix(pair), pair.assistant, "none", 4)
    timed = []
    monkeypatch.setattr(calibrating, "_time_forwards", lambda *args: timed.append(args) or {})
    verify_s, drafter_s, prefill_s = calibrating.calibrate(
        pair, prefix(pair), pair.assistant, "none", 4
    )
    assert timed == [] and sorted(verify_s) == [1, 2, 3, 4, 5] and drafter_s > 0 < prefill_s


def test_the_auto_schedule_is_refused_for_drafters_it_cannot_drive(tiny_dirs):
    universal = load(tiny_dirs, assistant="other_tokenizer", drafter=DrafterKind.UNIVERSAL)
    with pytest.raises(SettingsError, match="auto"):
        list(comparison.compare(universal, PROMPT, GREEDY, AUTO))


# -- preparing versus running -------------------------------------------------------------


def fresh_copy(pair):
    """`pair`'s models with nothing learnt or prepared, keeping nothing on disk."""
    return dataclasses.replace(pair, learnt=LearntState(), learnt_file=None)


def refuse(monkeypatch, pair):
    """Make every piece of preparation raise: building a drafting copy, resolving the
    precision, calibrating, rendering the chat template, reading the learnt state."""

    def refused(*args, **kwargs):
        raise AssertionError("a run prepared")

    monkeypatch.setattr(prepare, "_prepare", refused)
    monkeypatch.setattr(LoadedPair, "drafting_assistant", refused)
    monkeypatch.setattr(quantize, "resolve", refused)
    monkeypatch.setattr(quantize, "quantized_copy", refused)
    monkeypatch.setattr(calibrating, "calibrate", refused)
    monkeypatch.setattr(calibrating, "_time_forwards", refused)
    monkeypatch.setattr(prepare, "never_drafted", refused)
    monkeypatch.setattr(prepare, "_template_ids", refused)
    monkeypatch.setattr(pair.tokenizer, "apply_chat_template", refused)
    monkeypatch.setattr(learnt_store, "load", refused)
    monkeypatch.setattr(learnt_store, "refresh", refused, raising=False)


@pytest.mark.parametrize("schedule", ["constant", "auto"])
def test_a_prepared_run_only_runs(pair, tiny_dirs, monkeypatch, schedule):
    """After `prepare`, plain and assisted runs (streamed and bare, the assistant in int8,
    prompt lookup too) build, time, render and read nothing."""
    model_pair = fresh_copy(pair)
    lookup = fresh_copy(load(tiny_dirs, assistant=None, drafter=DrafterKind.PROMPT_LOOKUP))
    drafts = [
        (model_pair, dataclasses.replace(DRAFT, schedule=schedule, assistant_quant="int8")),
        (lookup, DraftSettings(prompt_lookup_num_tokens=4, schedule=schedule)),
    ]
    ids = running.encode_prompt(model_pair, PROMPT)
    for each, draft in drafts:
        prepare.prepare(each, draft)
    for each, draft in drafts:
        refuse(monkeypatch, each)
        for mode in ("plain", "assisted"):
            (done,) = [
                e for e in running.run(each, ids, mode, GREEDY, draft) if isinstance(e, RunDone)
            ]
            assert stats.new_tokens(done.record) > 0
        assert running.generate_bare(each, ids, "assisted", GREEDY, draft)[0]


def test_preparing_is_cached_per_process(pair, monkeypatch):
    """A second call in one process returns what the first built; a process forked after it
    (ZeroGPU's worker) prepares again, reusing the copy and the costs it inherited."""
    model_pair = fresh_copy(pair)
    draft = dataclasses.replace(AUTO, assistant_quant="int8")
    first = prepare.prepare(model_pair, draft)
    assert prepare.prepare(model_pair, draft) is first
    assert first.assistant is model_pair.assistant_copies["int8"]
    assert first.assistant_precision == "int8" and first.learnt.verify_s
    monkeypatch.setattr(prepare.os, "getpid", lambda: -1)  # another process
    monkeypatch.setattr(quantize, "quantized_copy", lambda *args: pytest.fail("copied again"))
    monkeypatch.setattr(calibrating, "_time_forwards", lambda *args: pytest.fail("timed again"))
    forked = prepare.prepare(model_pair, draft)
    assert forked is not first and forked.assistant is first.assistant
    assert prepare.prepare(model_pair, draft) is forked


# -- events, stop, errors ---------------------------------------------------------------


def test_events_stream_in_order_with_text(pair):
    events = list(comparison.compare(pair, PROMPT, GREEDY, DRAFT))
    phases = [e.name for e in events if isinstance(e, decoding.Phase)]
    assert phases == ["warmup", "plain", "assisted"]
    for mode in ("plain", "assisted"):
        steps = [e for e in events if isinstance(e, StepEvent) and e.mode == mode]
        done = next(e for e in events if isinstance(e, RunDone) and e.record.mode == mode)
        assert [e.index for e in steps] == list(range(len(done.record.steps)))
        full = pair.tokenizer.decode(done.record.token_ids, skip_special_tokens=True)
        assert done.record.text == full
        # What streamed is the text so far; only a trailing incomplete character (random
        # models emit stray bytes) may be attached to the last step at the end.
        assert full.startswith("".join(e.step.text for e in steps))


def test_stop_ends_the_run_within_one_step_and_keeps_the_output(pair):
    stop = threading.Event()
    ids = running.encode_prompt(pair, PROMPT)
    seen = 0
    record = None
    for event in running.run(pair, ids, "plain", RunSettings(max_new_tokens=200), stop=stop):
        if isinstance(event, StepEvent):
            seen += 1
            if seen == 3:
                stop.set()
        else:
            record = event.record
    assert record.stopped
    assert 3 <= len(record.steps) <= 4
    assert record.text
    # the pair is still usable
    assert records(pair, modes=("plain",))["plain"].steps


def test_stop_before_assisted_skips_it(pair):
    stop = threading.Event()
    done = {}
    for event in comparison.compare(pair, PROMPT, GREEDY, DRAFT, stop=stop):
        if isinstance(event, StepEvent) and event.mode == "plain":
            stop.set()
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    assert done["plain"].stopped and "assisted" not in done


def test_abandoning_a_run_stops_its_worker(pair):
    ids = running.encode_prompt(pair, PROMPT)
    events = running.run(pair, ids, "plain", RunSettings(max_new_tokens=200))
    next(events)
    events.close()  # as when a browser tab closes mid-stream
    assert not [t for t in threading.enumerate() if t.name.startswith("generate-")]


def test_a_failure_inside_generate_surfaces(pair, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("device fell over")

    monkeypatch.setattr(pair.target, "generate", broken)
    ids = running.encode_prompt(pair, PROMPT)
    with pytest.raises(RuntimeError, match="device fell over"):
        list(running.run(pair, ids, "plain", GREEDY))


@pytest.mark.parametrize("prompt", ["", "   \n\t"])
def test_empty_prompt_is_refused(pair, prompt):
    with pytest.raises(SettingsError, match="cumulative threshold"):
        DraftSettings(cumulative_threshold=1.0).validate()
    with pytest.raises(SettingsError, match="empty"):
        list(comparison.compare(pair, prompt, GREEDY, DRAFT))


def test_prompt_longer_than_the_context_is_refused(pair):
    with pytest.raises(SettingsError, match="context"):
        list(comparison.compare(pair, "word " * 400, GREEDY, DRAFT))
    assert records(pair, modes=("plain",))["plain"].steps  # still usable


@pytest.mark.parametrize("max_new_tokens", [0, -3, MAX_NEW_TOKENS_CAP + 1])
def test_max_new_tokens_out_of_range_is_refused(pair, max_new_tokens):
    with pytest.raises(SettingsError, match="max new tokens"):
        list(comparison.compare(pair, PROMPT, RunSettings(max_new_tokens=max_new_tokens), DRAFT))


@pytest.mark.parametrize(
    "draft",
    [
        DraftSettings(num_assistant_tokens=0),
        DraftSettings(schedule="sometimes"),
        DraftSettings(confidence_threshold=1.5),
    ],
)
def test_draft_settings_out_of_range_are_refused(pair, draft):
    with pytest.raises(SettingsError):
        list(comparison.compare(pair, PROMPT, GREEDY, draft))


def test_without_the_chat_template_the_whole_prompt_is_the_users_text(pair):
    """A raw prompt that happens to end as the template does (here with its last token, a
    newline after the assistant's role) is still all the user's: the suffix lookup searches
    it whole, as one segment, and drafts from its end."""
    prepared = prepare.prepare(pair, DRAFT)
    text = running.encode_prompt(pair, "def add(a, b):", chat_template=False)
    ids = [*text, *text, prepared.template_ids[-1]]
    lookup = plan.suffix_lookup(ids, prepared, chat_template=False)
    assert lookup.user_span == (0, len(ids))
    # In the template, the same ids would share their last token with it.
    assert plan.suffix_lookup(ids, prepared, chat_template=True).user_span[1] < len(ids)
