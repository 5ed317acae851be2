"""The `auto` policy's calibration (`assisted.engine.engine`): what it times, again
when disturbed, once per pair; what runs refine and keep of it."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from assisted.core.settings import (
    WARMUP_TOKENS,
    RunSettings,
)
from assisted.engine import decoding, engine
from assisted.engine.drafters import seam
from assisted.engine.engine import encode_prompt
from assisted.models import learnt_store
from assisted.models.learnt_store import LearntFile
from assisted.policy import estimates
from assisted.policy.learnt import LearntState
from tests.engine.runs import AUTO, GREEDY, PROMPT, fresh_copy, priced, records


def prefix(pair):
    return torch.tensor([encode_prompt(pair, PROMPT)])


def test_calibration_times_one_and_two_rows_and_cap_plus_one_and_interpolates(pair, monkeypatch):
    fresh = dataclasses.replace(pair, learnt=LearntState())
    timed = []

    def fake(model, prefix, rows, device):
        timed.append(rows)
        return {k: 0.01 * k for k in rows}

    monkeypatch.setattr(engine, "_time_forwards", fake)
    verify_s, drafter_s, prefill_s = engine.calibrate(
        fresh, prefix(pair), pair.assistant, "none", 4
    )
    # The target's two ends and its second row, where the kernels change; the assistant's
    # one row and its block of prefill rows.
    assert timed == [[1, 2, 5], [1, engine._PREFILL_ROWS]]
    assert verify_s == pytest.approx({k: 0.01 * k for k in range(1, 6)})
    assert drafter_s == 0.01 and prefill_s == pytest.approx(0.01)


def test_a_disturbed_calibration_is_timed_again(pair, monkeypatch):
    fresh = dataclasses.replace(pair, learnt=LearntState())
    # 5 rows at 50× one: disturbed
    timings = iter([{1: 0.01, 2: 0.015, 5: 0.5}, {1: 0.02, 2: 0.025, 5: 0.03}])
    monkeypatch.setattr(engine, "_time_forwards", lambda m, p, rows, d: next(timings))
    verify_s, _, _ = engine.calibrate(fresh, prefix(pair), None, "none", 4)
    assert verify_s[1] == 0.01 and verify_s[5] == 0.03  # the fastest of the two attempts


def test_a_runs_verifications_refine_the_pairs_calibration(pair, trusted_prices):
    # Nothing kept on disk: a save merges in the rows other tests' runs kept in the file.
    fresh = fresh_copy(pair)
    # Transformers' lookup offers a match at every step (the chat template's included), so
    # the run verifies rows of several lengths whatever the random models do.
    draft = dataclasses.replace(AUTO, lookup="transformers")
    engine.calibrate(fresh, prefix(pair), pair.assistant, "none", AUTO.num_assistant_tokens)
    timed = dict(fresh.learnt.verify_s)
    # The tiny pair's two models are of one size, so whether the assistant's first read
    # pays would rest on this machine's timings (an AVX512 one never started it): an
    # assistant that drafts and reads for nearly nothing starts on any machine.
    assert set(timed) == {1, 2, 5}
    # The comparison's warm-up keeps the rows it verified too: run it first, so that what
    # the timed run keeps is told apart from it.
    decoding.warm_up(fresh, ("assisted",), draft)
    priced(fresh, prefill_s=0.0, draft_s=1e-7, draft=draft)
    # The first read is bet at the prior's acceptances: rows the tiny target verified on a
    # busy moment, far dearer than one, would make no acceptance pay. Level the rows timed.
    level = min(fresh.learnt.verify_s.values())
    fresh.learnt.verify_s.update(dict.fromkeys(fresh.learnt.verify_s, level))
    before = dict(fresh.learnt.verify_s)
    counts = dict(fresh.learnt.verify_timed)
    assisted = records(fresh, draft=draft)["assisted"]
    verified = {step.drafted + 1 for step in assisted.steps[1:]}  # the first is the prefill
    refined = fresh.learnt.verify_s
    # Only rows measured, by the calibration or the runs: never a row fitted between them.
    assert set(refined) == set(before) | verified
    assert all(fresh.learnt.verify_timed[k][0] > counts.get(k, (0, 0))[0] for k in verified)
    # Estimates by source, streak and match bucket: the assistant's, without a streak, first.
    kept = set(fresh.learnt.precision("none").acceptance)
    assert (seam.ASSISTANT, False, 0) in kept
    assert {source for source, _, _ in kept} <= {seam.ASSISTANT, seam.LOOKUP}


def test_a_plain_runs_steps_set_the_pairs_t1_and_keep_it(pair, tmp_path, monkeypatch):
    # Plain steps are T(1)'s only direct timings, and an `auto` run seldom takes one.
    slow = {k: 100.0 for k in range(1, 6)}  # far slower than any pass of the tiny target
    file = LearntFile(tmp_path / "p.json", {"pair": "p"})
    fresh = dataclasses.replace(pair, learnt=LearntState(verify_s=dict(slow)), learnt_file=file)
    ids = encode_prompt(fresh, PROMPT)
    passes = []
    keep = estimates.PlainSteps.observe_verify
    monkeypatch.setattr(
        estimates.PlainSteps,
        "observe_verify",
        lambda self, rows, seconds: passes.append(seconds) or keep(self, rows, seconds),
    )
    list(decoding.run(fresh, ids, "plain", GREEDY))
    # Every step after the prompt's prefill, timed; their median is T(1), and only T(1).
    assert len(passes) == GREEDY.max_new_tokens - 1
    assert fresh.learnt.verify_s == {**slow, 1: pytest.approx(sorted(passes)[len(passes) // 2])}
    assert learnt_store.load(file).verify_s == pytest.approx(fresh.learnt.verify_s)
    # A stopped run's few passes set nothing, nor a warm-up's; nor does a pair nothing has
    # calibrated.
    assert WARMUP_TOKENS <= estimates.WINDOW
    fresh.learnt.verify_s[1] = slow[1]
    list(decoding.run(fresh, ids, "plain", RunSettings(max_new_tokens=estimates.WINDOW)))
    assert fresh.learnt.verify_s[1] == slow[1]
    bare = fresh_copy(pair)
    list(decoding.run(bare, ids, "plain", GREEDY))
    assert bare.learnt.verify_s == {}


def test_calibration_is_timed_once_per_pair(pair, monkeypatch):
    engine.calibrate(pair, prefix(pair), pair.assistant, "none", 4)
    timed = []
    monkeypatch.setattr(engine, "_time_forwards", lambda *args: timed.append(args) or {})
    verify_s, drafter_s, prefill_s = engine.calibrate(pair, prefix(pair), pair.assistant, "none", 4)
    assert timed == [] and sorted(verify_s) == [1, 2, 3, 4, 5] and drafter_s > 0 < prefill_s
