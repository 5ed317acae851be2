"""The `auto` policy's bets on the assistant's reads, and its floor, on hand-made costs (no
models): a first draft priced against the tokens left, a catch-up likewise, a run whose
steps with the assistant cost more than plain ones stops drafting from it, and a lookup
match drafted on its prior only where that pays at its estimate."""

from __future__ import annotations

import math

import pytest

from assisted.core.record import HeldBack
from assisted.core.settings import DrafterKind
from assisted.policy.choice import PROBE_AFTER, Choice, DraftPolicy
from assisted.policy.estimates import (
    HISTORY_WEIGHT,
    PRIOR_WEIGHT,
    Acceptance,
    AcceptanceModel,
    CostModel,
    expected_tokens_left,
)

CAP = 8
A, L = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP
ROOM = {A: CAP}
T1 = 0.25  # a 2-core CPU's step of the embedded target, in bf16
PROMPT = 700  # a long passage


def cpu_pair(prefill_s: float = 0.007) -> DraftPolicy:
    """A bf16 CPU's costs: a flat T(k), an int4 assistant at 30 ms a token that reads a
    prompt at 7 ms a token (measured on the embedded pair, before its layers read through
    int8 copies: a dear read), and an assistant the target mostly agrees with."""
    verify_s = {k: T1 + 0.002 * k for k in range(1, CAP + 2)}
    p = DraftPolicy(CAP, verify_s, {A: 0.030, L: 0.0}, A, prefill_s)
    p.acceptance.estimates[A, False, 0] = Acceptance(
        CAP, ([0.8 * HISTORY_WEIGHT] * CAP, [HISTORY_WEIGHT] * CAP)
    )
    return p


def run_steps(
    p: DraftPolicy, tokens_left: int, context: int, released: list | None = None
) -> list[Choice]:
    """The policy's choices through a run of `tokens_left` tokens after `context` tokens of
    prompt, every candidate it drafts accepted. Where the assistant starts or resumes after
    a wait, `released` takes the wait's ledger then: (saved, price, saving a token)."""
    choices = []
    while tokens_left > 0:
        choice = p.choose(ROOM, tokens_left=tokens_left, context=context)
        if released is not None and choice.source == A and p.ledger.reason is not None:
            released.append((p.ledger.saved_s, p.ledger.price_s, p.ledger.saving_s))
        p.observe(choice.gamma, choice.gamma)
        choices.append(choice)
        tokens_left -= choice.gamma + 1
        context += choice.gamma + 1
    return choices


def test_a_long_prompt_with_few_tokens_left_drafts_nothing_from_the_assistant():
    # Reading 700 tokens costs 4.9 s; 18 tokens at best save about 2 s.
    choices = run_steps(cpu_pair(), tokens_left=18, context=PROMPT)
    assert all(choice.source is None for choice in choices)
    assert {choice.held_back for choice in choices} == {HeldBack.FIRST_DRAFT}


def first_paying_step(p: DraftPolicy, tokens_left: int, context: int) -> int:
    """The first step of a run of plain steps at which the assistant's first read repays
    itself over the tokens the run can expect yet (the rule of `choice`'s note), each
    step's read of the context grown by the token before it."""
    saving_s, loss_s, _ = p._first_read_value(CAP, p.rate(None, 0))
    step = 0
    while step < tokens_left:
        expected = expected_tokens_left(step, tokens_left - step, p.answers)
        if expected * saving_s - loss_s > p.costs.read_s(context + step):
            return step
        step += 1
    raise AssertionError("the read never pays")


