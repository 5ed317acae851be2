"""The `auto` drafting policy on hand-made cost and acceptance figures (no models)."""

from __future__ import annotations

import copy

import pytest

from assisted.core.record import HeldBack
from assisted.core.settings import DrafterKind
from assisted.policy.choice import PROBE_AFTER, Choice, DraftPolicy, Expectation
from assisted.policy.estimates import (
    HISTORY_WEIGHT,
    Acceptance,
    AcceptanceModel,
    DraftEnds,
    expected_tokens_left,
)
from lab.policy_bookkeeping import measure_bookkeeping_s

CAP = 8
A, L = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP
ROOM = {A: CAP}  # the assistant can draft up to the cap; no lookup match
FAR = {"tokens_left": 1000, "context": 50}  # a long budget and a short prompt


def policy(verify_s: dict[int, float], drafter_s: float = 0.001, prefill_s: float = 0.0):
    return DraftPolicy(CAP, verify_s, {A: drafter_s, L: 0.0}, A, prefill_s)


def drafts(choice: Choice) -> tuple[DrafterKind | None, int]:
    """What a choice drafts: its source and γ."""
    return choice.source, choice.gamma


def flat() -> dict[int, float]:
    """A GPU-like target: verifying 9 rows costs hardly more than 1."""
    return {k: 0.020 + 0.0001 * k for k in range(1, CAP + 2)}


def steep() -> dict[int, float]:
    """A CPU-like target: each row costs about as much as a whole step."""
    return {k: 0.020 * k for k in range(1, CAP + 2)}


def teach(p: DraftPolicy, accepted: int, source: DrafterKind = A, steps: int = 50) -> None:
    for _ in range(steps):
        p.choice = Choice(source, CAP)
        p.observe(CAP, accepted)


def test_flat_verification_and_high_acceptance_draft_long():
    p = policy(flat())
    teach(p, accepted=CAP)
    assert drafts(p.choose(ROOM, **FAR)) == (A, CAP)


