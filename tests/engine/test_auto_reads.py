"""The first-draft rule in real `auto` runs on a tiny pair: where the assistant's read of the
prompt cannot pay, the run drafts nothing from it, says why at every step and in its JSON,
and commits exactly what plain decoding does."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from assisted import bench
from assisted.analysis import stats
from assisted.core.record import HeldBack, RunRecord, Step
from assisted.core.settings import DrafterKind, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import custom_pair, load_pair
from assisted.policy.choice import Floor
from assisted.policy.learnt import LearntState
from assisted.ui.compare.format import summary_markdown
from tests.engine.runs import AUTO, PROMPT, priced

SETTINGS = RunSettings(max_new_tokens=16)


@pytest.fixture
def pair(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    loaded = load_pair(spec, device="cpu", dtype="float32")
    return dataclasses.replace(loaded, learnt=LearntState(), learnt_file=None)


def run(pair, mode: str) -> RunRecord:
    ids = encode_prompt(pair, PROMPT)
    events = decoding.run(pair, ids, mode, SETTINGS, AUTO)
    (done,) = [event for event in events if isinstance(event, RunDone)]
    return done.record


def test_a_read_that_cannot_pay_keeps_the_assistant_off_and_says_so(pair):
    priced(pair, prefill_s=100.0)  # seconds a token: no run of 16 tokens repays it
    plain, assisted = run(pair, "plain"), run(pair, "assisted")
    assert assisted.token_ids == plain.token_ids
    assert all(step.source != "assistant" for step in assisted.steps)
    # Every step but the last, where the length limit leaves the assistant no room.
    *held, last = assisted.steps
    assert {step.held_back for step in held} == {HeldBack.FIRST_DRAFT} and last.held_back is None
    summary = stats.summarize(assisted)
    assert (summary["first_draft"], summary["first_draft_reason"]) == ("declined", "first-draft")
    assert summary["held_back"] == {"first-draft": len(held)}
    assert [row["held_back"] for row in summary["per_step"]] == ["first-draft"] * len(held) + [None]
    assert RunRecord.from_dict(assisted.to_dict()) == assisted
    said = stats.describe(summary)
    assert said == f"The assistant never drafted: {HeldBack.FIRST_DRAFT.words}."
    result = decoding.report(pair, plain, assisted)
    assert f"**Policy:** {said}" in summary_markdown(result)


def test_a_read_that_pays_at_once_starts_the_assistant_at_the_first_step(pair, trusted_prices):
    # Reads and drafts all but free: the tiny assistant is the target's size, so only its
    # price makes it worth drafting from.
    priced(pair, prefill_s=0.0, draft_s=1e-7, verify_s=1e-3)
    assisted = run(pair, "assisted")
    assert assisted.steps[0].source == "assistant" and assisted.steps[0].held_back is None
    summary = stats.summarize(assisted)
    assert (summary["first_draft"], summary["first_draft_reason"]) == ("at once", None)
    # Later steps may hold it back for other reasons (its first draft taught the policy
    # what its reads really cost); never for the first-draft rule.
    assert not {"first-draft", "waiting"} & set(summary["held_back"])
    assert "never drafted" not in (stats.describe(summary) or "")


def held_back_run(reasons: list[HeldBack | None], drafted_at: int | None) -> RunRecord:
    """An `auto` run of plain steps held back for `reasons`, the assistant drafting one
    candidate at step `drafted_at` (None: never)."""
    steps = []
    for index, reason in enumerate(reasons):
        drafts = index == drafted_at
        steps.append(
            Step(
                token_ids=(index + 1, index + 2) if drafts else (index + 1,),
                text="",
                drafted=int(drafts),
                accepted=int(drafts),
                t_s=0.1 * (index + 1),
                draft_ids=(index + 1,) if drafts else (),
                chosen=int(drafts),
                source=DrafterKind.ASSISTANT if drafts else None,
                expected_tokens=1.0,
                expected_s=0.1,
                plain_step_s=0.1,
                held_back=reason,
            )
        )
    return RunRecord("assisted", DrafterKind.ASSISTANT, 700, steps, total_s=0.1 * len(steps))


def test_the_benchmark_says_per_prompt_where_the_first_draft_rule_declined_or_waited():
    first, waiting = HeldBack.FIRST_DRAFT, HeldBack.WAITING
    declined = held_back_run([first] * 4, drafted_at=None)
    waited = held_back_run([first, first, None, None], drafted_at=2)
    # A record written before the wait rule was folded into the first-draft rule.
    older = held_back_run([waiting, waiting, None, None], drafted_at=2)
    at_once = held_back_run([None] * 4, drafted_at=0)
    plain = RunRecord("plain", None, 700, [Step((1,), "", 0, 0, 0.1)] * 4, total_s=0.4)
    runs = [bench.Run("long", "passages", None, i, plain) for i in range(3)]
    runs += [bench.Run("long", "passages", "assistant", i, declined) for i in range(2)]
    runs += [bench.Run("long", "passages", "assistant", 2, at_once)]
    runs += [bench.Run("code", "coding", None, 0, plain)]
    runs += [bench.Run("code", "coding", "assistant", 0, waited)]
    runs += [bench.Run("chat", "chat", None, 0, plain)]
    runs += [bench.Run("chat", "chat", "assistant", 0, at_once)]
    variants = [bench.Variant("assistant", "assistant", AUTO)]
    info = {"pair": "hand-made", "device": "cpu", "dtype": "float32"}
    result = bench.report(runs, variants, info, RunSettings(), repeats=3)
    long, code, chat = result["prompts"]
    assert (long["first_draft"], long["first_draft_reason"], long["first_draft_runs"]) == (
        "declined",
        "first-draft",
        2,
    )
    assert (code["first_draft"], code["first_draft_reason"]) == ("waited", "first-draft")
    assert stats.first_draft(older) == (stats.WAITED, waiting)
    said = stats.describe(stats.summarize(older))
    assert said.startswith("The assistant started after 2 steps waiting")
    assert (chat["first_draft"], chat["first_draft_reason"]) == ("at once", None)
    card = bench.render(result)
    assert f"long (assistant): declined in 2 of 3 runs: {first.words}" in card
    assert "code (assistant): started late in 1 of 1 runs" in card
    assert "chat (assistant)" not in card


def test_the_floor_weighs_each_assistant_step_by_the_tokens_that_step_committed(
    tiny_dirs, monkeypatch, trusted_prices
):
    # The target drafting for itself: every candidate is accepted, so each step commits
    # γ + 1 tokens, and the last, which the length limit shortens, fewer than the one
    # before it. Transformers streams a step's tokens before it reports what the step
    # accepted: the floor must weigh the step's own tokens, not its predecessor's.
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["target"]))
    self_pair = dataclasses.replace(
        load_pair(spec, device="cpu", dtype="float32"), learnt=LearntState(), learnt_file=None
    )
    priced(self_pair, prefill_s=0.0, draft_s=1e-7, verify_s=1e-3)
    weighed = []
    observe = Floor.observe

    def spy(floor: Floor, seconds: float, tokens: int) -> None:
        weighed.append(tokens)
        observe(floor, seconds, tokens)

    monkeypatch.setattr(Floor, "observe", spy)
    ids = encode_prompt(self_pair, PROMPT)
    events = decoding.run(self_pair, ids, "assisted", RunSettings(max_new_tokens=18), AUTO)
    (done,) = [event for event in events if isinstance(event, RunDone)]
    steps = done.record.steps
    # The first step is left out: it holds the target's read of the prompt.
    drafted = [len(step.token_ids) for step in steps[1:] if step.source == "assistant"]
    before = [len(a.token_ids) for a, b in itertools.pairwise(steps) if b.source == "assistant"]
    assert drafted != before  # else the two could not be told apart
    assert weighed == drafted
