"""The `auto` policy's acceptance model: how many tokens a step can expect from a source.

For a source drafting γ candidates, the expected committed tokens are
E(γ) = 1 + Σ_{j=1..γ} Π_{i=1..j} p_i, where p_i is the chance that candidate i is accepted
given that the ones before it were (the 1 is the target's own token, committed whatever
happens).

p_i are smoothed counts per source, each position's prior being the estimate of the
position before it, with old evidence decaying so the estimate follows the text. Each
source keeps two sets: one for the step after its draft agreed with everything the target
committed (a streak, as when the answer copies a passage) and one for any other step. A
lookup match that was not chosen is scored too, against the tokens the step committed:
that costs nothing, so the lookup's estimates stay current while the assistant drafts. The
assistant's estimates may start from what the pair's earlier runs saw, counted as a few
observations only (`HISTORY_WEIGHT`), so that the text at hand soon outweighs it. A lookup's
never do (`CARRIED`): how far a match continues is the prompt's own (a runbook's steps
copied nearly whole, a passage's question answered in other words), so a history drawn from
other prompts only makes a run's drafts depend on what ran before it. On the benchmark's
long passages, the matches of a runbook (89% kept) made the next passage's first matches
draft 7 candidates at an estimated 4.1 tokens, which kept 5 of 35 (docs/lab-notes.md).

An assistant model's draft may end short of the γ the policy chose: after a token it is
unsure of (the confidence and cumulative thresholds), or an end of sequence. `DraftEnds`
keeps, per position, how often its drafts in this run went on past it, so that a step's
cost (`assisted.policy.choice`) counts only the drafting and the rows of verification it
is likely to pay for. Priced at the full γ, the assistant's steps over the benchmark's 24
examples were expected to cost 0.56–0.62 s a category where they took 0.34–0.45 s: 1383 of
its 1598 drafts ended short of their γ, 76% after 1 to 3 candidates (docs/lab-notes.md).
Its E(γ) needs no such factor: a draft that ended short with every candidate kept counts
as a rejection at the position after its last (`Acceptance.observe`'s `asked`), so each
position's estimate is the chance that a candidate is drafted and kept. The two chances
are not independent (a draft goes on where the assistant is sure, which is where the
target agrees): multiplied, they counted each unsure candidate twice, and priced the
assistant's steps at 2.50 tokens where they committed 3.12 (docs/lab-notes.md).

A lookup source that knows how long its match is (`assisted.engine.drafters.seam`) keeps its
estimates by that length too (`match_bucket`): a suffix that matched 8 tokens of the context is
likelier to continue as it did than one that matched 2.

No torch here: counts in, expectations out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from assisted.core.settings import DrafterKind

DECAY = 0.98  # weight kept by old acceptance evidence at each observation
# What any prior of the policy counts for, in observations of the run: a position's
# acceptance (Beta(1, 1) at the first), a cost's median (two copies among its timings), the
# answers' scale-free prior (two answers of the record). Two let three of the run's own
# observations overrule a prior, however wrong (docs/auto-policy.md, constants).
PRIOR_WEIGHT = 2
STREAK_TOKENS = 2  # a draft agreeing on fewer tokens than this starts no streak
HISTORY_WEIGHT = 4.0  # observations that a pair's earlier runs count for in a new run

LONG_MATCH = 4  # lookup matches of this many tokens or more share one estimate
CARRIED = frozenset({DrafterKind.ASSISTANT})  # the sources whose history a run starts from

Counts = tuple[list[float], list[float]]  # (accepted, tried) per draft position
# An estimate's key: its source, whether it follows a streak, and its match bucket.
EstimateKey = tuple[DrafterKind, bool, int]
# Counts per estimate, as a run leaves them for the pair's next runs.
AcceptanceCounts = dict[EstimateKey, Counts]


def match_bucket(length: int) -> int:
    """The bucket of a lookup match of `length` tokens: 0 where the length is unknown (an
    assistant's draft, Transformers' lookup), else the length up to `LONG_MATCH`."""
    return min(length, LONG_MATCH)


class Acceptance:
    """Per-position acceptance of one draft source: decayed counts under a Beta prior."""

    def __init__(self, cap: int, history: Counts | None = None):
        self.accepted = [0.0] * cap  # decayed count of accepted candidates at position i
        self.tried = [0.0] * cap  # decayed count of candidates verified at position i
        if history is not None:
            accepted, tried = history
            scale = min(1.0, HISTORY_WEIGHT / tried[0]) if tried and tried[0] > 0 else 0.0
            for i in range(min(cap, len(tried))):
                self.accepted[i] = accepted[i] * scale
                self.tried[i] = tried[i] * scale

    def expected_tokens(self, gamma: int, optimistic: bool = False, prior: float = 0.5) -> float:
        """E(γ) from the posterior means (`expected_tokens_by_length`)."""
        if gamma == 0:
            return 1.0
        return self.expected_tokens_by_length(gamma, optimistic, prior)[-1]

    def expected_tokens_by_length(
        self, most: int, optimistic: bool = False, prior: float = 0.5
    ) -> list[float]:
        """E(γ) for γ = 1 … `most` from the posterior means; `optimistic` takes each
        position's mean plus one standard deviation, so that little evidence reads as a
        reason to try.

        Each position's prior is the estimate of the position before it (the first one's
        is `prior`, Beta(1, 1)'s 1/2 unless the caller knows better): a position rarely
        verified, because drafts seldom reach it, reads as "like the one before" rather
        than as a coin flip, so that a well-accepted drafter is tried at longer lengths and
        learns how far its drafts hold."""
        by_length, tokens, reach = [], 1.0, 1.0
        for i in range(most):
            n = self.tried[i] + PRIOR_WEIGHT
            mean = (self.accepted[i] + PRIOR_WEIGHT * prior) / n
            prior = mean
            if optimistic:
                mean = min(1.0, mean + math.sqrt(mean * (1 - mean) / (n + 1)))
            reach *= mean
            tokens += reach
            by_length.append(tokens)
        return by_length

    def observe(self, drafted: int, accepted: int, asked: int | None = None) -> None:
        """A step verified `drafted` candidates and accepted the first `accepted`. Where it
        `asked` for more than were drafted (a draft that ended short), the candidate after
        the last one drafted counts as not accepted: the estimate is then the chance that a
        candidate is drafted and kept (the module's note)."""
        for i in range(len(self.tried)):
            self.accepted[i] *= DECAY
            self.tried[i] *= DECAY
        # Positions past the first rejection tell nothing: they were conditional on it.
        for i in range(min(accepted + 1, max(drafted, asked or 0), len(self.tried))):
            self.tried[i] += 1.0
            self.accepted[i] += 1.0 if i < accepted else 0.0

    def first(self) -> tuple[float, float]:
        """The decayed (accepted, tried) counts of the first position."""
        return (self.accepted[0], self.tried[0]) if self.tried else (0.0, 0.0)

    def counts(self) -> Counts:
        return list(self.accepted), list(self.tried)


class AcceptanceModel:
    """The acceptance of every source, one estimate after a streak and one otherwise (and
    per match bucket for a lookup), and which one each source's next step uses."""

    def __init__(
        self, cap: int, sources: Iterable[DrafterKind], history: AcceptanceCounts | None = None
    ):
        """`history` holds counts per estimate from the pair's earlier runs; those of
        sources not `CARRIED` are left out."""
        sources = list(sources)
        self.cap = cap
        self.history = {key: counts for key, counts in (history or {}).items() if key[0] in CARRIED}
        self.estimates: dict[EstimateKey, Acceptance] = {}
        # Per source: its latest draft agreed with every token the target committed (text
        # it predicts well, such as a passage being copied).
        self.streak = dict.fromkeys(sources, False)
        self.bucket = dict.fromkeys(sources, 0)  # the match bucket of its draft on offer

    def offer(self, source: DrafterKind, match_length: int) -> None:
        """`source`'s next draft copies a match of `match_length` tokens (0: unknown), if
        it is one of the sources here."""
        if source in self.bucket:
            self.bucket[source] = match_bucket(match_length)

    def current(self, source: DrafterKind) -> Acceptance:
        """The estimate that `source`'s next step draws on."""
        key = (source, self.streak[source], self.bucket[source])
        if key not in self.estimates:
            self.estimates[key] = Acceptance(self.cap, self.history.get(key))
        return self.estimates[key]

    def expected_tokens(self, source: DrafterKind, gamma: int, optimistic: bool = False) -> float:
        """E(γ) for the next step drafted by `source` (see `Acceptance.expected_tokens`),
        its first position's prior drawn from the source's other match buckets
        (`bucket_prior`)."""
        return self.current(source).expected_tokens(gamma, optimistic, self.bucket_prior(source))

    def expected_tokens_by_length(
        self, source: DrafterKind, most: int, optimistic: bool = False
    ) -> list[float]:
        """E(γ) for γ = 1 … `most` of `source`'s next step, as `expected_tokens`."""
        prior = self.bucket_prior(source)
        return self.current(source).expected_tokens_by_length(most, optimistic, prior)

    def bucket_prior(self, source: DrafterKind) -> float:
        """The prior of the first position of `source`'s estimate on offer: where it has a
        match bucket, what the run's other buckets of that source, in the same streak state,
        saw of their first candidates, under the Beta(1, 1) prior; else 1/2. A match of a
        length not yet seen in this run reads as the source's other matches did, not as a
        coin flip: of the six estimates (2, 3 and 4 or more tokens, with and without a
        streak), four were each drafted at 1/2 in a run of a long passage, four or five
        candidates at two plain steps' cost on the AVX2 imitation, after the run's first
        matches had kept nothing (docs/lab-notes.md)."""
        bucket, streak = self.bucket[source], self.streak[source]
        if not bucket:
            return 0.5
        accepted = tried = 0.0
        for (name, after_streak, other), estimate in self.estimates.items():
            if name == source and after_streak == streak and other != bucket:
                kept, seen = estimate.first()
                accepted, tried = accepted + kept, tried + seen
        return (accepted + PRIOR_WEIGHT * 0.5) / (tried + PRIOR_WEIGHT)

    def observe(
        self, source: DrafterKind, drafted: int, accepted: int, asked: int | None = None
    ) -> None:
        """The target verified `drafted` candidates from `source` and accepted the first
        `accepted`, of the `asked` an assistant model's draft could have run to (None: as
        many as were drafted; see `Acceptance.observe`)."""
        self.current(source).observe(drafted, accepted, asked)
        self.streak[source] = accepted == drafted >= STREAK_TOKENS

    def observe_unverified(
        self, source: DrafterKind, drafted: int, agreed: int, committed: int
    ) -> None:
        """`source` had `drafted` candidates ready that the target did not verify, of which
        the first `agreed` equal the `committed` tokens the step committed: they would have
        been accepted up to the first disagreement, or as far as the committed tokens
        reach."""
        seen = min(drafted, agreed + 1 if agreed < committed else agreed)
        self.current(source).observe(seen, min(agreed, seen))
        self.streak[source] = agreed >= max(min(drafted, committed), STREAK_TOKENS)

    def counts(self) -> AcceptanceCounts:
        """Counts per estimate, for the pair's next runs: the history, updated with the
        estimates this run used, of the sources `CARRIED`."""
        counts = dict(self.history)
        counts.update(
            (key, acceptance.counts())
            for key, acceptance in self.estimates.items()
            if key[0] in CARRIED
        )
        return counts


class DraftEnds:
    """How far an assistant model's drafts run in this run before they end short of the γ
    asked (the module's note): per draft position, decayed counts of the drafts that
    reached it and of those that went on past it."""

    def __init__(self, cap: int):
        self.went_on = [0.0] * cap
        self.reached = [0.0] * cap

    def observe(self, asked: int, drafted: int) -> None:
        """A step asked for `asked` candidates and the draft gave `drafted`."""
        for i in range(len(self.reached)):
            self.went_on[i] *= DECAY
            self.reached[i] *= DECAY
        # A draft that stopped at γ says nothing of whether it would have gone on.
        for i in range(min(drafted, asked, len(self.reached))):
            went_on = i + 1 < drafted
            if went_on or drafted < asked:
                self.reached[i] += 1.0
                self.went_on[i] += 1.0 if went_on else 0.0

    def goes_on(self) -> list[float]:
        """Per position i, the chance a draft that reached candidate i + 1 goes on past
        it: smoothed counts, each position's prior the estimate of the one before, the
        first's 1 (with no evidence, a draft runs to its γ)."""
        chances, prior = [], 1.0
        for went_on, reached in zip(self.went_on, self.reached, strict=True):
            prior = (went_on + PRIOR_WEIGHT * prior) / (reached + PRIOR_WEIGHT)
            chances.append(prior)
        return chances

    def expected_s(self, costs: Sequence[float]) -> list[float]:
        """For γ = 1 … len(`costs`), the expected seconds of a step asking for γ candidates,
        where a draft of d candidates costs `costs[d - 1]`: each length the draft may end
        at, at its own cost."""
        goes_on = self.goes_on()
        found, ended_s, reach = [], 0.0, 1.0  # ended_s: the drafts that end before γ
        for gamma, cost in enumerate(costs, 1):
            found.append(ended_s + reach * cost)
            ended_s += reach * (1.0 - goes_on[gamma - 1]) * cost
            reach *= goes_on[gamma - 1]
        return found
