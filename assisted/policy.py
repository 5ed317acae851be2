"""The `auto` drafting policy: where each step's candidates come from and how many, from
measured costs.

Transformers keeps verification and acceptance; this module only picks, before each step,
a source (the assistant model, or a prompt-lookup match: an n-gram of the prompt or of the
output so far) and γ, the number of candidates it proposes, from 0 (a plain target step)
to a cap.

The model, per step and source:
- expected committed tokens E(γ) = 1 + Σ_{j=1..γ} Π_{i=1..j} p_i, where p_i is the chance
  that candidate i is accepted given that the ones before it were (the 1 is the target's
  own token, committed whatever happens);
- cost(γ) = call_s + drafter_s·γ + T(γ + 1), plus catch_up_s for an assistant model that
  skipped the steps before (its cache then lacks the tokens it did not see); call_s is the
  assistant's time per drafting call outside its forward passes (its own generate() loop);
- choose the source and γ that maximise E(γ) / cost(γ), E taken optimistically (each p_i
  one standard deviation above its estimate: a source seldom tried gets tried, and one
  with much evidence is taken at its word). γ = 0 costs T(1) and yields 1.

T(k) is the target's time to verify k rows. It is seeded by a calibration (see
`decoding.calibrate`: T(1) and T(cap + 1) timed, linear between) and refined by an
exponential moving average of the timed verifications. drafter_s is a source's time per
drafted token, refined the same way. Prompt lookup's is 0: its n-gram search runs at every
step whatever is chosen, so choosing it costs only the verification. p_i are smoothed
counts per source, each position's prior being the estimate of the position before it,
with old evidence decaying so the estimate follows the text. Each source keeps two sets:
one for the step after its draft agreed with everything the target committed (a streak,
as when the answer copies a passage) and one for any other step. A lookup match that was
not chosen is scored too, against the tokens the step committed: that costs nothing, so
the lookup's estimates stay current while the assistant drafts. A run may start from what
the pair's earlier runs saw, counted as a few observations only (`HISTORY_WEIGHT`), so
that the text at hand soon outweighs it.

An assistant model must first read the whole context (its prefill) before it drafts at all,
and nobody knows in advance how long the answer will be: the run's remaining budget (max
new tokens) is only an upper bound. So the prefill is weighed as in the ski-rental problem.
The assistant never starts if the time it would save over the whole remaining budget
cannot repay the prefill; otherwise it starts once the time it would have saved on the
tokens committed so far (plus the next step's) reaches the prefill's cost. A 17-token answer
after a 700-token prompt (a prefill of about a second on a CPU) thus ends before the
assistant starts, drafting from prompt-lookup matches or not at all, while a long answer
pays at most the prefill's cost again for the wait: never more than twice what the better
choice in hindsight would have cost.

After `PROBE_AFTER` γ = 0 steps in a row the policy drafts one candidate, so that drafting
resumes when the text becomes predictable again; and an assistant model left unused for
`PROBE_AFTER` steps drafts once at its best length, since nothing else tells how well it
would do now (a lookup match is scored whether chosen or not; the assistant cannot be).

Bookkeeping cost, measured with `python -m assisted.policy` (2 CPU cores): see
`measure_bookkeeping_s`; a few µs per step against steps of tens of milliseconds or more.

No torch here: numbers in, a choice out.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from assisted.drafters import DrafterKind

PROBE_AFTER = 8  # γ = 0 steps in a row before a one-candidate probe
EMA = 0.1  # weight of a new timing in the moving averages
DECAY = 0.98  # weight kept by old acceptance evidence at each observation
PRIOR_WEIGHT = 2.0  # observations a position's prior counts for (Beta(1, 1) at the first)
STREAK_TOKENS = 2  # a draft agreeing on fewer tokens than this starts no streak
HISTORY_WEIGHT = 4.0  # observations that a pair's earlier runs count for in a new run

Counts = tuple[list[float], list[float]]  # (accepted, tried) per draft position


@dataclass(frozen=True)
class Choice:
    """What one step drafts: `gamma` candidates from `source` (None: a plain step).
    `catch_up` and `prefill` say what the assistant model must read first: the tokens of
    the steps it skipped, or the whole context because it has not drafted yet."""

    source: str | None
    gamma: int
    catch_up: bool = False
    prefill: bool = False


PLAIN = Choice(None, 0)


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

    def expected_tokens(self, gamma: int, optimistic: bool = False) -> float:
        """E(γ) from the posterior means; `optimistic` takes each position's mean plus one
        standard deviation, so that little evidence reads as a reason to try.

        Each position's prior is the estimate of the position before it (the first one's
        is 1/2): a position rarely verified, because drafts seldom reach it, reads as
        "like the one before" rather than as a coin flip, so that a well-accepted drafter
        is tried at longer lengths and learns how far its drafts hold."""
        tokens, reach, prior = 1.0, 1.0, 0.5
        for i in range(gamma):
            n = self.tried[i] + PRIOR_WEIGHT
            mean = (self.accepted[i] + PRIOR_WEIGHT * prior) / n
            prior = mean
            if optimistic:
                mean = min(1.0, mean + math.sqrt(mean * (1 - mean) / (n + 1)))
            reach *= mean
            tokens += reach
        return tokens

    def observe(self, drafted: int, accepted: int) -> None:
        """A step verified `drafted` candidates and accepted the first `accepted`."""
        for i in range(len(self.tried)):
            self.accepted[i] *= DECAY
            self.tried[i] *= DECAY
        # Positions past the first rejection tell nothing: they were conditional on it.
        for i in range(min(accepted + 1, drafted, len(self.tried))):
            self.tried[i] += 1.0
            self.accepted[i] += 1.0 if i < accepted else 0.0

    def counts(self) -> Counts:
        return list(self.accepted), list(self.tried)


class DraftPolicy:
    """Chooses each step's source and γ, and learns from what each step drafted, accepted
    and cost."""

    def __init__(
        self,
        cap: int,
        verify_s: dict[int, float],
        drafter_s: dict[str, float],
        model_source: str | None = None,
        prefill_s: float = 0.0,
        history: dict[str, Counts] | None = None,
    ):
        """`verify_s` maps rows k to the target's seconds to verify them, for k = 1 … cap + 1;
        `drafter_s` maps each source to its seconds per drafted token; `model_source` names
        the source that runs a model with a cache of its own (it pays a prefill before its
        first draft and a catch-up after skipped steps), and `prefill_s` is that model's
        seconds per token of context it prefills; `history` holds acceptance counts per
        source from the pair's earlier runs."""
        missing = [k for k in range(1, cap + 2) if k not in verify_s]
        if missing:
            raise ValueError(f"verification times are missing for rows {missing}")
        self.cap = cap
        self.verify_s = dict(verify_s)
        self.drafter_s = dict(drafter_s)
        self.model_source = model_source
        self.prefill_s = prefill_s
        self.catch_up_s = 0.0
        self.call_s = 0.0  # the model source's seconds per drafting call beyond its passes
        self.observed_rows: set[int] = set()  # the rows k whose T(k) a verification refined
        self.last_call_s = 0.0  # the wall time of the latest drafting call
        history = history or {}
        # Per source, one estimate after a step where its draft agreed with every token the
        # target committed (a streak: text it predicts well, such as a passage being copied)
        # and one after any other step.
        self.acceptance = {
            (name, streak): Acceptance(cap, history.get(_history_key(name, streak)))
            for name in drafter_s
            for streak in (False, True)
        }
        self.streak = dict.fromkeys(drafter_s, False)
        self.started = False  # the model source has drafted, so it has a cache
        self.behind = False  # ... and the step before did not use it
        self.zero_steps = 0  # γ = 0 steps in a row
        self.idle = 0  # steps in a row without the model source
        self.choice = PLAIN  # the latest `choose`
        self.context = 0  # the context of the latest `choose`
        self.committed = 0  # tokens the run's steps have committed

    def choose(self, offers: dict[str, int], tokens_left: int, context: int) -> Choice:
        """The next step's choice. `offers` maps each source able to draft now to the most
        candidates it can give (a lookup match's length, the room before the length limit);
        `tokens_left` is the most tokens the run can still commit and `context` the tokens
        an assistant model would prefill if it started now."""
        self.context = context
        offers = {name: min(most, self.cap) for name, most in offers.items() if most > 0}
        if self.model_source in offers and not self._model_pays(offers, tokens_left, context):
            del offers[self.model_source]
        choice, best = PLAIN, self.rate(None, 0)
        for source, most in offers.items():
            gamma, rate = self.best(source, most, optimistic=True)
            if rate > best:
                choice, best = self._choice(source, gamma), rate
        model = self.model_source
        if choice.gamma == 0 and self.zero_steps >= PROBE_AFTER and offers:
            source = max(offers, key=lambda name: self.rate(name, 1))
            choice = self._choice(source, 1)
        elif (
            self.started
            and self.idle >= PROBE_AFTER
            and choice.source != model
            and model in offers  # not when the length limit leaves it no room
        ):
            choice = self._choice(model, self.best(model, offers[model])[0])
        self.zero_steps = self.zero_steps + 1 if choice.gamma == 0 else 0
        self.idle = 0 if choice.source == model else self.idle + 1
        self.choice = choice
        return choice

    def rate(self, source: str | None, gamma: int, optimistic: bool = False) -> float:
        """Expected committed tokens per second when `source` drafts `gamma` candidates."""
        if source is None or gamma == 0:
            return 1.0 / self.verify_s[1]
        tokens = self._acceptance(source).expected_tokens(gamma, optimistic)
        return tokens / self.cost_s(source, gamma)

    def best(self, source: str, most: int, optimistic: bool = False) -> tuple[int, float]:
        """The γ in 1 … `most` with the highest rate for `source`, and that rate."""
        rates = ((g, self.rate(source, g, optimistic)) for g in range(1, most + 1))
        return max(rates, key=lambda pair: pair[1])

    def expected_tokens(self, source: str | None, gamma: int) -> float:
        return 1.0 if source is None else self._acceptance(source).expected_tokens(gamma)

    def _acceptance(self, source: str) -> Acceptance:
        return self.acceptance[source, self.streak[source]]

    def cost_s(self, source: str | None, gamma: int) -> float:
        if source is None or gamma == 0:
            return self.verify_s[1]
        cost = self.drafter_s[source] * gamma + self.verify_s[gamma + 1]
        if source == self.model_source:
            cost += self.call_s
        if self._catches_up(source):
            cost += self.catch_up_s
        return cost

    def _catches_up(self, source: str) -> bool:
        """Whether `source` must first read the tokens of the steps it skipped."""
        return source == self.model_source and self.started and self.behind

    def _model_pays(self, offers: dict[str, int], tokens_left: int, context: int) -> bool:
        """Whether the model source may draft: always once it has a cache; before that, only
        if the time it saves over `tokens_left` tokens repays prefilling `context` tokens,
        and once the time it would have saved so far reaches that cost (the module's note).
        Its acceptance is taken optimistically here: until it drafts, the run has no
        evidence of its own, and a pessimistic start would never gather any."""
        if self.started:
            return True
        model = self.model_source
        _, with_model = self.best(model, offers[model], optimistic=True)
        without = max(
            [self.rate(None, 0)]
            + [self.best(name, most)[1] for name, most in offers.items() if name != model]
        )
        if with_model <= without:
            return False
        saved_per_token_s = 1.0 / without - 1.0 / with_model
        prefill_s = self.prefill_s * context
        if tokens_left * saved_per_token_s <= prefill_s:
            return False
        return (self.committed + 1) * saved_per_token_s >= prefill_s

    def _choice(self, source: str, gamma: int) -> Choice:
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
        if source is not None and drafted:
            self._acceptance(source).observe(drafted, accepted)
            self.streak[source] = accepted == drafted >= STREAK_TOKENS
        if source is not None and source == self.model_source:
            self.started, self.behind = True, False
        else:
            self.behind = self.started

    def observe_unverified(self, source: str, drafted: int, agreed: int, committed: int) -> None:
        """A source that was not chosen had `drafted` candidates ready, of which the first
        `agreed` equal the `committed` tokens the step committed. The target verified none
        of them, but its committed tokens say how far they would have been accepted (free
        for prompt lookup, whose candidates exist at every step with a match): up to the
        first disagreement, or as far as the committed tokens reach."""
        if source == self.choice.source or not drafted:
            return
        seen = min(drafted, agreed + 1 if agreed < committed else agreed)
        self._acceptance(source).observe(seen, min(agreed, seen))
        self.streak[source] = agreed >= max(min(drafted, committed), STREAK_TOKENS)

    def observe_verify(self, rows: int, seconds: float) -> None:
        """The target verified `rows` rows (last committed token + candidates) in `seconds`."""
        if rows in self.verify_s:
            self.verify_s[rows] += EMA * (seconds - self.verify_s[rows])
            self.observed_rows.add(rows)

    def observe_draft(self, choice: Choice, drafted: int, seconds: float) -> None:
        """The model source drafted `drafted` candidates for `choice` in `seconds` of forward
        passes; the rest of its call's wall time refines `call_s`. A first
        draft's excess over the drafting is the prefill of the context, which becomes the
        prefill time per token (for the pair's next runs); a catch-up's excess refines
        `catch_up_s`; any other draft refines the time per drafted token."""
        if not drafted or choice.source != self.model_source:
            return
        if self.last_call_s:
            self.call_s += EMA * (max(self.last_call_s - seconds, 0.0) - self.call_s)
            self.last_call_s = 0.0
        per_token = self.drafter_s[choice.source]
        if choice.prefill:
            self.prefill_s = max(seconds - per_token * drafted, 0.0) / max(self.context, 1)
        elif choice.catch_up:
            extra = max(seconds - per_token * drafted, 0.0)
            self.catch_up_s += EMA * (extra - self.catch_up_s)
        else:
            self.drafter_s[choice.source] += EMA * (seconds / drafted - per_token)

    def observe_call(self, seconds: float) -> None:
        """The latest drafting call of the model source took `seconds` of wall time, its
        forward passes included (they are timed apart and passed to `observe_draft`)."""
        self.last_call_s = seconds

    def verify_curve(self) -> list[tuple[int, float]]:
        """T(k) as (rows, seconds), rows ascending."""
        return sorted(self.verify_s.items())

    def observed_verify_s(self) -> dict[int, float]:
        """T(k) for the rows k that this run's verifications refined."""
        return {k: self.verify_s[k] for k in sorted(self.observed_rows)}

    def history(self) -> dict[str, Counts]:
        """Acceptance counts per source and streak, for the pair's next run."""
        return {
            _history_key(name, streak): acceptance.counts()
            for (name, streak), acceptance in self.acceptance.items()
        }


def _history_key(source: str, streak: bool) -> str:
    return f"{source} streak" if streak else source


def measure_bookkeeping_s(cap: int = 8, steps: int = 2000) -> float:
    """Seconds of policy bookkeeping per step (choose + the three observations), with two
    sources on offer at every step."""
    verify_s = {k: 0.03 + 0.001 * k for k in range(1, cap + 2)}
    assistant, lookup = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP
    policy = DraftPolicy(cap, verify_s, {assistant: 0.005, lookup: 0.0}, assistant)
    offers = {assistant: cap, lookup: cap // 2}
    start = time.perf_counter()
    for step in range(steps):
        choice = policy.choose(offers, tokens_left=1000, context=100)
        policy.observe(choice.gamma, step % (choice.gamma + 1))
        policy.observe_verify(choice.gamma + 1, 0.031)
        policy.observe_draft(choice, choice.gamma, 0.005 * choice.gamma)
    return (time.perf_counter() - start) / steps


if __name__ == "__main__":
    print(f"policy bookkeeping: {measure_bookkeeping_s() * 1e6:.1f} µs per step (cap 8)")
