"""The `auto` drafting policy: where each step's candidates come from, how many, and where
the assistant's draft ends, from measured costs. One rule decides: the most expected
committed tokens per expected second.

Transformers keeps verification and acceptance; this module only picks, before each step,
a source (the assistant model, or a prompt-lookup match: an n-gram of the prompt or of the
output so far) and γ, the number of candidates it proposes, from 0 (a plain target step)
to a cap. It weighs two estimates (`assisted.policy.estimates`):
- E(γ), the tokens a step of a source can expect to commit (`AcceptanceModel`);
- cost(γ), the seconds such a step takes (`CostModel`; γ = 0 costs T(1), yields 1).

It chooses the source and γ that maximise E(γ) / cost(γ), E taken optimistically (each
candidate's acceptance one standard deviation above its estimate: a source seldom tried
gets tried, one with much evidence is taken at its word). A prompt-lookup match's draft
must also pay against a plain step at its estimate: its candidates are scored at every
step, drafted or not, so optimism buys it no evidence.

**Where a draft ends.** An assistant's γ is a cap: the same rule prices each further
candidate. Drafting candidate k + 1 costs its draft and its verification row,
d + T(k + 2) − T(k + 1), and it adds the chance that it is kept to the step's tokens; that
raises the step's rate only where the chance exceeds (d + ΔT) × r, r the rate the step was
chosen at. The assistant's own product of probabilities over its draft so far (its
`reach`) is that chance's estimate, so the draft ends after candidate k once its reach
falls below that floor (`Choice.floors`, applied by the drafting loop). Where verifying is
flat and drafting cheap the floors are low and drafts run long; where each row costs most
of a step (an AVX2 CPU in fp32) they end early. A step is priced where its draft can be
expected to end (`DraftEnds`, learnt from the run's own drafts), each length with its own
drafting and rows.

**Holds, each a bounded wait.** Before its first draft the assistant must read the whole
context, after skipped steps their tokens, and where its steps ran slower than plain ones
(`Floor`) a further step is a probe that may lose: each is paid once, and the run may never
earn it back. The read is a bet made at each step until the assistant starts: **it starts at
once where the time it can be expected to save over the tokens the run can expect yet repays
the read** (`assisted.policy.estimates`: the pair's record of answers and a scale-free prior
on where they end; before its first draft the saving is weighed over the prior's
acceptances, as a probe's, and over the tokens the prior alone expects:
`_first_read_value`). Where it cannot, the assistant sits out in a bounded wait (`Ledger`:
ski rental): the ledger adds up what it would have saved at each step it sat out, and it
starts once that reaches the read's price. A catch-up and the floor go through the same
ledger, so no hold outlasts its price, whatever the learnt file or the answer record say.
Each step the policy holds the assistant back records why (`assisted.core.record.HeldBack`).

**Probes.** After `PROBE_AFTER` γ = 0 steps in a row the policy drafts one candidate, so
that drafting resumes when the text becomes predictable again, and an assistant that the
choice has passed by for `PROBE_AFTER` steps drafts once at its best length, since nothing
else tells how well it would do now (a lookup match is scored whether chosen or not; the
assistant cannot be). What a probe can lose (its step beyond the one token it surely
commits) must fit what is left of `PROBE_SHARE` of the time plain decoding would spend on
the answer the policy expects; none probes within `PROBE_AFTER` tokens of the end.

With each choice the policy keeps what it expected of it (`Expectation`: tokens, seconds,
and a plain step's seconds then); summed over the run's steps, these are its own prediction
of the speedup (`assisted.analysis.stats`).

Its bookkeeping per step: `python -m lab.policy_bookkeeping`. The constants and
the measurements behind them: docs/auto-policy.md. No torch here: numbers in, a choice out.

Why the assistant sits out a step, and for how long at most: the `auto` policy's holds,
each a bounded wait kept in one ledger.

The assistant is held back where drafting from it needs something paid first that the run
may never earn back: its first read of the context (FIRST_DRAFT), a read of the steps it
skipped (CATCH_UP), or a probe of steps that ran slower than plain ones (FLOOR, measured by
`Floor`). Whether that price is repaid depends on what nobody knows yet: how long the answer
runs, whether the run's steps were slow for a moment or for good. So each hold is ski
rental (Karlin et al. 1988): while the assistant sits out, the ledger adds up what it would
have saved at each step, the step's committed tokens times the seconds a token that the
cost and acceptance models say drafting saves, and the hold ends once that total reaches
the hold's price. Held too long, the run lost at most the price; released wrongly, it
loses the price once more: about twice the price against hindsight, whatever the answer's
length, the learnt file or the answer record say. A hold whose reason changes (the read
made, the floor met) starts a new wait.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from assisted.core.record import HeldBack
from assisted.core.settings import DrafterKind
from assisted.policy.estimates import (
    PRIOR_WEIGHT,
    WINDOW,
    Acceptance,
    AcceptanceCounts,
    AcceptanceModel,
    Answer,
    CostModel,
    DraftEnds,
    expected_tokens_left,
    scale_free_tokens_left,
)


class Floor:
    """The seconds per committed token of the latest `WINDOW` steps the assistant drafted in
    a run, against a plain step's. It judges once the run's own steps outvote the prior
    that drafting pays (more than `PRIOR_WEIGHT` of them), and with no margin for noise:
    its hold is a wait priced at the excess it measured (`Choice._held_back`), so a floor
    met by a step's noise alone costs a wait about as small as that noise."""

    def __init__(self) -> None:
        self.latest: deque[tuple[float, int]] = deque(maxlen=WINDOW)  # (seconds, tokens)

    def observe(self, seconds: float, tokens: int) -> None:
        """A step the assistant drafted took `seconds` and committed `tokens`."""
        self.latest.append((seconds, tokens))

    def _pace_s(self) -> float | None:
        """The seconds per token of the steps kept; None before any committed a token."""
        tokens = sum(t for _, t in self.latest)
        return sum(s for s, _ in self.latest) / tokens if tokens else None

    def behind(self, plain_step_s: float) -> bool:
        """Whether those steps ran slower per token than plain steps of `plain_step_s`."""
        pace_s = self._pace_s()
        return len(self.latest) > PRIOR_WEIGHT and pace_s is not None and pace_s > plain_step_s

    def excess_s(self, plain_step_s: float) -> float:
        """The seconds per token its steps ran beyond plain steps of `plain_step_s`."""
        pace_s = self._pace_s()
        return 0.0 if pace_s is None else max(pace_s - plain_step_s, 0.0)


