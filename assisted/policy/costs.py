"""The `auto` policy's cost model: how long a step takes, by source and draft length.

cost(γ) = call_s + drafter_s·γ + T(γ + 1), plus catch_up_s for an assistant model that
skipped the steps before (its cache then lacks the tokens it did not see). A plain step
(γ = 0) costs T(1).
- T(k) is the target's time to verify k rows (the last committed token + k − 1
  candidates). It is seeded by a calibration (`assisted.engine.calibration.calibrate`: T(1),
  T(2) and T(cap + 1) timed, linear between) and refined by the timed verifications, each in two
  ways: its own row moves toward it (an exponential moving average), and every row moves
  by the share the timing says the level of all moved. Other work on a shared machine
  slows every row alike, and most rows are seldom verified: an `auto` run rarely takes a
  plain step, so T(1), refined only by its own row, would keep for dozens of runs what one
  slow patch left, and every plain step and modelled speedup is priced from it. The level
  cannot fix the curve's shape, though: a few slow plain steps can lift T(1) above the
  cheapest multi-row row for the rest of a benchmark. So a plain run's own steps set T(1),
  the median of its passes (`PlainSteps`); `python -m assisted.lab.cost_fit --plain`
  replays recorded steps to check it. Both weights (`LEVEL_EMA`, `SHAPE_EMA`) are 0.1: a
  faster level moves every row alike, so it hardly moves the policy's choices, and it lets
  T(1) swing wider between plain runs (docs/lab-notes.md: "T(k) kept level", "Plain runs
  set T(1)").
- drafter_s is a source's time per drafted token, refined the same way. Prompt lookup's is
  0: its n-gram search runs at every step whatever is chosen, so choosing it costs only the
  verification. Where the model source's drafts were timed by length (replayed CUDA
  graphs: a short draft pays the launch and the read a long one pays), a draft of γ costs
  drafter_s·γ·shape(γ), shape(γ) its time per token over the longest draft's, so that it
  starts at its own timing; the refinements move drafter_s, hence every length alike.
- call_s is the assistant's time per drafting call outside its forward passes (its own
  generate() loop); catch_up_s what reading the skipped steps' tokens adds to a call.
- prefill_s is the assistant's time per token of context it reads before its first draft,
  and prices any read of tokens it has not seen (`read_s`: its first read of the prompt,
  its catch-up after skipped steps); the policy weighs that read before starting or
  resuming the assistant at all (`assisted.policy.choice`). It is calibrated, then learnt
  as T(k) is, by a moving average: each first draft moves it toward its own time per
  token, a long read more than a short one (`READ_EMA`, `FULL_READ`). One read is a noisy
  timing on a shared machine (5–11 ms a token for the same work, seen on one 2-core CPU),
  and the next run's decision to start the assistant rests on it.

No torch here: seconds in, seconds out.
"""

from __future__ import annotations

import statistics

from assisted.core.drafters import DrafterKind

EMA = 0.1  # weight of a new timing in the moving averages
LEVEL_EMA = SHAPE_EMA = EMA  # ... of T(k)'s level and of a T(k)'s own row (the note)
# A first draft's read of `FULL_READ` tokens or more moves the prefill time per token by
# `READ_EMA` of its distance from its own; a shorter read by that share of it, as its
# time holds more of the call's fixed costs.
READ_EMA = 0.25
FULL_READ = 256
# The fewest one-row passes whose median may stand for T(1): a stopped run's few do not,
# nor a warm-up run's (`assisted.core.settings.WARMUP_TOKENS`, one pass fewer), paying first calls.
PLAIN_STEPS = 8


class CostModel:
    """Seconds per step by source and γ, refined by the timings of the run's steps."""

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
        module's note; None: 1 at every γ)."""
        missing = [k for k in range(1, cap + 2) if k not in verify_s]
        if missing:
            raise ValueError(f"verification times are missing for rows {missing}")
        self.verify_s = dict(verify_s)
        self.drafter_s = dict(drafter_s)
        self.model_source = model_source
        self.prefill_s = prefill_s
        self.draft_shape = dict(draft_shape or {})
        self.catch_up_s = 0.0
        self.call_s = 0.0  # the model source's seconds per drafting call beyond its passes
        self.verified = False  # a verification refined T(k): its row, and all rows' level
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
        every T(k) moves by the share `LEVEL_EMA` of the timing's ratio to T(rows) (the
        level), then T(rows) by `SHAPE_EMA` toward the timing (its own row)."""
        if rows not in self.verify_s:
            return
        level = 1.0 + LEVEL_EMA * (seconds / self.verify_s[rows] - 1.0)
        for k in self.verify_s:
            self.verify_s[k] *= level
        self.verify_s[rows] += SHAPE_EMA * (seconds - self.verify_s[rows])
        self.verified = True

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
        """The model source drafted `drafted` (at least one) candidates in `seconds` of
        forward passes; the rest of its call's wall time refines `call_s`. Where the call
        first prefilled `prefilled` tokens of context, the excess over the drafting refines
        the prefill time per token (for this run and the pair's next ones: the module's
        note); a catch-up's excess refines `catch_up_s`; any other draft refines the time
        per drafted token. Returns that excess: the seconds the call spent reading tokens
        it had not seen (0 for a draft that read none)."""
        if self.last_call_s:
            self.call_s += EMA * (max(self.last_call_s - seconds, 0.0) - self.call_s)
            self.last_call_s = 0.0
        per_token = self.drafter_s[self.model_source]
        shape = self._shape(self.model_source, drafted)
        extra = max(seconds - per_token * drafted * shape, 0.0)
        if prefilled is not None:
            measured = extra / max(prefilled, 1)
            weight = READ_EMA * min(1.0, prefilled / FULL_READ) if self.prefill_s else 1.0
            self.prefill_s += weight * (measured - self.prefill_s)
            return extra
        if catch_up:
            self.catch_up_s += EMA * (extra - self.catch_up_s)
            return extra
        self.drafter_s[self.model_source] += EMA * (seconds / (drafted * shape) - per_token)
        return 0.0

    def verify_curve(self) -> list[tuple[int, float]]:
        """T(k) as (rows, seconds), rows ascending."""
        return sorted(self.verify_s.items())

    def observed_verify_s(self) -> dict[int, float]:
        """T(k) as this run's verifications refined it: every row once one was timed (each
        moves the level of all), none before."""
        return dict(self.verify_curve()) if self.verified else {}


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
        """T(1) as the run's passes time it; None for a run of too few (`PLAIN_STEPS`)."""
        return statistics.median(self.seconds) if len(self.seconds) >= PLAIN_STEPS else None
