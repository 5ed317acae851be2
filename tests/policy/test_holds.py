"""The `auto` policy's holds as bounded waits (`assisted.policy.choice`), on hand-made costs:
over random machines, learnt histories, answer records, prompts and budgets, no hold lasts
a step past the point where what the assistant would have saved reached the hold's price,
and so the time a hold can lose against hindsight stays within that price."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from assisted.core.record import HeldBack
from assisted.core.settings import DrafterKind
from assisted.policy.choice import DraftPolicy, Floor, Ledger
from assisted.policy.estimates import HISTORY_WEIGHT, PRIOR_WEIGHT, WINDOW, Answer

CAP = 8
A, L = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP


def random_policy(rng: random.Random) -> tuple[DraftPolicy, float]:
    """A policy on a random machine (flat to steep verification, cheap to dear drafting and
    reads), from a random learnt history and answer record; and the acceptance the target
    will really give the assistant's candidates."""
    t1 = rng.uniform(0.01, 0.5)
    slope = t1 * rng.choice([0.005, 0.05, 0.3])
    verify_s = {k: t1 + slope * (k - 1) for k in range(1, CAP + 2)}
    draft_s = t1 * rng.uniform(0.02, 0.8)
    prefill_s = t1 * rng.uniform(0.0005, 0.08)
    kept = rng.random()
    history = {(A, False, 0): ([kept * HISTORY_WEIGHT] * CAP, [HISTORY_WEIGHT] * CAP)}
    answers = [Answer(rng.randint(1, 512), rng.random() < 0.5) for _ in range(rng.randint(0, 32))]
    policy = DraftPolicy(CAP, verify_s, {A: draft_s, L: 0.0}, A, prefill_s, history, answers)
    return policy, rng.random()


def test_a_wait_ends_once_the_savings_reach_its_price_and_a_new_reason_waits_anew():
    ledger = Ledger()
    assert ledger.holds(HeldBack.FIRST_DRAFT, price_s=1.0, saving_s=0.1)
    ledger.held(5)  # 0.5 s saved
    assert ledger.holds(HeldBack.FIRST_DRAFT, price_s=1.0, saving_s=0.1)
    ledger.held(5)  # 1.0 s: the price
    assert not ledger.holds(HeldBack.FIRST_DRAFT, price_s=1.0, saving_s=0.1)
    assert ledger.holds(HeldBack.CATCH_UP, price_s=0.2, saving_s=0.1)  # saved from 0 again
    ledger.holds(HeldBack.CATCH_UP, price_s=0.2, saving_s=-1.0)
    ledger.held(10)
    assert ledger.saved_s == 0  # a saving below nothing saves nothing


def run_random(seed: int, reasons: Counter) -> None:
    """One run of a random policy (`random_policy`), checking at every step it holds the
    assistant back that the wait has not reached its price; `reasons` counts the held steps
    by reason, and "released" the waits that ended with the assistant drafting."""
    rng = random.Random(seed)
    p, alpha = random_policy(rng)
    context, tokens_left = rng.randint(8, 3000), rng.randint(8, 512)
    slow = rng.choice([1.0, 1.0, 3.0])  # the assistant's steps as priced, or far slower
    lookups = rng.choice([0.0, 0.5])
    if rng.random() < 1 / 3:  # met mid-run: the assistant drafted, then skipped steps
        p.started, p.behind = True, True
        p.seen = max(context - rng.randint(1, 400), 1)
    waiting, stretch = False, False
    while tokens_left > 0:
        # Lookup matches now and then, or in stretches (text the prompt repeats), which the
        # target mostly keeps: the assistant then skips steps, and must catch up on their
        # tokens.
        stretch = stretch != (rng.random() < 0.1)
        match = CAP if stretch or rng.random() < lookups else 0
        offers = {A: max(tokens_left - 1, 1), L: min(match, max(tokens_left - 1, 0))}
        choice = p.choose(offers, tokens_left, context, match_length=4)
        if choice.held_back is not None:
            reasons[choice.held_back] += 1
            # Held only while the wait's savings are short of its price: a step held
            # commits one token more, so the wait loses at most the price and one token's
            # saving against an assistant that drafted all along.
            assert p.ledger.saved_s < p.ledger.price_s
        reasons["released"] += waiting and choice.source == A
        waiting = choice.held_back is not None
        accepted = 0
        while accepted < choice.gamma and rng.random() < alpha:
            accepted += 1
        if choice.source == L:
            accepted = min(choice.gamma, rng.choice([choice.gamma, 2]))
        p.observe(choice.gamma, accepted)
        if choice.source == A:
            p.observe_step_s(slow * p.expected.expected_s, accepted + 1)
        tokens_left -= accepted + 1
        context += accepted + 1


