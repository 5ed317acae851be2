"""The oracle priced by the costs the run's steps measured (`assisted.analysis.oracle`),
beside the one priced by the policy's cost model, and flagged where they differ."""

from __future__ import annotations

from dataclasses import replace

import pytest

from assisted.analysis import oracle
from assisted.core.record import Hindsight, RunRecord, Step
from assisted.core.settings import DrafterKind

A = DrafterKind.ASSISTANT
CAP = 4
FLAT = {k: 0.20 + 0.01 * (k - 1) for k in range(1, CAP + 2)}  # what the machine charges
HUMP = FLAT | {k: 3 * FLAT[k] for k in range(2, CAP + 1)}  # what a disturbed policy believed
DRAFT_S = 0.02  # a drafted token
READ_S = 0.005  # a token of context read
PROMPT = 40


def timed_steps(drafts: list[int], accepted: list[int]) -> list[Step]:
    """Steps whose wall times are what `FLAT` and the drafting charge; the first the target's
    read of the prompt and the assistant's of the context."""
    steps, t_s, position = [], 0.0, 0
    for i, (gamma, kept) in enumerate(zip(drafts, accepted, strict=True)):
        draft_s = DRAFT_S * gamma + (READ_S * (PROMPT + position) if i == 1 else 0.0)
        t_s += FLAT[gamma + 1] + (draft_s if gamma else 0.0) + (1.0 if i == 0 else 0.0)
        ids = tuple(range(position, position + kept + 1))
        source = A if gamma else None
        steps.append(
            Step(ids, "", gamma, kept, t_s, ids[:kept], draft_s=draft_s or None, source=source)
        )
        position += kept + 1
    return steps


def runs() -> tuple[RunRecord, RunRecord]:
    plain = RunRecord(mode="plain", drafter=None, prompt_tokens=PROMPT)
    plain.steps = timed_steps([0] * 20, [0] * 20)
    plain.total_s = plain.steps[-1].t_s
    assisted = RunRecord(mode="assisted", drafter=A, prompt_tokens=PROMPT)
    assisted.steps = timed_steps([0, 4, 4, 4, 4], [0, 4, 4, 4, 4])[:5]
    assisted.total_s = assisted.steps[-1].t_s
    n = len(assisted.token_ids)
    assisted.hindsight = Hindsight(
        assistant_runs=tuple(range(n, 0, -1)),
        lookup_drafts=((),) * n,
        verify_s=tuple(sorted(HUMP.items())),
        cap=CAP,
        drafting_s=4 * DRAFT_S,  # drafting believed 4x dearer too
        prefill_s=3 * READ_S,
    )
    return plain, assisted


def test_the_steps_price_each_cost_as_the_machine_charged_it():
    plain, assisted = runs()
    h = oracle.priced(assisted.hindsight, [plain, assisted])
    curve = dict(h.verify_s)
    assert (curve[1], curve[CAP + 1]) == pytest.approx((FLAT[1], FLAT[CAP + 1]))  # measured
    # The rows no step verified: the policy's hump, cut down to the larger row's cost.
    assert all(FLAT[k] <= curve[k] <= FLAT[CAP + 1] for k in range(2, CAP + 1))
    assert h.drafting_s == pytest.approx(DRAFT_S)
    assert h.prefill_s == pytest.approx(READ_S)


def test_a_policy_priced_oracle_far_from_the_measured_one_is_flagged():
    plain, assisted = runs()
    found = oracle.report(plain, assisted)
    by_policy = found["policy_priced"]
    assert found["speedup_modelled"] > 1.3 * by_policy["speedup_modelled"]
    assert found["prices_differ"] is True
    assert found["measured_rows"] == [1, CAP + 1]
    assert "did not pay" in oracle.describe(found)
    # Priced as it paid, nothing is flagged.
    assisted.hindsight = oracle.priced(assisted.hindsight, [plain, assisted])
    assert oracle.report(plain, assisted)["prices_differ"] is False