def test_the_same_prompt_with_more_tokens_left_drafts_once_its_read_can_pay():
    # 256 tokens: at the start the run expects 45 of them, too few to repay 4.9 s; an
    # answer that has run on is expected to run on longer.
    choices = run_steps(cpu_pair(), tokens_left=256, context=PROMPT)
    first = next(i for i, choice in enumerate(choices) if choice.source == A)
    assert choices[first].prefill and choices[first].held_back is None
    # Before it, plain steps, each held back by the one rule: the read could not pay yet;
    # the answer, running on, is expected to run on longer, until it can.
    assert first > 0
    assert {choice.held_back for choice in choices[:first]} == {HeldBack.FIRST_DRAFT}
    assert first == first_paying_step(cpu_pair(), tokens_left=256, context=PROMPT)
    assert sum(choice.source == A for choice in choices[first:]) > 0.9 * len(choices[first:])
    # With twice the budget the same read pays at once.
    assert run_steps(cpu_pair(), tokens_left=512, context=PROMPT)[0].prefill


def test_a_short_prompt_drafts_at_once():
    choices = run_steps(cpu_pair(), tokens_left=18, context=20)
    assert choices[0].source == A and choices[0].prefill and choices[0].held_back is None


def test_a_catch_up_the_tokens_left_cannot_repay_keeps_the_assistant_off():
    p = cpu_pair()
    p.started = True
    p.choice = Choice(A, 4)
    p.context = PROMPT
    p.observe(4, 4)  # the assistant has read the prompt and its draft
    for _ in range(60):  # then 60 steps it skipped: 60 tokens to read again, 0.42 s
        p.choice = Choice(None, 0)
        p.observe(0, 0)
    context = PROMPT + 5 + 60
    assert p.choose(ROOM, tokens_left=2, context=context).held_back == HeldBack.CATCH_UP
    resumed = p.choose(ROOM, tokens_left=200, context=context)
    assert resumed.source == A and resumed.catch_up and resumed.held_back is None


FLOOR_STEPS = PRIOR_WEIGHT + 1  # the steps the floor needs before it judges


def behind_plain(p: DraftPolicy, steps: int, slower: float) -> None:
    """`steps` steps of the assistant, each costing `slower` times a plain step per token
    committed."""
    for _ in range(steps):
        p.choice = Choice(A, 4)
        p.observe(4, 1)  # two tokens committed
        p.observe_step_s(2 * T1 * slower, 2)


def test_a_run_whose_assistant_steps_cost_more_than_plain_stops_drafting_from_it():
    p = cpu_pair(prefill_s=0.0)
    behind_plain(p, FLOOR_STEPS, slower=1.5)
    # The acceptance it learnt still says draft; the floor holds it back.
    choice = p.choose(ROOM, tokens_left=200, context=PROMPT)
    assert choice.source is None and choice.held_back == HeldBack.FLOOR


def test_the_floor_waits_for_evidence_and_a_step_of_noise_holds_about_a_step():
    p = cpu_pair(prefill_s=0.0)
    behind_plain(p, FLOOR_STEPS - 1, slower=2.0)  # too few steps to tell
    assert p.choose(ROOM, tokens_left=200, context=PROMPT).source == A
    # Steps a step's noise behind plain meet the floor, and its wait is priced at that
    # noise: a step held, at most.
    p = cpu_pair(prefill_s=0.0)
    behind_plain(p, 10, slower=1.05)
    held = 0
    while p.choose(ROOM, tokens_left=200, context=PROMPT).held_back == HeldBack.FLOOR:
        p.observe(0, 0)
        held += 1
        assert held < 10, "a floor of noise held the assistant back"
    assert held == 1  # met (no margin: a margin would let 5% slower steps run on), and short


def test_the_floor_turns_when_the_assistants_probes_pay_again():
    p = cpu_pair(prefill_s=0.0)
    behind_plain(p, FLOOR_STEPS, slower=1.5)
    probes = 0
    for _ in range(10 * PROBE_AFTER):
        choice = p.choose(ROOM, tokens_left=500, context=PROMPT)
        if choice.source == A and choice.held_back is None:
            if not p.floor.behind(T1):
                break
            probes += 1
        p.observe(choice.gamma, choice.gamma)  # every candidate accepted now
        p.observe_step_s(T1 * 1.2 if choice.source == A else T1, choice.gamma + 1)
    else:
        pytest.fail("the floor never turned")
    assert probes >= 1  # it drafted again only as an idle probe until the evidence turned


