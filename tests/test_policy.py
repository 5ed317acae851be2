"""The `auto` drafting policy on hand-made cost and acceptance figures (no models)."""

from __future__ import annotations

import pytest

from assisted.policy import PROBE_AFTER, DraftPolicy, measure_bookkeeping_s

CAP = 8


def policy(verify_s: dict[int, float], drafter_s: float = 0.001, catch_up: bool = True):
    return DraftPolicy(CAP, verify_s, drafter_s, catch_up)


def flat() -> dict[int, float]:
    """A GPU-like target: verifying 9 rows costs hardly more than 1."""
    return {k: 0.020 + 0.0001 * k for k in range(1, CAP + 2)}


def steep() -> dict[int, float]:
    """A CPU-like target: each row costs about as much as a whole step."""
    return {k: 0.020 * k for k in range(1, CAP + 2)}


def teach(p: DraftPolicy, accepted: int, steps: int = 50) -> None:
    for _ in range(steps):
        p.observe(CAP, accepted)


def test_flat_verification_and_high_acceptance_draft_long():
    p = policy(flat())
    teach(p, accepted=CAP)
    assert p.choose() == CAP


def test_steep_verification_drafts_nothing():
    p = policy(steep(), drafter_s=0.002)
    teach(p, accepted=CAP // 2)
    assert p.choose() == 0


def test_low_acceptance_drafts_nothing():
    p = policy(flat(), drafter_s=0.004)
    teach(p, accepted=0)
    assert p.choose() == 0


def test_a_middling_acceptance_drafts_a_middling_length():
    p = policy({k: 0.020 + 0.002 * k for k in range(1, CAP + 2)}, drafter_s=0.002)
    teach(p, accepted=3)  # every step accepts 3 and rejects the 4th
    assert 1 <= p.choose() <= 4


def test_zero_steps_are_followed_by_a_probe():
    p = policy(flat(), drafter_s=0.004)
    teach(p, accepted=0)
    choices = [p.choose() for _ in range(PROBE_AFTER + 1)]
    assert choices == [0] * PROBE_AFTER + [1]
    assert p.choose() == 0  # the probe found nothing new: back to plain steps


def test_acceptance_counts_stop_at_the_first_rejection():
    p = policy(flat())
    p.observe(drafted=5, accepted=2)
    assert p.tried == [1, 1, 1, 0, 0, 0, 0, 0]
    assert p.accepted == [1, 1, 0, 0, 0, 0, 0, 0]
    p.observe(drafted=0, accepted=0)  # a plain step says nothing about drafts
    assert sum(p.tried) == 3


def test_expected_tokens_count_the_targets_own_token():
    p = policy(flat())
    assert p.expected_tokens(0) == 1.0
    assert p.expected_tokens(2) == pytest.approx(1 + 0.5 + 0.25)  # the Beta(1, 1) prior


def test_timings_refine_the_cost_model():
    p = policy(flat())
    before = p.verify_s[3]
    p.observe_verify(3, 1.0)
    assert before < p.verify_s[3] < 1.0
    p.observe_draft(4, 4.0, after_zero=False)
    assert 0.001 < p.drafter_s < 1.0
    p.observe_draft(4, 10.0, after_zero=True)
    assert p.catch_up_s > 0
    assert p.verify_curve()[0][0] == 1 and len(p.verify_curve()) == CAP + 1


def test_catch_up_cost_only_weighs_on_drafting_after_a_zero_step():
    p = policy(flat())
    p.catch_up_s = 1.0
    assert p.cost_s(2) < 1.0
    p.zero_steps = 1
    assert p.cost_s(2) > 1.0 and p.cost_s(0) < 1.0
    lookup = policy(flat(), drafter_s=0.0, catch_up=False)
    lookup.catch_up_s, lookup.zero_steps = 1.0, 1
    assert lookup.cost_s(2) < 1.0


def test_missing_verification_times_are_refused():
    with pytest.raises(ValueError, match="rows"):
        DraftPolicy(CAP, {1: 0.01}, 0.0, False)


def test_bookkeeping_costs_under_one_percent_of_a_ten_ms_step():
    assert measure_bookkeeping_s(CAP, steps=500) < 0.01 * 0.010
