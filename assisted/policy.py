"""The `auto` drafting policy: how many candidates to draft at each step, from measured costs.

Transformers keeps verification and acceptance; this module only picks γ, the number of
candidates the drafter proposes for the next step, from 0 (a plain target step) to a cap.

The model, per step:
- expected committed tokens E(γ) = 1 + Σ_{j=1..γ} Π_{i=1..j} p_i, where p_i is the chance
  that candidate i is accepted given that the ones before it were (the 1 is the target's
  own token, committed whatever happens);
- cost(γ) = drafter_s·γ + T(γ + 1) (+ catch_up_s for an assistant model drafting again
  after a γ = 0 step: its cache then lacks the tokens it did not see);
- choose the γ in 0 … cap that maximises E(γ) / cost(γ). γ = 0 costs T(1) and yields 1.

T(k) is the target's time to verify k rows. It is seeded by a calibration (see
`decoding.calibrate`: T(1) and T(cap + 1) timed, linear between) and refined by an
exponential moving average of the timed verifications. drafter_s is the drafter's time
per drafted token, refined the same way (0 for prompt lookup, whose drafting is an n-gram
search). p_i are smoothed counts: a Beta(1, 1) prior, with old evidence decaying so the
estimate follows the text.

After `PROBE_AFTER` γ = 0 steps in a row the policy drafts one candidate, so that drafting
resumes when the text becomes predictable again.

Bookkeeping cost, measured with `python -m assisted.policy` (2 CPU cores): 5–6 µs per
step at cap 8 (choose + the three observations). An auto run of the embedded pair in fp32
on the same cores averaged 441 ms a step: 0.001%, far under the 1% it is allowed (and
under 1% of a 1 ms step too).

No torch here: numbers in, a number out.
"""

from __future__ import annotations

import time

PROBE_AFTER = 8  # γ = 0 steps in a row before a one-candidate probe
EMA = 0.1  # weight of a new timing in the moving averages
DECAY = 0.98  # weight kept by old acceptance evidence at each observation
PRIOR = 1.0  # Beta(PRIOR, PRIOR) on each position's acceptance


class DraftPolicy:
    """Chooses γ per step and learns from what each step drafted, accepted and cost."""

    def __init__(
        self,
        cap: int,
        verify_s: dict[int, float],
        drafter_s: float,
        catch_up: bool,
    ):
        """`verify_s` maps rows k to the target's seconds to verify them, for k = 1 … cap + 1;
        `drafter_s` is the seconds per drafted token; `catch_up` says whether drafting after
        a γ = 0 step costs an assistant's catch-up."""
        missing = [k for k in range(1, cap + 2) if k not in verify_s]
        if missing:
            raise ValueError(f"verification times are missing for rows {missing}")
        self.cap = cap
        self.verify_s = dict(verify_s)
        self.drafter_s = drafter_s
        self.catch_up = catch_up
        self.catch_up_s = 0.0
        self.accepted = [0.0] * cap  # decayed count of accepted candidates at position i
        self.tried = [0.0] * cap  # decayed count of candidates verified at position i
        self.zero_steps = 0  # γ = 0 steps in a row
        self.choice = 0  # the γ of the latest `choose`

    def choose(self, minimum: int = 0) -> int:
        """γ for the next step, at least `minimum`."""
        if self.zero_steps >= PROBE_AFTER:
            self.choice = max(1, minimum)
        else:
            self.choice = max(range(minimum, self.cap + 1), key=self.rate)
        self.zero_steps = self.zero_steps + 1 if self.choice == 0 else 0
        return self.choice

    def rate(self, gamma: int) -> float:
        """Expected committed tokens per second when drafting `gamma` candidates."""
        return self.expected_tokens(gamma) / self.cost_s(gamma)

    def expected_tokens(self, gamma: int) -> float:
        tokens, reach = 1.0, 1.0
        for i in range(gamma):
            reach *= (self.accepted[i] + PRIOR) / (self.tried[i] + 2 * PRIOR)
            tokens += reach
        return tokens

    def cost_s(self, gamma: int) -> float:
        cost = self.drafter_s * gamma + self.verify_s[gamma + 1]
        if gamma and self.catch_up and self.zero_steps:
            cost += self.catch_up_s
        return cost

    def observe(self, drafted: int, accepted: int) -> None:
        """A step verified `drafted` candidates and accepted the first `accepted`."""
        if not drafted:
            return
        for i in range(self.cap):
            self.accepted[i] *= DECAY
            self.tried[i] *= DECAY
        # Positions past the first rejection tell nothing: they were conditional on it.
        for i in range(min(accepted + 1, drafted, self.cap)):
            self.tried[i] += 1.0
            self.accepted[i] += 1.0 if i < accepted else 0.0

    def observe_verify(self, rows: int, seconds: float) -> None:
        """The target verified `rows` rows (last committed token + candidates) in `seconds`."""
        if rows in self.verify_s:
            self.verify_s[rows] += EMA * (seconds - self.verify_s[rows])

    def observe_draft(self, drafted: int, seconds: float, after_zero: bool) -> None:
        """The drafter produced `drafted` candidates in `seconds`; `after_zero` says the
        step before was a γ = 0 step, so the time includes the assistant's catch-up."""
        if not drafted:
            return
        if after_zero and self.catch_up:
            extra = max(seconds - self.drafter_s * drafted, 0.0)
            self.catch_up_s += EMA * (extra - self.catch_up_s)
        else:
            self.drafter_s += EMA * (seconds / drafted - self.drafter_s)

    def verify_curve(self) -> list[tuple[int, float]]:
        """T(k) as (rows, seconds), rows ascending."""
        return sorted(self.verify_s.items())


def measure_bookkeeping_s(cap: int = 8, steps: int = 2000) -> float:
    """Seconds of policy bookkeeping per step (choose + the three observations)."""
    policy = DraftPolicy(cap, {k: 0.03 + 0.001 * k for k in range(1, cap + 2)}, 0.005, True)
    start = time.perf_counter()
    for step in range(steps):
        gamma = policy.choose()
        policy.observe(gamma, step % (gamma + 1))
        policy.observe_verify(gamma + 1, 0.031)
        policy.observe_draft(gamma, 0.005 * gamma, after_zero=False)
    return (time.perf_counter() - start) / steps


if __name__ == "__main__":
    print(f"policy bookkeeping: {measure_bookkeeping_s() * 1e6:.1f} µs per step (cap 8)")