def test_a_first_drafts_read_is_left_out_of_the_floor():
    p = cpu_pair()
    choice = p.choose(ROOM, tokens_left=18, context=20)
    assert choice.prefill
    p.observe(choice.gamma, choice.gamma)
    p.costs.observe_call(0.0)
    p.observe_draft(choice, choice.gamma, 0.030 * choice.gamma + 0.14)  # 0.14 s to read 20
    p.observe_step_s(0.030 * choice.gamma + 0.14 + T1, choice.gamma + 1)
    assert p.floor.latest[-1] == (pytest.approx(0.030 * choice.gamma + T1), choice.gamma + 1)


def test_the_read_time_is_the_median_of_the_runs_reads_and_its_prior():
    costs = CostModel(CAP, {k: T1 for k in range(1, CAP + 2)}, {A: 0.03}, A, prefill_s=0.007)
    assert costs.observe_draft(1, 0.03 + 256 * 0.011, prefilled=256) == pytest.approx(256 * 0.011)
    assert costs.prefill_s == pytest.approx(0.007)  # one read against the prior's two
    assert costs.measured_read_s() == pytest.approx(0.011)  # ... but it is what the run kept
    fresh = CostModel(CAP, {k: T1 for k in range(1, CAP + 2)}, {A: 0.03}, A)
    fresh.observe_draft(1, 0.03 + 64 * 0.006, prefilled=64)  # no prior: its own time stands
    assert fresh.prefill_s == pytest.approx(0.006)


def test_the_tokens_a_run_can_expect_grow_with_how_far_its_answer_has_run_up_to_the_budget():
    # A log-uniform prior between one token and the budget (`expected_tokens_left`).
    assert expected_tokens_left(0, 64) == pytest.approx((63 - math.log(64)) / math.log(64))
    along = [expected_tokens_left(c, 64 - c) for c in range(64)]
    peak = max(along)
    assert 14 < along[0] < peak < 20  # 14 at the start, at most about 19
    assert along.index(peak) < 20 and along[-1] < 1  # then less, as the budget nears
    assert all(e <= 64 - c for c, e in enumerate(along))
    assert expected_tokens_left(0, 512) > 4 * along[0]  # a longer budget expects more


def test_a_read_is_weighed_against_the_tokens_the_run_can_expect_not_its_whole_budget():
    # 64 tokens left would repay a 4.2 s read at 0.145 s a token; the 14 to 19 a run can
    # expect of a 64-token budget cannot: the assistant waits, and starts only once the
    # time it would have saved over the tokens that went by reaches the read's price.
    p = cpu_pair(prefill_s=0.006)
    released: list = []
    choices = run_steps(p, tokens_left=64, context=PROMPT, released=released)
    assert_read_after_a_bounded_wait(choices, released)


def assert_read_after_a_bounded_wait(choices: list[Choice], released: list) -> None:
    """The first read was not made at once: the assistant sat out, held back by the first
    read's rule, until the savings it would have made reached the read's price, and not a
    step longer (ski rental: `assisted.policy.choice`)."""
    first = next((i for i, choice in enumerate(choices) if choice.prefill), len(choices))
    assert first > 0
    assert {choice.held_back for choice in choices[:first]} == {HeldBack.FIRST_DRAFT}
    if first < len(choices):
        saved_s, price_s, saving_s = released[0]
        assert price_s <= saved_s < price_s + saving_s  # a plain step commits one token
    else:  # the run ended first: the wait never reached its price
        assert not released


