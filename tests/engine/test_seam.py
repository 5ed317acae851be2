"""The `auto` schedule's seam into `generate()` (`assisted.engine.drafters.seam`): it drives
each step's draft, zero candidates make a plain step, and switching between sources and
lengths within one `generate()` stays lossless."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.candidate_generator import (
    AssistedCandidateGenerator,
)

from assisted.core.settings import DrafterKind
from assisted.engine.drafters import seam
from assisted.engine.drafters.static_draft import LeanDrafter, StaticDrafter
from assisted.engine.engine import encode_prompt
from tests.engine.runs import PROMPT, load
from tests.scripted import Scripted


def generate_with(pair, policy, prompt=PROMPT, lean=True, **kwargs):
    """Greedy ids of one generate() under `policy`, and the rows of each target pass."""
    rows = []
    hook = pair.target.register_forward_pre_hook(
        lambda module, args, kw: rows.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    ids = torch.tensor([encode_prompt(pair, prompt)])
    try:
        with seam.drafting_policy(pair.target, policy, lean=lean):
            out = pair.target.generate(ids, max_new_tokens=16, do_sample=False, **kwargs)
    finally:
        hook.remove()
    return out[0, ids.shape[1] :].tolist(), rows[1:]  # rows[0] is the prompt's prefill


def plain_ids(pair, prompt=PROMPT):
    ids = torch.tensor([encode_prompt(pair, prompt)])
    out = pair.target.generate(ids, max_new_tokens=16, do_sample=False)
    return out[0, ids.shape[1] :].tolist()


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
    lookup, assistant = seam.LOOKUP, seam.ASSISTANT
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

            def recording(self, input_ids, gamma, ids=None, floors=(), draft=kind.draft):
                drafted = draft(self, input_ids, gamma, ids, floors)
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