def test_steep_verification_drafts_nothing():
    p = policy(steep(), drafter_s=0.002)
    teach(p, accepted=CAP // 2)
    assert p.choose(ROOM, **FAR).gamma == 0


def test_low_acceptance_drafts_nothing():
    p = policy(flat(), drafter_s=0.004)
    teach(p, accepted=0)
    assert p.choose(ROOM, **FAR).gamma == 0


def test_a_middling_acceptance_drafts_a_middling_length():
    p = policy({k: 0.020 + 0.002 * k for k in range(1, CAP + 2)}, drafter_s=0.002)
    teach(p, accepted=3)  # every step accepts 3 and rejects the 4th
    assert 1 <= p.choose(ROOM, **FAR).gamma <= 4


def test_zero_steps_are_followed_by_a_probe():
    p = policy(flat(), drafter_s=0.004)
    teach(p, accepted=0)
    choices = [p.choose(ROOM, **FAR).gamma for _ in range(PROBE_AFTER + 1)]
    assert choices == [0] * PROBE_AFTER + [1]
    assert p.choose(ROOM, **FAR).gamma == 0  # the probe found nothing new: plain steps again


def test_a_free_lookup_match_beats_a_costly_assistant():
    p = policy({k: 0.020 + 0.005 * k for k in range(1, CAP + 2)}, drafter_s=0.010)
    teach(p, accepted=CAP, source=A)
    teach(p, accepted=CAP, source=L)
    assert p.choose({A: CAP, L: 3}, **FAR).source == L
    assert p.choose({A: CAP}, **FAR).source != L  # no match: no lookup


def test_the_assistant_beats_a_lookup_match_the_target_rejects():
    p = policy(flat())
    teach(p, accepted=0, source=L)
    teach(p, accepted=CAP, source=A)
    assert drafts(p.choose({A: CAP, L: CAP}, **FAR)) == (A, CAP)


def test_offers_bound_the_draft_length():
    p = policy(flat(), drafter_s=0.0)
    teach(p, accepted=CAP, source=L)
    assert p.choose({L: 2}, **FAR) == Choice(L, 2)
    assert p.choose({A: 0, L: 0}, **FAR) == Choice(None, 0)


def test_a_prefill_the_tokens_left_cannot_repay_keeps_the_assistant_off():
    # 700 tokens of context at 2 ms each cost 1.4 s; the bet prices the assistant at the
    # prior (the run has no evidence of its own yet), whatever its estimates say.
    p = policy(flat(), drafter_s=0.002, prefill_s=0.002)
    p.acceptance.estimates[A, False, 0] = Acceptance(
        CAP, ([HISTORY_WEIGHT] * CAP, [HISTORY_WEIGHT] * CAP)
    )
    assert p.choose(ROOM, tokens_left=17, context=700).source is None
    # With a long budget it starts once the answer has run long enough that the tokens it
    # can expect yet repay the read, each plain step before held back by that one rule.
    held = []
    while (choice := p.choose(ROOM, tokens_left=1000 - len(held), context=700)).source is None:
        held.append(choice.held_back)
        p.observe(0, 0)
    assert choice.prefill and choice.gamma > 1 and choice.held_back is None
    assert set(held) == {HeldBack.FIRST_DRAFT} and len(held) < 50
    saving_s, loss_s, _ = p._first_read_value(CAP, p.rate(None, 0))
    for committed, expected in ((len(held) - 1, False), (len(held), True)):
        tokens = expected_tokens_left(committed, 1000 - committed)
        assert (tokens * saving_s - loss_s > 0.002 * 700) is expected


def test_a_short_prompt_starts_the_assistant_at_once():
    p = policy(flat(), drafter_s=0.002, prefill_s=0.0001)
    assert p.choose(ROOM, tokens_left=64, context=30).prefill


def test_catch_up_weighs_on_the_assistant_after_a_step_without_it():
    p = policy(flat())
    p.costs.catch_up_s = 1.0
    assert p.cost_s(A, 2) < 1.0  # not started: nothing to catch up on
    p.choice = Choice(A, 2)
    p.observe(2, 2)
    assert p.cost_s(A, 2) < 1.0
    p.choice = Choice(L, 2)
    p.observe(2, 2)
    assert p.cost_s(A, 2) > 1.0 and p.cost_s(L, 2) < 1.0 and p.cost_s(None, 0) < 1.0
    assert p.choose({A: CAP, L: 2}, **FAR) == Choice(L, 2)  # the lookup, with no catch-up


def test_acceptance_counts_stop_at_the_first_rejection():
    p = policy(flat())
    p.choice = Choice(A, 5)
    p.observe(drafted=5, accepted=2)
    assert p.acceptance.estimates[A, False, 0].tried == [1, 1, 1, 0, 0, 0, 0, 0]
    assert p.acceptance.estimates[A, False, 0].accepted == [1, 1, 0, 0, 0, 0, 0, 0]
    p.choice = Choice(None, 0)
    p.observe(drafted=0, accepted=0)  # a plain step says nothing about drafts
    assert (
        sum(p.acceptance.estimates[A, False, 0].tried) == 3
        and sum(p.acceptance.current(L).tried) == 0
    )


def test_expected_tokens_count_the_targets_own_token():
    fresh = Acceptance(CAP)
    assert fresh.expected_tokens(0) == 1.0
    assert fresh.expected_tokens(2) == pytest.approx(1 + 0.5 + 0.25)  # the Beta(1, 1) prior


def test_a_runs_history_counts_for_a_few_observations_only():
    seen = Acceptance(CAP, ([90.0] * CAP, [100.0] * CAP))
    assert seen.tried[0] == pytest.approx(HISTORY_WEIGHT)
    assert seen.accepted[0] / seen.tried[0] == pytest.approx(0.9)
    p = DraftPolicy(CAP, flat(), {A: 0.001}, A, history={(A, False, 0): seen.counts()})
    assert p.acceptance.expected_tokens(A, 1) > 1.7
    assert Acceptance(CAP, ([0.0] * CAP, [0.0] * CAP)).tried == [0.0] * CAP


def test_a_run_starts_from_the_assistants_history_but_never_from_a_lookups():
    seen = ([9.0] * CAP, [10.0] * CAP)
    history = {(A, False, 0): seen, (L, False, 2): seen, (L, True, 4): seen}
    p = DraftPolicy(CAP, flat(), {A: 0.001, L: 0.0}, A, history=history)
    assert p.acceptance.expected_tokens(A, 2) > 1 + 0.5 + 0.25
    p.acceptance.offer(L, 2)
    assert p.acceptance.expected_tokens(L, 2) == pytest.approx(1 + 0.5 + 0.25)  # the prior
    # Nor is what this run's matches kept left for the next run.
    p.observe_unverified(L, drafted=4, agreed=4, committed=5)
    assert set(p.acceptance.counts()) == {(A, False, 0)}


def test_timings_refine_the_cost_model():
    p = policy(flat())
    costs = p.costs
    before = costs.verify_s[3]
    costs.observe_verify(3, 1.0)
    assert costs.verify_s[3] == pytest.approx(before)  # one slow pass against the prior's two
    costs.observe_verify(3, 1.0)
    assert costs.verify_s[3] == pytest.approx((before + 1.0) / 2)
    # The target's passes ran 1.0 / before its prior twice: the assistant's prior follows.
    assert costs.level == pytest.approx((1.0 + 1.0 / before) / 2)
    for _ in range(2):
        p.observe_draft(Choice(A, 4), 4, 4.0)
    assert costs.drafter_s[A] == pytest.approx((0.001 * costs.level + 1.0) / 2)
    p.observe_draft(Choice(A, 4, catch_up=True), 4, 10.0)
    assert costs.catch_up_s > 0  # no prior: its first timing stands
    p.choose(ROOM, tokens_left=1000, context=100)
    p.observe_draft(Choice(A, 1, prefill=True), 1, 5.0)
    assert costs.prefill_s == pytest.approx((5.0 - costs.drafter_s[A]) / 100)
    assert costs.verify_curve()[0][0] == 1 and len(costs.verify_curve()) == CAP + 1


def test_the_runs_own_timings_overrule_any_prior_within_three_steps():
    costs = policy(flat()).costs
    for _ in range(3):
        costs.observe_verify(5, 0.5)
    assert costs.verify_s[5] == pytest.approx(0.5)
    assert costs.measured_verify() == {5: (0.5, 3)}  # only the row timed is kept


def test_rows_never_verified_follow_the_level_of_those_verified():
    # A slow patch of the machine, seen through verifications of 2 to 9 rows only (an
    # `auto` run rarely takes a plain step): T(1) must not stay where it was.
    costs = policy(flat()).costs
    start = dict(costs.verify_s)
    for step in range(80):
        rows = 2 + step % CAP
        costs.observe_verify(rows, 1.5 * start[rows])
    assert [costs.verify_s[k] / start[k] for k in start] == pytest.approx(
        [1.5] * len(start), rel=0.05
    )
    assert policy(flat()).costs.measured_verify() == {}  # none timed: none to keep


def test_a_hump_in_the_prior_is_cut_down_to_the_larger_rows_cost():
    # A learnt file written while a test job shared the cores (shared/fixtures): T(3)…T(8)
    # two to four times T(9). Verifying more rows never costs less.
    hump = {1: 0.187, 2: 0.180, 3: 0.45, 4: 0.47, 5: 0.50, 6: 0.59, 7: 0.52, 8: 0.74, 9: 0.205}
    costs = policy(hump).costs
    assert all(costs.verify_s[k] <= 0.205 for k in range(1, CAP + 2))
    assert costs.verify_s[2] == pytest.approx(0.180)


def test_a_cheap_prior_row_never_cuts_a_row_the_run_measured():
    # The prior's T(9) timed on a quiet moment, the cores busy since: the run pays 0.56 s
    # a one-row pass and never verifies 9 rows. It must price T(1) as it pays it, and the
    # rows it never verified at the level it pays, not at the quiet prior's.
    quiet = {k: 0.2 for k in range(1, CAP + 2)}
    costs = policy(quiet).costs
    for _ in range(12):
        costs.observe_verify(1, 0.56)
        costs.observe_verify(4, 0.58)
    assert costs.verify_s[1] == pytest.approx(0.56)
    assert costs.verify_s[4] == pytest.approx(0.58)
    assert all(costs.verify_s[k] >= 0.58 for k in range(4, CAP + 2))
    # A larger row measured cheaper still cuts a smaller one: both are evidence.
    for _ in range(12):
        costs.observe_verify(6, 0.50)
    assert costs.verify_s[4] == pytest.approx(0.50)


def test_a_machine_slowed_as_a_whole_decides_as_a_quiet_one():
    # Priors timed on a quiet moment; a neighbour since slows every pass 2.5x. Until the
    # run times the assistant, its read and drafting follow the target's level: its first
    # read weighs against the tokens it would save as on the quiet machine, not 2.5x cheaper.
    def run(slowdown: float) -> list:
        p = policy(flat(), drafter_s=0.004, prefill_s=0.0005)
        choices = []
        for step in range(6):
            choice = p.choose(ROOM, tokens_left=24 - step, context=90 + step)
            choices.append((choice.gamma, choice.held_back))
            p.observe(0, 0)
            p.costs.observe_verify(1, slowdown * flat()[1])
        return choices, p.costs.read_s(90) / (90 * p.costs.prefill.value())

    quiet, quiet_level = run(1.0)
    busy, busy_level = run(2.5)
    assert busy == quiet
    assert quiet_level == pytest.approx(1.0) and busy_level == pytest.approx(2.5)
    assert any(held is not None for _, held in quiet)  # the read weighed at all


def test_one_slow_pass_moves_no_row():
    costs = policy(flat()).costs
    for _ in range(6):
        costs.observe_verify(4, flat()[4])
    costs.observe_verify(4, 10.0)  # another job took the core for one pass
    assert costs.verify_s[4] == pytest.approx(flat()[4])


def test_only_the_assistants_drafts_refine_the_costs():
    p = policy(flat())
    p.costs.observe_call(0.5)
    before = copy.deepcopy(vars(p.costs))
    p.observe_draft(Choice(L, 4), 4, 9.0)  # prompt lookup runs no forward passes to time
    p.observe_draft(Choice(A, 4), 0, 9.0)  # the assistant drafted nothing
    assert vars(p.costs) == before


def test_missing_verification_times_are_refused():
    with pytest.raises(ValueError, match="rows"):
        DraftPolicy(CAP, {1: 0.01}, {L: 0.0})


def test_the_bookkeeping_measure_runs_the_policy_through_its_steps():
    """Its speed target is `python -m lab.policy_bookkeeping`'s (a timing, not a test)."""
    seconds = measure_bookkeeping_s(CAP, steps=50)
    assert 0 < seconds < 1


def test_a_match_not_chosen_is_scored_against_what_the_step_committed():
    p = policy(flat())
    p.choice = Choice(A, 3)
    p.observe_unverified(L, drafted=5, agreed=1, committed=3)  # rejected at its 2nd token
    assert p.acceptance.estimates[L, False, 0].tried[:3] == [1, 1, 0]
    assert p.acceptance.estimates[L, False, 0].accepted[:3] == [1, 0, 0]
    p.observe_unverified(L, drafted=5, agreed=3, committed=3)  # agreed as far as it can tell
    assert p.acceptance.estimates[L, False, 0].tried[:4] == pytest.approx([1.98, 1.98, 1, 0])
    assert p.acceptance.streak[L]
    p.observe_unverified(A, drafted=5, agreed=5, committed=5)  # the chosen source: verified
    assert sum(p.acceptance.current(A).tried) == 0


def test_a_streak_has_its_own_estimate():
    p = policy(flat())
    for accepted in [0] * 10 + [4] * 10:  # matches that fail, then a passage being copied
        p.choice = Choice(L, 4)
        p.observe(4, accepted)
    assert p.acceptance.streak[L] and p.acceptance.expected_tokens(L, 4) > 4.0
    p.choice = Choice(L, 4)
    p.observe(4, 0)
    assert not p.acceptance.streak[L] and p.acceptance.expected_tokens(L, 4) < 2.0


def test_a_match_of_a_length_new_to_the_run_reads_as_the_runs_other_matches():
    def after(agreed: int) -> AcceptanceModel:
        """A run whose three matches of 2 tokens agreed with `agreed` of their 4."""
        model = AcceptanceModel(CAP, [A, L])
        model.offer(L, 2)
        for _ in range(3):
            model.observe_unverified(L, drafted=4, agreed=agreed, committed=agreed + 1)
        model.offer(L, 3)
        return model

    fresh = AcceptanceModel(CAP, [A, L])
    fresh.offer(L, 2)
    assert fresh.expected_tokens(L, 2) == pytest.approx(1 + 0.5 + 0.25)  # nothing seen yet
    failing = after(agreed=0)
    assert failing.bucket_prior(L) == pytest.approx(1 / 5, abs=0.01)  # 0 of 3 (decayed)
    assert failing.expected_tokens(L, 2) < 1.3
    assert after(agreed=3).expected_tokens(L, 2) > 1 + 0.5 + 0.25
    # A streak keeps an estimate apart, and the assistant, with no match lengths, its 1/2.
    failing.streak[L] = True
    assert failing.bucket_prior(L) == 0.5
    assert failing.expected_tokens(A, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_no_probe_within_a_few_tokens_of_the_end():
    p = policy(flat(), drafter_s=0.004)
    teach(p, accepted=0)
    near_end = {"tokens_left": PROBE_AFTER, "context": 50}
    assert all(p.choose(ROOM, **near_end).gamma == 0 for _ in range(3 * PROBE_AFTER))
    assert p.choose(ROOM, **FAR).gamma == 1  # further from the end, the probe is due


def test_an_assistant_left_unused_drafts_once_at_its_best_length():
    p = policy(flat(), drafter_s=0.004)
    teach(p, accepted=0, source=A)  # it drafted badly
    teach(p, accepted=CAP, source=L)  # and lookup matches are all accepted
    both = {A: CAP, L: CAP}
    choices = [p.choose(both, **FAR) for _ in range(PROBE_AFTER + 1)]
    # Lookup drafts at every step, so no run of γ = 0 steps calls for the other probe.
    assert all(c.source == L and c.gamma > 0 for c in choices[:PROBE_AFTER])
    # The assistant, idle for PROBE_AFTER steps, drafts once after the steps it skipped.
    assert choices[-1] == Choice(A, p.best(A, CAP)[0], catch_up=True)
    assert p.choose(both, **FAR).source == L


def test_each_choice_keeps_what_the_policy_expected_of_it_when_it_chose():
    p = policy(steep(), drafter_s=0.002)
    assert p.expected is None  # nothing chosen yet
    teach(p, accepted=0)
    assert p.choose(ROOM, **FAR) == Choice(None, 0)
    assert p.expected == Expectation(1.0, 0.020, 0.020)  # one token for one plain step
    p = policy(flat())
    teach(p, accepted=CAP)
    choice = p.choose(ROOM, **FAR)
    # Not the optimistic E(γ) it chose with: the estimate it would be judged against.
    tokens = p.acceptance.expected_tokens(A, choice.gamma)
    assert tokens < p.acceptance.expected_tokens(A, choice.gamma, optimistic=True)
    assert p.expected == Expectation(tokens, p.cost_s(A, choice.gamma), flat()[1])
    # Later timings refine the cost model, but not what was expected of the choice made.
    for _ in range(3):
        p.costs.observe_verify(choice.gamma + 1, 1.0)
    assert p.expected.expected_s < p.cost_s(A, choice.gamma)


def test_the_expected_cost_of_a_first_draft_or_a_catch_up_includes_it():
    p = policy(flat(), drafter_s=0.002, prefill_s=0.0001)
    first = p.choose(ROOM, tokens_left=64, context=30)
    assert first.prefill
    assert p.expected.expected_s == pytest.approx(p.costs.cost_s(A, first.gamma) + 0.0001 * 30)
    teach(p, accepted=CAP)
    p.choice = Choice(L, 2)
    p.observe(2, 2)  # a step without the assistant: its cache falls behind
    p.costs.catch_up_s = 0.005
    caught_up = p.choose(ROOM, **FAR)
    assert caught_up.catch_up and not caught_up.prefill
    assert p.expected.expected_s == pytest.approx(p.costs.cost_s(A, caught_up.gamma) + 0.005)


def test_a_draft_timed_by_length_is_priced_and_refined_at_its_own_length():
    """Drafts timed by length (replayed graphs: a short one pays the launch and the read a
    long one pays) are priced at their own time, and a draft that took its own time
    leaves the price as it was; drafts twice as slow move every length alike."""
    per_token = {1: 4e-3, 2: 2.5e-3, 3: 1e-3}  # the longest draft's 1 ms a token
    shape = {gamma: seconds / per_token[3] for gamma, seconds in per_token.items()}
    flat_s = {k: 0.01 for k in range(1, 5)}
    p = DraftPolicy(3, flat_s, {A: 1e-3, L: 0.0}, A, draft_shape=shape)
    assert p.costs.drafting_s(A, 2) == pytest.approx(5e-3)
    assert p.costs.cost_s(A, 2) == pytest.approx(5e-3 + 0.01)
    assert p.costs.drafting_s(L, 2) == 0.0
    p.costs.observe_draft(2, 5e-3)
    assert p.costs.drafter_s[A] == pytest.approx(1e-3)
    for gamma in (1, 2, 3):  # each twice its own time
        p.costs.observe_draft(gamma, 2 * per_token[gamma] * gamma)
    # The median of 1, 2, 2, 2 ms and the prior's two 1 ms: 1.5 ms a token at the longest.
    for gamma in (1, 2, 3):
        assert p.costs.drafting_s(A, gamma) == pytest.approx(1.5 * per_token[gamma] * gamma)


def test_a_draft_that_reached_its_gamma_says_nothing_of_where_drafts_end():
    ends = DraftEnds(CAP)
    for _ in range(20):
        ends.observe(asked=3, drafted=3)  # went on past 1 and 2; past 3, unknown
    assert ends.goes_on() == [1.0] * CAP
    for _ in range(100):
        ends.observe(asked=CAP, drafted=2)  # ended short: went on past 1, not past 2
    goes_on = ends.goes_on()
    assert goes_on[0] == 1.0 and goes_on[1] < 0.1
    assert goes_on[2] == pytest.approx(goes_on[1])  # never reached: like the one before


def test_a_step_is_priced_where_its_draft_can_be_expected_to_end_not_at_its_gamma():
    rising = {k: 0.020 + 0.004 * k for k in range(1, CAP + 2)}  # each row a fifth of a step
    p = policy(rising, drafter_s=0.002)
    for _ in range(50):  # the assistant's drafts end after 2 candidates, both accepted
        p.choice = Choice(A, CAP)
        p.observe(2, 2)
    # Asking for 8 buys the 2 it drafts at about their price, not 8 candidates' rows.
    assert p.rate(A, CAP) == pytest.approx(p.rate(A, 2), rel=0.1)
    assert p.rate(A, CAP) > 1.5 * (3 / p.cost_s(A, CAP))
    p.choose(ROOM, **FAR)
    assert p.cost_s(A, 2) <= p.expected.expected_s < 1.1 * p.cost_s(A, 2)
    assert 2.9 < p.expected.expected_tokens < 3.1  # the two it drafts and the target's own
    # Drafts that run to their γ are priced at it, as before any evidence.
    q = policy(rising, drafter_s=0.002)
    teach(q, accepted=CAP)
    tokens = q.acceptance.expected_tokens(A, CAP)
    assert q.rate(A, CAP) == pytest.approx(tokens / q.cost_s(A, CAP))


def test_the_tokens_a_step_expects_are_those_its_drafts_commit_where_drafts_end_short():
    # The assistant's drafts end where it is unsure, which is where the target disagrees:
    # after a step that kept nothing, half its steps draft 4 candidates, all kept, the
    # other half 1, rejected. Such a step commits 3 tokens on average; taking the chance
    # that a draft goes on apart from the chance that its candidate is kept counts each
    # rejected draft twice (2 tokens).
    p = policy(flat())
    for drafted, accepted in [(1, 0), (1, 0), (4, 4)] * 30 + [(1, 0)]:
        p.choice = Choice(A, CAP)
        p.observe(drafted, accepted)
    p.choose(ROOM, **FAR)
    assert p.expected.expected_tokens == pytest.approx(3.0, abs=0.15)
    assert p.acceptance.current(A).expected_tokens(CAP) == pytest.approx(3.0, abs=0.15)
