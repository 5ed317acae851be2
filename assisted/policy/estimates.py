"""The `auto` policy's estimates: the two whose ratio its rule maximises, how many tokens a
step of a source can expect to commit (**acceptance**, `AcceptanceModel`) and how long such
a step takes (**costs**, `CostModel`, on T(k)'s monotone fit), and how many tokens the
run can expect yet, which its reads are weighed over (**answers**, `expected_tokens_left`).
Every prior counts for `PRIOR_WEIGHT` observations, and every window of the latest
observations holds `WINDOW`.

**Acceptance.** For a source drafting γ candidates, the expected committed tokens are
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

**Costs**: how long a step takes, by source and draft length, as the run is paying it.
cost(γ) = call_s + drafter_s·γ + T(γ + 1), plus catch_up_s for an assistant model that
skipped the steps before (its cache then lacks the tokens it did not see). A plain step
(γ = 0) costs T(1).
- T(k) is the target's time to verify k rows (the last committed token + k − 1
  candidates), fitted monotone in k from the run's own timed verifications, robustly
  (`assisted.core.cost_curve`: medians, the level of the rows not yet verified set by the
  ratios of those verified, every row at most any larger row's).
- drafter_s is a source's time per drafted token. Prompt lookup's is 0: its n-gram search
  runs at every step whatever is chosen, so choosing it costs only the verification.
  Where the model source's drafts were timed by length (replayed CUDA graphs: a short
  draft pays the launch and the read a long one pays), a draft of γ costs
  drafter_s·γ·shape(γ), shape(γ) its time per token over the longest draft's, so that it
  starts at its own timing; each draft is a timing of drafter_s once divided by its
  shape, so every length moves alike.
- call_s is the assistant's time per drafting call outside its forward passes (its own
  generate() loop); catch_up_s what reading the skipped steps' tokens adds to a call.
- prefill_s is the assistant's time per token of context it reads before its first draft,
  and prices any read of tokens it has not seen (`read_s`: its first read of the prompt,
  its catch-up after skipped steps); the policy weighs that read before starting or
  resuming the assistant at all (`assisted.policy.choice`).

**The costs a decision uses are the costs the run is paying.** Each figure starts from a
prior (the calibration, refined by earlier runs: `assisted.policy.learnt`) that counts as
`PRIOR_WEIGHT` timings, and each of the run's own timings joins a window of the latest
`WINDOW`; the figure is the median of the window and the prior's copies. Three timings of
the run overrule any prior, however wrong: a learnt file written while another job shared
the cores once priced the first read 3× and T(3)…T(8) 2.5× above what the machine paid,
and an average that moved 4% a timing (the model this replaced) kept the assistant from
drafting for dozens of runs (docs/lab-notes.md). A median also ignores the odd slow
pass, which an average carries for many steps.

The assistant shares the machine with the target, so a neighbour that slows one slows the
other: until the run has timed the assistant itself, its priors (time per drafted token,
per token read) follow the level the target's passes set against their prior
(`level`). A run on a machine slowed as a whole then decides as it would on a
quiet one, where priors taken as they stand would price the read, timed on a quiet moment,
as cheap against busy steps, or, timed on a busy one, as dear against quiet priors.

A plain run's own steps set T(1) for the pair's next runs, the median of its passes
(`PlainSteps`).

What a run keeps is only what it measured (`measured_verify`): the median and count of
each row it verified, never a row fitted between them, so the next calibration sees
measurements, not its own interpolation.

**How long an answer can be expected to run on** (`expected_tokens_left`): the `auto`
policy weighs every read the assistant must make (its first read of the prompt, a
catch-up) against the tokens left to repay it, and nobody knows in advance where an answer
ends; the run's budget (max new tokens) is only an upper bound. The expectation mixes two
things:
- a scale-free prior (`scale_free_tokens_left`): answer lengths log-uniform between one
  token and the budget, so an answer is as likely to run 2 to 4 tokens as 20 to 40, and
  the longer one has run, the longer it is expected to run on;
- the pair's own record of answers (`Answer`, kept in
  `assisted.policy.learnt.LearntState.answers`): of the latest answers that ran past the
  tokens committed so far, the tokens each ran on beyond them, up to the budget. An answer
  its budget cut ran at least that long: past its cut it is extended by the prior. The
  prior counts as `PRIOR_WEIGHT` answers; the record keeps the latest `WINDOW`.

A 32-token budget expects 9.6 tokens from the prior alone; a pair whose answers ran to
their budget expects the whole budget after a few runs. They weigh a catch-up and the
probes' budget; a first read is bet at the prior alone (`assisted.policy.choice`).

No torch here: counts and seconds in, expectations out.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from assisted.core.cost_curve import fit, level
from assisted.core.record import median
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


# How many of the latest observations an estimate keeps: a cost's timings in the run (its
# median is taken over them and `PRIOR_WEIGHT` copies of its prior), the fewest of a plain
# run's passes whose median sets T(1), the pair's reads whose median prices the next, the
# pair's answers, and the steps the floor weighs (`assisted.policy.choice.Floor`): enough to
# ride out a few slow passes or bursts, few enough to follow a neighbour that starts or stops
# mid-run within a dozen steps.
WINDOW = 12


@dataclass
class Estimate:
    """One cost: the median of the run's latest `WINDOW` timings and `PRIOR_WEIGHT` copies of
    its prior (the module's note). A prior of None counts for nothing."""

    prior: float | None
    timings: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def observe(self, seconds: float) -> None:
        self.timings.append(seconds)

    def value(self, level: float = 1.0) -> float:
        """The figure, its prior taken at `level` (the module's note)."""
        copies = [self.prior * level] * PRIOR_WEIGHT if self.prior is not None else []
        return median([*self.timings, *copies]) or 0.0


class CostModel:
    """Seconds per step by source and γ, as the run's own steps time them."""

    def __init__(
        self,
        cap: int,
        verify_s: dict[int, float],
        drafter_s: dict[DrafterKind, float],
        model_source: DrafterKind | None = None,
        prefill_s: float = 0.0,
        draft_shape: dict[int, float] | None = None,
    ):
        """`verify_s` maps rows k to the target's seconds to verify them, for k = 1 … cap + 1;
        `drafter_s` maps each source to its seconds per drafted token; `model_source` names
        the source that runs a model with a cache of its own (it pays a call overhead, a
        prefill before its first draft and a catch-up after skipped steps), and `prefill_s`
        is that model's seconds per token of context it prefills. `draft_shape` maps γ to
        the model source's time per token in a draft of γ over its `drafter_s` (the
        module's note; None: 1 at every γ). All are the priors."""
        missing = [k for k in range(1, cap + 2) if k not in verify_s]
        if missing:
            raise ValueError(f"verification times are missing for rows {missing}")
        self.prior_verify_s = dict(verify_s)
        self.verify_timings: dict[int, deque[float]] = {}
        self.verify_counts: dict[int, int] = {}
        self.verify_s = fit({}, verify_s, self.prior_verify_s, PRIOR_WEIGHT)
        self.drafter_s = dict(drafter_s)
        self.model_source = model_source
        self.drafting = Estimate(drafter_s.get(model_source))
        self.level = 1.0  # the target's passes against the prior (`observe_verify`)
        self.prefill = Estimate(prefill_s or None)  # 0: never timed
        self.prefill_s = prefill_s
        self.draft_shape = dict(draft_shape or {})
        self.catch_up = Estimate(None)
        self.catch_up_s = 0.0
        self.call = Estimate(None)
        self.call_s = 0.0  # the model source's seconds per drafting call beyond its passes
        self.last_call_s = 0.0  # the wall time of the latest drafting call

    def cost_s(self, source: DrafterKind | None, gamma: int, catch_up: bool = False) -> float:
        """cost(γ): seconds of a step where `source` drafts `gamma` candidates, after first
        reading the tokens of the steps it skipped where `catch_up`."""
        if source is None or gamma == 0:
            return self.verify_s[1]
        cost = self.drafting_s(source, gamma) + self.verify_s[gamma + 1]
        if source == self.model_source:
            cost += self.call_s
        if catch_up:
            cost += self.catch_up_s
        return cost

    def drafting_s(self, source: DrafterKind, gamma: int) -> float:
        """Seconds `source` takes to draft `gamma` candidates (the module's note)."""
        return self.drafter_s[source] * gamma * self._shape(source, gamma)

    def _shape(self, source: DrafterKind, gamma: int) -> float:
        return self.draft_shape.get(gamma, 1.0) if source == self.model_source else 1.0

    def observe_verify(self, rows: int, seconds: float) -> None:
        """The target verified `rows` rows (last committed token + candidates) in `seconds`:
        the row's window takes it, and T(k) is fitted again (the module's note)."""
        if rows not in self.verify_s:
            return
        self.verify_timings.setdefault(rows, deque(maxlen=WINDOW)).append(seconds)
        self.verify_counts[rows] = self.verify_counts.get(rows, 0) + 1
        self.verify_s = fit(self.verify_timings, self.verify_s, self.prior_verify_s, PRIOR_WEIGHT)
        # The assistant shares the machine: its priors follow the level the target's
        # passes set, until its own timings overrule them (the module's note).
        self.level = level(self.verify_timings, self.prior_verify_s, PRIOR_WEIGHT)
        if self.model_source is not None:
            self.drafter_s[self.model_source] = self.drafting.value(self.level)
            self.prefill_s = self.prefill.value(self.level)

    def read_s(self, tokens: int) -> float:
        """Seconds the model source takes to read `tokens` tokens it has not seen."""
        return self.prefill_s * max(tokens, 0)

    def observe_call(self, seconds: float) -> None:
        """The latest drafting call of the model source took `seconds` of wall time, its
        forward passes included (they are timed apart and passed to `observe_draft`)."""
        self.last_call_s = seconds

    def observe_draft(
        self, drafted: int, seconds: float, prefilled: int | None = None, catch_up: bool = False
    ) -> float:
        """The model source drafted `drafted` (at least one) candidates in `seconds` of forward
        passes; the rest of its call's wall time is a timing of `call_s`. Where the call
        first prefilled `prefilled` tokens of context, the excess over the drafting is a
        timing of the prefill time per token; a catch-up's excess one of `catch_up_s`; any
        other draft one of the time per drafted token. Returns that excess: the seconds the
        call spent reading tokens it had not seen (0 for a draft that read none)."""
        if self.last_call_s:
            self.call.observe(max(self.last_call_s - seconds, 0.0))
            self.call_s = self.call.value()
            self.last_call_s = 0.0
        per_token = self.drafter_s[self.model_source]
        shape = self._shape(self.model_source, drafted)
        extra = max(seconds - per_token * drafted * shape, 0.0)
        if prefilled is not None:
            self.prefill.observe(extra / max(prefilled, 1))
            self.prefill_s = self.prefill.value(self.level)
            return extra
        if catch_up:
            self.catch_up.observe(extra)
            self.catch_up_s = self.catch_up.value()
            return extra
        self.drafting.observe(seconds / (drafted * shape))
        self.drafter_s[self.model_source] = self.drafting.value(self.level)
        return 0.0

    def verify_curve(self) -> list[tuple[int, float]]:
        """T(k) as (rows, seconds), rows ascending."""
        return sorted(self.verify_s.items())

    def measured_read_s(self) -> float | None:
        """The median seconds per token of the reads of context this run timed (its first
        draft's, usually one), or None where it made none: what the pair keeps as the
        prior of its next runs' first read."""
        return median(list(self.prefill.timings))

    def measured_verify(self) -> dict[int, tuple[float, int]]:
        """The rows this run verified, each with the median of its latest timings and how
        many it timed: what the pair keeps (never a fitted row: the module's note)."""
        return {
            k: (statistics.median(times), self.verify_counts[k])
            for k, times in sorted(self.verify_timings.items())
        }


class PlainSteps:
    """A plain run's timed target passes (`assisted.engine.observe`), whose median sets the pair's
    T(1) once the run's clock has stopped (the module's note)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def observe_verify(self, rows: int, seconds: float) -> None:
        """The target decoded a step in `seconds` (one row: the last committed token)."""
        if rows == 1:
            self.seconds.append(seconds)

    def t1_s(self) -> float | None:
        """T(1) as the run's passes time it: their median, once they fill a `WINDOW` (a
        stopped run's few passes, or a warm-up's, paying first calls, set nothing)."""
        return statistics.median(self.seconds) if len(self.seconds) >= WINDOW else None


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