class Ledger:
    """One bounded wait at a time (the module's note): the hold's reason, its price, and what
    the assistant would have saved since the wait began."""

    def __init__(self) -> None:
        self.reason: HeldBack | None = None
        self.price_s = 0.0  # what ends the wait
        self.saved_s = 0.0  # what the assistant would have saved during it
        self.saving_s = 0.0  # the seconds a token would save at the latest held step

    def holds(self, reason: HeldBack, price_s: float, saving_s: float) -> bool:
        """Whether the assistant sits out this step for `reason`, whose release costs
        `price_s`, drafting saving `saving_s` a token: until the wait's savings reach the
        price. A new reason starts a new wait."""
        if reason != self.reason:
            self.reason, self.saved_s = reason, 0.0
        self.price_s = price_s
        self.saving_s = max(saving_s, 0.0)
        return self.saved_s < price_s

    def held(self, tokens: int) -> None:
        """A step the assistant sat out committed `tokens`."""
        self.saved_s += tokens * self.saving_s

    def clear(self) -> None:
        """The assistant drafted: no wait is under way."""
        self.reason, self.saved_s, self.price_s, self.saving_s = None, 0.0, 0.0, 0.0


PROBE_AFTER = 8  # γ = 0 steps in a row before a one-candidate probe
# The share of plain decoding's time on the expected answer that probes of an assistant the
# choice passes by may lose in one run (the module's note).
PROBE_SHARE = 0.05
# The acceptances at which the first read's value is weighed: midpoints of equal slices of
# the uniform prior (20 put its mean within 0.01 of the integral on the pairs' costs).
PRIOR_POINTS = tuple((i + 0.5) / 20 for i in range(20))


@dataclass(frozen=True)
class Choice:
    """What one step drafts: `gamma` candidates from `source` (None: a plain step).
    `catch_up` and `prefill` say what the assistant model must read first: the tokens of
    the steps it skipped, or the whole context because it has not drafted yet.
    `held_back` says why the assistant, though able to draft, was not weighed at this
    step (None: it was, or it could not draft). `floors[k - 1]` is the reach (the product
    of the assistant's probabilities over its first k candidates) below which its draft
    ends after candidate k (the module's note; empty: it runs to γ)."""

    source: DrafterKind | None
    gamma: int
    catch_up: bool = False
    prefill: bool = False
    held_back: HeldBack | None = None
    floors: tuple[float, ...] = ()