def test_no_hold_outlasts_its_price_whatever_the_run_was_taught():
    reasons: Counter = Counter()
    for seed in range(300):
        run_random(seed, reasons)
    # The runs met every kind of hold, and waits that ended.
    assert all(
        reasons[reason]
        for reason in (*HeldBack.__members__.values(), "released")
        if reason != HeldBack.WAITING
    ), reasons


def test_a_first_read_that_cannot_pay_at_once_is_made_once_the_wait_reaches_its_price():
    # A dear read (700 tokens at 20 ms) after answers that all ended at 4 tokens: the run
    # expects too few tokens to repay it, all along; but this answer runs on, and the
    # steps the assistant sits out add up what it would have saved: it starts at the step
    # that total reaches the read's price, not later (where the answer record alone would
    # hold it the whole run).
    verify_s = {k: 0.25 + 0.002 * k for k in range(1, CAP + 2)}
    short = [Answer(4, ended=True)] * 32
    p = DraftPolicy(CAP, verify_s, {A: 0.030, L: 0.0}, A, prefill_s=0.02, answers=short)
    context, tokens_left, saved = 700, 256, []
    while True:
        choice = p.choose({A: CAP}, tokens_left, context)
        saved.append((p.ledger.saved_s, p.ledger.price_s))
        if choice.source == A:
            assert p.ledger.reason == HeldBack.FIRST_DRAFT  # the wait ended it, not the bet
            break
        assert choice.held_back == HeldBack.FIRST_DRAFT
        p.observe(0, 0)
        tokens_left, context = tokens_left - 1, context + 1
        assert tokens_left > 0, "the wait outlasted the answer"
    assert len(saved) > 1  # it waited ...
    assert saved[-1][0] >= saved[-1][1]  # ... until the savings reached the price,
    assert all(s < price for s, price in saved[:-1])  # ... and not a step longer


def test_the_floor_is_a_wait_too_priced_at_what_a_step_at_its_pace_loses():
    verify_s = {k: 0.25 for k in range(1, CAP + 2)}
    p = DraftPolicy(CAP, verify_s, {A: 0.010, L: 0.0}, A, prefill_s=0.0)
    p.started = True
    for _ in range(PRIOR_WEIGHT + 1):  # steps at twice a plain step's time per token
        p.choice = p._choice(A, 4)
        p.observe(4, 1)
        p.observe_step_s(2 * 0.25 * 2, 2)
    assert p.floor.behind(0.25)
    first = p.choose({A: CAP}, 200, 100)
    assert first.held_back == HeldBack.FLOOR
    assert p.ledger.price_s == pytest.approx(p.steps(A, CAP)[-1][0] * 0.25, rel=0.2)
    steps = 1
    while p.choose({A: CAP}, 200, 100).held_back == HeldBack.FLOOR:
        p.observe(0, 0)
        steps += 1
        assert steps < 200, "the floor held past its price"
    assert p.ledger.saved_s >= p.ledger.price_s


def test_the_floor_measures_what_its_steps_lose_per_token():
    floor = Floor()
    floor.observe(1.0, 2)
    assert floor.excess_s(0.25) == pytest.approx(0.25)
    assert Floor().excess_s(0.25) == 0.0


def test_the_floor_forgets_steps_past_its_window():
    """A neighbour that slowed the assistant's first steps and left: a window of steps
    after it clears the floor."""
    floor = Floor()
    for _ in range(WINDOW):
        floor.observe(2.0, 2)  # a token a second, plain's 0.25 s
    assert floor.behind(0.25)
    for _ in range(WINDOW):
        floor.observe(0.3, 3)
    assert not floor.behind(0.25) and floor.excess_s(0.25) == 0.0


def test_the_policys_floors_rise_with_what_drafting_and_a_row_cost():
    flat = {k: 0.25 for k in range(1, CAP + 2)}
    cheap = DraftPolicy(CAP, flat, {A: 0.005, L: 0.0}, A)
    dear = DraftPolicy(CAP, flat, {A: 0.060, L: 0.0}, A)
    steep = DraftPolicy(CAP, {k: 0.25 * k for k in range(1, CAP + 2)}, {A: 0.005, L: 0.0}, A)
    assert max(cheap.floors(CAP)) < min(dear.floors(CAP))
    assert max(cheap.floors(CAP)) < min(steep.floors(CAP))
    assert len(cheap.floors(CAP)) == CAP - 1 and cheap.floors(1) == ()