def test_the_bet_on_a_first_read_does_not_depend_on_what_earlier_prompts_taught():
    # A passage's question after code prompts whose drafts the target kept (the pair's
    # history: every candidate accepted) is priced as it would be alone.
    alone = cpu_pair(prefill_s=0.005)
    after = cpu_pair(prefill_s=0.005)
    history = ([100.0] * CAP, [100.0] * CAP)
    after.acceptance.estimates[A, False, 0] = Acceptance(CAP, history)

    # The same steps, held back or started alike (the floors that end a draft follow each
    # run's own estimates, as its choice of γ does after the read).
    def bets(p: DraftPolicy) -> list[tuple]:
        return [(c.source, c.prefill, c.held_back) for c in run_steps(p, 64, context=PROMPT)]

    assert bets(after) == bets(alone)


def test_an_assistant_no_better_at_the_prior_is_not_started_by_other_prompts_estimates():
    # Over the prior's acceptances, drafting can hardly save anything against plain steps
    # here; an estimate that earlier prompts seeded (every candidate accepted) must not
    # start it all the same.
    p = cpu_pair(prefill_s=0.0001)
    p.costs.drafter_s[A] = 0.2  # nearly a target step a drafted token
    unseen = cpu_pair(prefill_s=0.0001)
    unseen.costs.drafter_s[A] = 0.2
    unseen.acceptance.estimates.clear()
    assert unseen.choose(ROOM, tokens_left=64, context=PROMPT).held_back == HeldBack.FIRST_DRAFT
    p.acceptance.estimates[A, False, 0] = Acceptance(CAP, ([100.0] * CAP, [100.0] * CAP))
    assert p.best(A, CAP, optimistic=True)[1] > p.rate(None, 0)  # the seeded estimate would
    choice = p.choose(ROOM, tokens_left=64, context=PROMPT)
    assert choice.source is None and choice.held_back == HeldBack.FIRST_DRAFT


def steep_cpu_pair() -> DraftPolicy:
    """An fp32 CPU without bf16 kernels (the AVX2 imitation, measured on the embedded pair):
    verifying 2 rows costs 1.8 plain steps and 9 rows 3, an int8 assistant drafts at 40 ms
    a token and reads a prompt at 1.5 ms a token."""
    verify_s = {1: 0.283, 2: 0.499, 3: 0.503, 4: 0.540, 5: 0.567}
    verify_s |= {6: 0.649, 7: 0.636, 8: 0.778, 9: 0.842}
    return DraftPolicy(CAP, verify_s, {A: 0.040, L: 0.0}, A, prefill_s=0.0015)


def optimistic_saving_s(p: DraftPolicy) -> float:
    """The seconds a token that drafting from an assistant not yet seen saves against plain
    steps at the prior's optimistic acceptance: the bet the choice makes on it."""
    unseen = Acceptance(CAP)
    optimistic = max(
        unseen.expected_tokens(g, optimistic=True) / p.cost_s(A, g) for g in range(1, CAP + 1)
    )
    return 1 / p.rate(None, 0) - 1 / optimistic


def test_where_verifying_is_steep_a_passage_is_not_read_on_an_optimistic_bet():
    # At the prior's optimistic acceptance alone, the 19 tokens a 64-token run can expect
    # at most would repay the 0.87 s read of a 581-token passage; but the assistant pays
    # at only a third of the prior's acceptances, and its first step costs twice a plain
    # one where it does not, so the read is not made.
    p = steep_cpu_pair()
    assert 19 * optimistic_saving_s(p) > p.costs.read_s(581)
    released: list = []
    assert_read_after_a_bounded_wait(run_steps(p, 64, context=581, released=released), released)
    # The same costs start it on a short prompt, whose read is cheap.
    assert any(choice.prefill for choice in run_steps(steep_cpu_pair(), 64, context=40)[:3])