def test_a_lanes_rows_are_pooled_with_the_other_lanes_steps():
    plain, assisted = runs()
    other = RunRecord(mode="assisted", drafter=A, prompt_tokens=PROMPT)
    other.steps = timed_steps([0, 1, 2, 3], [0, 1, 2, 3])
    found = oracle.report(plain, assisted, pooled=[other, assisted])
    assert found["measured_rows"] == [1, 2, 3, 4, 5]


def test_a_row_the_lane_verified_is_priced_from_its_own_steps_not_the_pool():
    # Another lane's steps at 5 rows ran twice as slow (its machinery, or a busier round):
    # the lane's own 5-row steps price its T(5), the pool only the rows it never verified.
    plain, assisted = runs()
    slow = RunRecord(mode="assisted", drafter=A, prompt_tokens=PROMPT)
    slow.steps = timed_steps([0, 4, 4, 1], [0, 4, 4, 1])
    for i, s in enumerate(slow.steps):
        slow.steps[i] = Step(s.token_ids, "", s.drafted, s.accepted, 2 * s.t_s, draft_s=s.draft_s)
    h = oracle.priced(assisted.hindsight, [plain, assisted], pooled=[slow])
    curve = dict(h.verify_s)
    assert curve[CAP + 1] == pytest.approx(FLAT[CAP + 1])
    assert curve[2] > FLAT[2]  # from the slow lane: no own step verified 2 rows


def slowed(run: RunRecord, factor: float) -> RunRecord:
    """`run` as if the machine had run it `factor` times slower throughout."""
    slow = RunRecord(mode=run.mode, drafter=run.drafter, prompt_tokens=run.prompt_tokens)
    slow.steps = [replace(s, t_s=factor * s.t_s) for s in run.steps]
    slow.total_s = factor * run.total_s
    slow.hindsight = run.hindsight
    return slow


def plain_steps_first() -> tuple[RunRecord, RunRecord]:
    """`runs()`, the assisted run beginning with five plain steps: it timed T(1) itself
    (three times: its first step holds the prompt's read, and `timed_steps` has its second
    carry the assistant's)."""
    plain, assisted = runs()
    assisted.steps = timed_steps([0, 0, 0, 0, 0, 4, 4], [0, 0, 0, 0, 0, 4, 4])
    assisted.total_s = assisted.steps[-1].t_s
    n = len(assisted.token_ids)
    assisted.hindsight = replace(
        assisted.hindsight, assistant_runs=tuple(range(n, 0, -1)), lookup_drafts=((),) * n
    )
    return plain, assisted


def test_a_row_the_assisted_run_timed_is_priced_from_it_not_from_its_plain_run():
    # The plain run of its round ran twice as slow (a neighbour, a minute apart): the rows
    # the assisted run timed three times or more are priced from its own steps.
    plain, assisted = plain_steps_first()
    h = oracle.priced(assisted.hindsight, [slowed(plain, 2.0), assisted])
    assert dict(h.verify_s)[1] == pytest.approx(FLAT[1])
    # A row it timed once is priced from the plain run, which timed it 19 times; a row only
    # it timed, from its own two steps.
    _, sparse = runs()
    sparse.steps = timed_steps([0, 4, 0, 4], [0, 4, 0, 4])
    rows = oracle.rows_measured([slowed(plain, 2.0), sparse])
    assert len(rows[1]) == 19 and len(rows[CAP + 1]) == 2


def test_the_oracle_shares_the_runs_baseline_so_a_slowed_plain_run_moves_both_alike():
    plain, assisted = plain_steps_first()
    quiet = oracle.report(plain, assisted)
    busy = oracle.report(slowed(plain, 2.0), assisted)
    # The run measured twice the speedup against the slowed plain run; so did its oracle.
    assert busy["oracle_s"] == pytest.approx(quiet["oracle_s"])
    assert busy["speedup_modelled"] == pytest.approx(2 * quiet["speedup_modelled"], rel=1e-3)
    assert busy["measured_share"] == pytest.approx(quiet["measured_share"], rel=1e-3)
    # Priced by the run's own steps, the oracle is at or above what the run measured.
    assert busy["measured_share"] <= 1.0
    assert busy["measured_share"] == pytest.approx(busy["oracle_s"] / assisted.total_s, rel=1e-3)
