"""Preparing versus running: after `prepare`, runs build, time, render and read nothing;
preparing is cached per process (`assisted.engine.engine`)."""

from __future__ import annotations

import dataclasses
import gc
import weakref

import pytest

from assisted.analysis import stats
from assisted.core.settings import (
    DrafterKind,
    DraftSettings,
)
from assisted.engine import decoding, engine
from assisted.engine.decoding import RunDone
from assisted.engine.engine import Engine, encode_prompt
from assisted.models import learnt_store, quantize
from assisted.models.pairs import LoadedPair
from tests.engine.runs import AUTO, DRAFT, GREEDY, PROMPT, fresh_copy, load


def refuse(monkeypatch, pair):
    """Make every piece of preparation raise: building a drafting copy, resolving the
    precision, learning, rendering the chat template, reading the learnt state."""

    def refused(*args, **kwargs):
        raise AssertionError("a run prepared")

    monkeypatch.setattr(Engine, "_prepare", refused)
    monkeypatch.setattr(LoadedPair, "drafting_assistant", refused)
    monkeypatch.setattr(LoadedPair, "drafting_precision", refused)
    monkeypatch.setattr(quantize, "quantized_copy", refused)
    monkeypatch.setattr(engine, "calibrate", refused)
    monkeypatch.setattr(engine, "_time_forwards", refused)
    monkeypatch.setattr(engine, "never_drafted", refused)
    monkeypatch.setattr(engine, "template_ids", refused)
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
    ids = encode_prompt(model_pair, PROMPT)
    for each, draft in drafts:
        Engine.of(each).prepare(draft)
    for each, draft in drafts:
        refuse(monkeypatch, each)
        for mode in ("plain", "assisted"):
            (done,) = [
                e for e in decoding.run(each, ids, mode, GREEDY, draft) if isinstance(e, RunDone)
            ]
            assert stats.new_tokens(done.record) > 0
        assert decoding.run_bare(each, ids, "assisted", GREEDY, draft)[0]


def test_a_run_handed_a_preparation_for_another_draft_refuses_it(pair):
    """A caller that prepared once hands its preparation to each run (a benchmark's lane);
    one made for another draft would run that draft's assistant under this one's name."""
    model_pair = fresh_copy(pair)
    ids = encode_prompt(model_pair, PROMPT)
    int8 = Engine.of(model_pair).prepare(dataclasses.replace(DRAFT, assistant_quant="int8"))
    with pytest.raises(ValueError, match="another draft"):
        list(decoding.run(model_pair, ids, "assisted", GREEDY, DRAFT, prepared=int8))
    (done,) = [
        e
        for e in decoding.run(model_pair, ids, "assisted", GREEDY, int8.draft, prepared=int8)
        if isinstance(e, RunDone)
    ]
    assert stats.new_tokens(done.record) > 0


def test_preparing_is_cached_per_process(pair, monkeypatch):
    """A second call in one process returns what the first built; a process forked after it
    (ZeroGPU's worker) prepares again, reusing the copy and the costs it inherited."""
    model_pair = fresh_copy(pair)
    draft = dataclasses.replace(AUTO, assistant_quant="int8")
    first = Engine.of(model_pair).prepare(draft)
    assert Engine.of(model_pair).prepare(draft) is first
    assert first.assistant is model_pair.assistant_copies["int8"]
    assert first.assistant_precision == "int8" and first.learnt.verify_s
    monkeypatch.setattr(engine.os, "getpid", lambda: -1)  # another process
    monkeypatch.setattr(quantize, "quantized_copy", lambda *args: pytest.fail("copied again"))
    monkeypatch.setattr(engine, "_time_forwards", lambda *args: pytest.fail("timed again"))
    forked = Engine.of(model_pair).prepare(draft)
    assert forked is not first and forked.assistant is first.assistant
    assert Engine.of(model_pair).prepare(draft) is forked


def test_only_a_greedy_auto_preparation_captures_graphs(pair, monkeypatch):
    """Sampled runs draft through Transformers' sampling generator and never replay the
    assistant's graphs: preparing for one captures none, and a greedy run prepared after it
    on the same draft settings captures them then (here on a CPU, whose assistant stands
    for a CUDA one with no graphs yet)."""
    model_pair = fresh_copy(pair)
    captures = []
    monkeypatch.setattr(engine.draft_graphs, "pending", lambda model, cap: True)
    monkeypatch.setattr(
        engine.draft_graphs, "capture", lambda model, cap, probe: captures.append(cap)
    )
    sampled = dataclasses.replace(GREEDY, sample=True)
    first = Engine.of(model_pair).prepare(AUTO, sampled)
    assert captures == []
    assert Engine.of(model_pair).prepare(AUTO, GREEDY) is first  # one preparation, now greedy
    assert captures == [AUTO.num_assistant_tokens]
    Engine.of(model_pair).prepare(AUTO)  # no settings: a greedy run's (the lab's timings)
    assert len(captures) == 2
    Engine.of(model_pair).prepare(DRAFT, GREEDY)  # the constant schedule drafts eagerly
    assert len(captures) == 2


def test_each_pair_has_one_engine_its_copies_their_own_and_it_goes_with_its_pair(pair):
    """One `Engine` a pair object, kept on the pair (no registry beside it): a drafter
    variant (`dataclasses.replace`, sharing the models) prepares on an engine of its own,
    and an engine is freed with its pair."""
    engine = Engine.of(pair)
    assert Engine.of(pair) is engine and engine.pair is pair
    variant = dataclasses.replace(pair)
    assert Engine.of(variant) is not engine and Engine.of(variant).pair is variant
    gone = weakref.ref(Engine.of(variant))
    del variant
    gc.collect()
    assert gone() is None
    assert Engine.of(pair) is engine