def less_steep_cpu_pair() -> DraftPolicy:
    """The AVX2 imitation on an AMD EPYC (measured on the embedded pair, a 660-token
    passage): verifying is less steep than on the Intel Xeon (`steep_cpu_pair`), 2 rows
    cost 1.25 plain steps and 9 rows 2.7; an int8 assistant drafts at 33 ms a token and
    reads a prompt at 2 ms a token."""
    verify_s = {1: 0.383, 2: 0.478, 3: 0.598, 4: 0.651, 5: 0.750}
    verify_s |= {6: 0.798, 7: 0.878, 8: 0.961, 9: 1.043}
    return DraftPolicy(CAP, verify_s, {A: 0.0326, L: 0.0}, A, prefill_s=0.002)


def test_a_first_read_is_weighed_at_what_each_acceptance_saves_not_at_the_optimistic_bet():
    # The assistant pays at 13 of the prior's 20 acceptances here (from α = 0.35), and at
    # most of those it saves far less than at the prior's optimistic acceptance: 19 tokens
    # at that saving, 13 times in 20, would repay the 1.2 s read of a 600-token passage;
    # what each acceptance saves where it pays does not, so the read is not made.
    p = less_steep_cpu_pair()
    assert 19 * optimistic_saving_s(p) * 13 / 20 > p.costs.read_s(600)
    released: list = []
    assert_read_after_a_bounded_wait(run_steps(p, 64, context=600, released=released), released)
    # The same costs start it on a prompt of 100 tokens, whose read is cheap.
    assert any(choice.prefill for choice in run_steps(less_steep_cpu_pair(), 64, 100)[:3])


def test_a_lookup_match_on_its_prior_is_drafted_only_where_it_pays_at_its_estimate():
    # Where verifying is flat, four candidates at the prior beat a plain step at their
    # estimate, so the match is drafted.
    offers = {L: 4}
    assert cpu_pair().choose(offers, tokens_left=64, context=600, match_length=2).source == L
    # Where it is steep they break even at best: a match's candidates are scored whether
    # drafted or not, so the policy waits for that evidence instead of paying for it.
    p = steep_cpu_pair()
    assert p.choose(offers, tokens_left=64, context=600, match_length=2).source is None
    p.observe(0, 0)
    for _ in range(2):  # it would have kept the whole draft
        p.observe_unverified(L, 4, agreed=4, committed=5)
    assert p.choose(offers, tokens_left=64, context=600, match_length=2).source == L


def test_a_match_of_a_length_new_to_the_run_is_drafted_at_what_its_other_matches_kept():
    # Matches of 2 tokens on the prior pay at their estimate here: drafted, each kept nothing.
    p = less_steep_cpu_pair()
    for _ in range(3):
        choice = p.choose({L: 4}, tokens_left=64, context=600, match_length=2)
        assert choice.source == L
        p.observe(choice.gamma, 0)
    # A match of 3 tokens, new to the run, is weighed as those were: not drafted.
    assert p.choose({L: 4}, tokens_left=64, context=600, match_length=3).source is None
    # On a fresh run, the same match is drafted on the prior.
    fresh = less_steep_cpu_pair()
    assert fresh.choose({L: 4}, tokens_left=64, context=600, match_length=3).source == L


def test_a_runs_first_match_is_drafted_as_on_a_fresh_run_whatever_earlier_matches_kept():
    # Earlier prompts' matches that kept every candidate (a runbook copied whole) would have
    # the next passage's first match drafted long; it is drafted as on the pair's first run.
    kept = {(L, False, length): ([100.0] * CAP, [100.0] * CAP) for length in (2, 3, 4)}
    after = less_steep_cpu_pair()
    after.acceptance = AcceptanceModel(CAP, [A, L], kept)
    first = less_steep_cpu_pair().choose({L: CAP}, tokens_left=64, context=600, match_length=3)
    assert after.choose({L: CAP}, tokens_left=64, context=600, match_length=3) == first
    assert first.gamma <= 3  # the lengths that pay at its estimate on the prior