PLAIN = Choice(None, 0)


@dataclass(frozen=True)
class Expectation:
    """What the policy expected of its choice when it made it, before the step ran: the
    tokens the step would commit (E(γ) from the acceptance estimates as they stood, not the
    optimistic E that chose it; 1 for a plain step), the seconds it would take (cost(γ)
    where the draft can be expected to end, with a catch-up, the call overhead and, where
    the choice starts the assistant model, its prefill of the context), and the seconds a
    plain step would have taken then, T(1).
    `assisted.analysis.stats` sums them into the policy's predicted speedup."""

    expected_tokens: float
    expected_s: float
    plain_step_s: float


class DraftPolicy:
    """Chooses each step's source and γ from its cost and acceptance models, and feeds them
    what each step drafted, accepted and cost."""

    def __init__(
        self,
        cap: int,
        verify_s: dict[int, float],
        drafter_s: dict[DrafterKind, float],
        model_source: DrafterKind | None = None,
        prefill_s: float = 0.0,
        history: AcceptanceCounts | None = None,
        answers: Sequence[Answer] = (),
        draft_shape: dict[int, float] | None = None,
    ):
        """`verify_s`, `drafter_s`, `model_source`, `prefill_s` and `draft_shape` seed the
        cost model (see `CostModel`): T(k) for k = 1 … cap + 1, each source's seconds per
        drafted token, the source that runs a model with a cache of its own, its prefill
        seconds per token, and its time per token by draft length over that.
        `history` holds acceptance counts per source and streak from the pair's earlier
        runs; the sources are those of `drafter_s`. `answers` are the pair's latest
        answers (`assisted.policy.learnt`)."""
        self.cap = cap
        self.costs = CostModel(cap, verify_s, drafter_s, model_source, prefill_s, draft_shape)
        self.acceptance = AcceptanceModel(cap, drafter_s, history)
        self.ends = DraftEnds(cap)  # where the model source's drafts end short of γ
        self.model_source = model_source
        self.started = False  # the model source has drafted, so it has a cache
        self.behind = False  # ... and the step before did not use it
        self.zero_steps = 0  # γ = 0 steps in a row
        self.idle = 0  # steps in a row without the model source
        self.choice = PLAIN  # the latest `choose`
        self.expected: Expectation | None = None  # ... and what it expected of that choice
        self.context = 0  # the context of the latest `choose`
        self.committed = 0  # tokens the run's steps have committed
        self.seen = 0  # the context the model source has read (after its latest draft)
        self.floor = Floor()
        self.ledger = Ledger()  # the hold under way, a bounded wait (the module's note)
        self.read_s = 0.0  # seconds the latest draft spent reading the context first
        self.answers = tuple(answers)
        self.explored_s = 0.0  # what the run's probes of a held-back assistant could lose

    def choose(
        self,
        offers: dict[DrafterKind, int],
        tokens_left: int,
        context: int,
        match_length: int = 0,
    ) -> Choice:
        """The next step's choice. `offers` maps each source able to draft now to the most
        candidates it can give (a lookup match's length, the room before the length limit);
        `tokens_left` is the most tokens the run can still commit, `context` the tokens an
        assistant model would prefill if it started now, and `match_length` the tokens the
        prompt-lookup match on offer shares with the context (0: unknown)."""
        self.context = context
        self.acceptance.offer(DrafterKind.PROMPT_LOOKUP, match_length)
        offers = {name: min(most, self.cap) for name, most in offers.items() if most > 0}
        model = self.model_source
        room = offers.get(model, 0)  # not when the length limit leaves it no room
        held_back = self._held_back(offers, tokens_left) if room else None
        if held_back is not None:
            del offers[model]
        plain = best = self.rate(None, 0)
        choice = PLAIN
        for source, most in offers.items():
            # A lookup match's draft must pay at its estimate (the module's note).
            estimates = self.steps(source, most) if source != model else None
            for gamma, (tokens, seconds) in enumerate(self.steps(source, most, True), 1):
                if estimates and estimates[gamma - 1][0] / estimates[gamma - 1][1] <= plain:
                    continue
                if tokens / seconds > best:
                    choice, best = self._choice(source, gamma), tokens / seconds
        # A probe informs the steps after it: with fewer left than a run of plain steps
        # before the next probe, what it would learn cannot repay it.
        probing = tokens_left > PROBE_AFTER
        if choice.gamma == 0 and self.zero_steps >= PROBE_AFTER and offers and probing:
            source = max(offers, key=lambda name: self.rate(name, 1))
            if self._probe_fits(source, 1, tokens_left):
                choice = self._choice(source, 1)
        elif probing and self.idle >= PROBE_AFTER and choice.source != model and room:
            # Never a held assistant: a hold ends by its own ledger, not by a probe.
            gamma = self.best(model, room)[0] if held_back is None else 0
            if gamma and self._probe_fits(model, gamma, tokens_left):
                choice = self._choice(model, gamma)
        if held_back is not None:
            choice = replace(choice, held_back=held_back)
        elif model is not None and choice.source == model:
            choice = replace(choice, floors=self.floors(choice.gamma))
        self.zero_steps = self.zero_steps + 1 if choice.gamma == 0 else 0
        self.idle = 0 if choice.source == model else self.idle + 1
        self.choice = choice
        self.expected = self._expectation(choice)
        return choice

    def rate(
        self,
        source: DrafterKind | None,
        gamma: int,
        optimistic: bool = False,
        steady: bool = False,
    ) -> float:
        """Expected committed tokens per second when `source` drafts `gamma` candidates; a
        `steady` rate leaves out any catch-up the next step needs."""
        if source is None or gamma == 0:
            return 1.0 / self.costs.cost_s(None, 0)
        tokens, seconds = self.steps(source, gamma, optimistic, steady)[-1]
        return tokens / seconds

    def best(
        self, source: DrafterKind, most: int, optimistic: bool = False, steady: bool = False
    ) -> tuple[int, float]:
        """The γ in 1 … `most` with the highest rate for `source`, and that rate."""
        steps = self.steps(source, most, optimistic, steady)
        rates = ((g, tokens / seconds) for g, (tokens, seconds) in enumerate(steps, 1))
        return max(rates, key=lambda pair: pair[1])

    def cost_s(self, source: DrafterKind | None, gamma: int) -> float:
        """cost(γ) of the next step, a catch-up included where `source` needs one."""
        return self.costs.cost_s(source, gamma, catch_up=self._catches_up(source))

    def steps(
        self, source: DrafterKind, most: int, optimistic: bool = False, steady: bool = False
    ) -> list[tuple[float, float]]:
        """E(γ) and the expected seconds of a step where `source` drafts up to γ candidates,
        for γ = 1 … `most`: the model source's draft may end short of γ (`DraftEnds`), each
        length it may end at costing its own drafting and rows; a `steady` step leaves out
        any catch-up."""
        price = self.costs.cost_s if steady else self.cost_s
        seconds = [price(source, drafted) for drafted in range(1, most + 1)]
        if source == self.model_source:
            seconds = self.ends.expected_s(seconds)
        tokens = self.acceptance.expected_tokens_by_length(source, most, optimistic)
        return list(zip(tokens, seconds, strict=True))

    def _catches_up(self, source: DrafterKind | None) -> bool:
        """Whether `source` must first read the tokens of the steps it skipped."""
        return source == self.model_source and self.started and self.behind

    def _held_back(self, offers: dict[DrafterKind, int], tokens_left: int) -> HeldBack | None:
        """Why the model source sits out this step, or None where it may draft: a hold (the
        floor, or a read it must make first: the whole context before its first draft, the
        skipped steps' tokens after) whose bounded wait has not ended (the module's note).
        A read that the time it saves over the tokens the run can expect yet repays is made
        at once. Once it drafted, its acceptance is taken optimistically here, as the
        choice takes it; before, the read is weighed as a probe's over the prior's
        acceptances (`_first_read_value`)."""
        model = self.model_source
        floor = self.started and self.floor.behind(self.costs.verify_s[1])
        if self.started and not self.behind and not floor:
            self.ledger.clear()
            return None
        without = max(
            [self.rate(None, 0)]
            + [self.best(name, most)[1] for name, most in offers.items() if name != model]
        )
        if self.started:
            gamma, with_model = self.best(model, offers[model], optimistic=True, steady=True)
            if with_model <= without:
                self.ledger.clear()
                return None  # no better than the rest: the choice passes it by
            saving_s = 1.0 / without - 1.0 / with_model
            if floor:
                # A step at the floor's pace loses its excess on the tokens it commits.
                tokens = self.steps(model, gamma)[-1][0]
                price_s = tokens * self.floor.excess_s(self.costs.verify_s[1])
                return self._wait(HeldBack.FLOOR, price_s, saving_s)
            read_s = self.costs.read_s(self.context - self.seen)
            tokens = expected_tokens_left(self.committed, tokens_left, self.answers)
            if tokens * saving_s > read_s:
                self.ledger.clear()
                return None
            return self._wait(HeldBack.CATCH_UP, read_s, saving_s)
        # The first read's bet, like its acceptances, is made at the prior: the lengths of
        # other prompts' answers would make this prompt's start depend on what ran before
        # it (a long passage's 3-token answer after 64-token ones read the passage for
        # nothing: docs/lab-notes.md). Its wait accrues what the choice bets a token saves.
        read_s = self.costs.read_s(self.context - self.seen)
        tokens = scale_free_tokens_left(self.committed, tokens_left)
        saving_s, probe_loss_s, bet_s = self._first_read_value(offers[model], without)
        if tokens * saving_s - probe_loss_s > read_s:
            self.ledger.clear()
            return None
        return self._wait(HeldBack.FIRST_DRAFT, read_s + probe_loss_s, bet_s)

    def _wait(self, reason: HeldBack, price_s: float, saving_s: float) -> HeldBack | None:
        """`reason` while its wait lasts (`Ledger`), None once it
        ended."""
        return reason if self.ledger.holds(reason, price_s, saving_s) else None

    def floors(self, gamma: int) -> tuple[float, ...]:
        """The reach below which the model source's draft of up to `gamma` ends after each
        candidate but the last (the module's note): candidate k + 1 must raise the step's
        rate, so its chance of being kept must exceed its drafting and its row,
        d + T(k + 2) − T(k + 1), at the rate r the step is expected to run at."""
        tokens, seconds = self.steps(self.model_source, gamma)[-1]
        rate = tokens / seconds
        costs, verify = self.costs, self.costs.verify_s
        floors = []
        for k in range(1, gamma):
            drafting_s = costs.drafting_s(self.model_source, k + 1)
            drafting_s = max(drafting_s - costs.drafting_s(self.model_source, k), 0.0)
            row_s = max(verify[k + 2] - verify[k + 1], 0.0)
            floors.append(min(rate * (drafting_s + row_s), 1.0))
        return tuple(floors)

    def _probe_fits(self, source: DrafterKind, gamma: int, tokens_left: int) -> bool:
        """Whether a probe of `source` at `gamma` fits the run's exploration budget (the
        module's note); if it does, it is spent."""
        one_row_s = self.costs.verify_s[1]
        first = source == self.model_source and not self.started
        read_s = self.costs.read_s(self.context) if first else 0.0
        loss_s = max(read_s + self.cost_s(source, gamma) - one_row_s, 0.0)
        answer = self.committed + expected_tokens_left(self.committed, tokens_left, self.answers)
        if self.explored_s + loss_s > PROBE_SHARE * one_row_s * answer:
            return False
        self.explored_s += loss_s
        return True

    def _first_read_value(self, most: int, without: float) -> tuple[float, float, float]:
        """What the model source's first read buys, before it has drafted in this run: the
        seconds per token it can be expected to save against the best rate `without` it,
        the seconds its first draft's step can be expected to lose, and the seconds a token
        saves at the prior's optimistic acceptance, the bet the choice makes (what a wait
        for the read accrues: `Ledger`). The first two are taken over
        the prior's acceptances (`PRIOR_POINTS`, one acceptance α for every position): at an
        α where its best rate at up to `most` candidates beats `without`, it keeps drafting
        at that rate and saves what that rate saves; at any other, it saves nothing, and the
        first step (at the γ the choice would draft at the prior's optimistic acceptance,
        0.79 a position: the bet the choice itself makes on a source it has not seen) loses
        what it costs beyond the tokens it commits before the floor and the choice stop it.
        It pays at three quarters of the prior's acceptances where verification is flat and
        drafting cheap, at a third where each verified row costs most of a step (a CPU
        without bf16 kernels); and at most of the acceptances where it pays, it saves less
        than at 0.79: weighed at 0.79 wherever it paid, the bet started the assistant on
        passages with 11- to 23-token answers on the AVX2 imitation, where its read was
        never repaid (docs/lab-notes.md).
        Made at the prior, never at the pair's earlier runs: drawn from other prompts, they
        would make the bet, and so this prompt's speed, depend on what ran before it (a
        passage's question after code prompts, whose drafts the target kept, started the
        assistant and lost: docs/lab-notes.md)."""
        source = self.model_source
        costs = [self.costs.cost_s(source, gamma) for gamma in range(1, most + 1)]
        unseen = Acceptance(self.cap)
        first = max(
            range(1, most + 1),
            key=lambda g: unseen.expected_tokens(g, optimistic=True) / costs[g - 1],
        )
        saved_s = lost_s = 0.0
        for alpha in PRIOR_POINTS:
            tokens = [1.0]  # E(γ) at α: 1 + α + … + α^γ
            for _ in range(most):
                tokens.append(tokens[-1] + alpha ** len(tokens))
            rate = max(tokens[g] / costs[g - 1] for g in range(1, most + 1))
            if rate > without:
                saved_s += 1.0 / without - 1.0 / rate
            else:
                lost_s += max(costs[first - 1] - tokens[first] / without, 0.0)
        points = len(PRIOR_POINTS)
        bet_s = max(1.0 / without - costs[first - 1] / unseen.expected_tokens(first, True), 0.0)
        return saved_s / points, lost_s / points, bet_s

    def _expectation(self, choice: Choice) -> Expectation:
        """What `choice` should commit and cost, from the models as they stand now."""
        plain_s = self.costs.cost_s(None, 0)
        if choice.source is None or choice.gamma == 0:
            return Expectation(1.0, plain_s, plain_s)
        tokens, seconds = self.steps(choice.source, choice.gamma)[-1]
        if choice.prefill:
            seconds += self.costs.read_s(self.context)
        return Expectation(tokens, seconds, plain_s)

    def _choice(self, source: DrafterKind, gamma: int) -> Choice:
        model = source == self.model_source
        return Choice(
            source,
            gamma,
            catch_up=self._catches_up(source),
            prefill=model and not self.started,
        )

    def observe(self, drafted: int, accepted: int) -> None:
        """The step of the latest choice verified `drafted` candidates and accepted the
        first `accepted`."""
        source = self.choice.source
        self.committed += accepted + 1
        if self.choice.held_back is not None:
            self.ledger.held(accepted + 1)
        model = source is not None and source == self.model_source
        if source is not None and drafted:
            self.acceptance.observe(source, drafted, accepted, self.choice.gamma if model else None)
        if model:
            if drafted:
                self.ends.observe(self.choice.gamma, drafted)
            self.started, self.behind = True, False
            self.ledger.clear()  # a wait that ended was paid: the next hold waits anew
            # Its cache holds the context and the candidates the step accepted.
            self.seen = self.context + accepted
        else:
            self.behind = self.started

    def observe_step_s(self, seconds: float, committed: int) -> None:
        """The latest step took `seconds` of wall time, from the step before it to its end
        (its drafting, verification and the loop around them), and committed `committed`
        tokens: for the floor, where the model source drafted it, less any first read of
        the context. The tokens come with the time, not from `observe`: Transformers
        streams a step's tokens, which time it, before it updates the candidate strategy
        that reports what the step accepted."""
        if self.choice.source == self.model_source and self.choice.gamma:
            read_s = self.read_s if self.choice.prefill else 0.0
            self.floor.observe(max(seconds - read_s, 0.0), committed)
        self.read_s = 0.0

    def observe_unverified(
        self, source: DrafterKind, drafted: int, agreed: int, committed: int
    ) -> None:
        """A source that was not chosen had `drafted` candidates ready, of which the first
        `agreed` equal the `committed` tokens the step committed. The target verified none
        of them, but its committed tokens say how far they would have been accepted (free
        for prompt lookup, whose candidates exist at every step with a match)."""
        if source == self.choice.source or not drafted:
            return
        self.acceptance.observe_unverified(source, drafted, agreed, committed)

    def observe_draft(self, choice: Choice, drafted: int, seconds: float) -> None:
        """The model source drafted `drafted` candidates for `choice` in `seconds` of forward
        passes: a first draft's time includes the prefill of the context the choice was
        made in, a catch-up's the tokens of the skipped steps (see `CostModel.observe_draft`).
        Drafts of other sources are not timed."""
        if not drafted or choice.source != self.model_source:
            return
        prefilled = self.context if choice.prefill else None
        self.read_s = self.costs.observe_draft(drafted, seconds, prefilled, choice.catch_up)
