"""Why the assistant sits out a step, and for how long at most: the `auto` policy's holds,
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

No torch here: seconds in, a verdict out.
"""

from __future__ import annotations

from assisted.core.held_back import HeldBack

# The floor: a plain step's timing varies by about this share around the pair's T(1)
# (docs/auto-policy.md, constants), so the assistant's steps are behind plain only beyond
# it ...
FLOOR_MARGIN = 0.15
FLOOR_STEPS = 3  # ... over at least this many of its steps,
FLOOR_DECAY = 0.7  # ... each older step weighing this share of the one after it.


class Floor:
    """The seconds per committed token of the steps the assistant drafted in a run, recent
    steps weighing most, against a plain step's."""

    def __init__(self) -> None:
        self.seconds = 0.0  # decayed seconds of the assistant's steps
        self.tokens = 0.0  # decayed tokens they committed
        self.steps = 0  # how many there were

    def observe(self, seconds: float, tokens: int) -> None:
        """A step the assistant drafted took `seconds` and committed `tokens`."""
        self.seconds = FLOOR_DECAY * self.seconds + seconds
        self.tokens = FLOOR_DECAY * self.tokens + tokens
        self.steps += 1

    def behind(self, plain_step_s: float) -> bool:
        """Whether those steps ran slower per token than plain steps of `plain_step_s`,
        beyond the noise."""
        if self.steps < FLOOR_STEPS:
            return False
        return self.seconds > (1.0 + FLOOR_MARGIN) * plain_step_s * self.tokens

    def excess_s(self, plain_step_s: float) -> float:
        """The seconds per token its steps ran beyond plain steps of `plain_step_s`."""
        if not self.tokens:
            return 0.0
        return max(self.seconds / self.tokens - plain_step_s, 0.0)


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
