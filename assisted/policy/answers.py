"""How long an answer can be expected to run on: the `auto` policy weighs every read the
assistant must make (its first read of the prompt, a catch-up) against the tokens left to
repay it, and nobody knows in advance where an answer ends; the run's budget (max new
tokens) is only an upper bound.

The expectation mixes two things:
- a scale-free prior (`scale_free_tokens_left`): answer lengths log-uniform between one
  token and the budget, so an answer is as likely to run 2 to 4 tokens as 20 to 40, and
  the longer one has run, the longer it is expected to run on;
- the pair's own record of answers (`Answer`, kept in `assisted.policy.learnt`): of the
  latest answers that ran past the tokens committed so far, the tokens each ran on beyond
  them, up to the budget. An answer its budget cut ran at least that long: past its cut
  it is extended by the prior. The prior counts as `PRIOR_WEIGHT` answers; the record keeps
  the latest `assisted.policy.costs.WINDOW`.

A 32-token budget expects 9.6 tokens from the prior alone; a pair whose answers ran to
their budget expects the whole budget after a few runs. A prompt unlike the pair's earlier
ones is still weighed partly by them: the bounded probes (`assisted.policy.choice`) are
what correct a bet that was wrong for this prompt.

No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from assisted.policy.acceptance import PRIOR_WEIGHT


class Answer(NamedTuple):
    """One answer of the pair: `tokens` committed, and whether it `ended` (EOS) or its
    budget cut it."""

    tokens: int
    ended: bool


def scale_free_tokens_left(committed: int, tokens_left: int) -> float:
    """The tokens a run that has committed `committed` and may commit `tokens_left` more can
    expect to commit yet, under the scale-free prior alone (the module's note). With
    P(L > x) = ln(B / x) / ln(B) for a budget B and c tokens committed,
    E[min(L, B) − c | L > c] = (B − c − c·ln(B / c)) / ln(B / c). A 64-token budget expects
    14 tokens at the start and at most 19 at any point."""
    budget = committed + tokens_left
    done = max(committed, 1)  # the step under way commits a token whatever happens
    if done >= budget:
        return float(max(tokens_left, 0))
    span = math.log(budget / done)
    return (budget - done - done * span) / span


def expected_tokens_left(committed: int, tokens_left: int, answers: Sequence[Answer] = ()) -> float:
    """The tokens a run that has committed `committed` and may commit `tokens_left` more can
    expect to commit yet: the scale-free prior and the pair's `answers` that ran past
    `committed` (the module's note)."""
    budget = committed + tokens_left
    prior = scale_free_tokens_left(committed, tokens_left)
    beyond = []
    for answer in answers:
        if answer.tokens <= committed:
            continue  # it ended before this one's point: it says nothing of what is left
        if answer.ended or answer.tokens >= budget:
            beyond.append(min(answer.tokens, budget) - committed)
        else:
            run_on = scale_free_tokens_left(answer.tokens, budget - answer.tokens)
            beyond.append(answer.tokens - committed + run_on)
    return (PRIOR_WEIGHT * prior + sum(beyond)) / (PRIOR_WEIGHT + len(beyond))
