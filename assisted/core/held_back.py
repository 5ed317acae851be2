"""Why the `auto` policy kept the assistant from drafting at a step: the one place that names
the reasons and says them in words (`assisted.policy.choice` decides them; a step's record
keeps its reason, `Step.held_back`).

- FIRST_DRAFT: the assistant has not drafted in this run, and its read of the context (the
  prompt and what was committed since) costs more than drafting could be expected to save
  over the tokens the run can expect yet.
- WAITING: only in records written before the policy's wait rule (once the read could pay,
  wait until the time drafting would have saved reached half its cost) was folded into the
  first-draft rule; kept so that they still read (a benchmark's runs.jsonl, replayed by
  `python -m lab.policy_fit`).
- CATCH_UP: the assistant skipped steps, and its read of their tokens costs more than
  drafting could save over the tokens left.
- FLOOR: the run's steps with the assistant ran slower per committed token than plain
  decoding does, by more than the noise of a step's timing.

Each value is its name in the JSON and the API; the enum is a `str`, so it serialises as
it and pickles across ZeroGPU's process boundary. No torch here.
"""

from __future__ import annotations

from enum import StrEnum


class HeldBack(StrEnum):
    FIRST_DRAFT = "first-draft"
    WAITING = "waiting"
    CATCH_UP = "catch-up"
    FLOOR = "floor"

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        """The reason for people, completing "the assistant did not draft because …"."""
        return {
            HeldBack.FIRST_DRAFT: "its first read of the prompt could not pay over the tokens left",
            HeldBack.WAITING: "its first read of the prompt had not yet paid for itself",
            HeldBack.CATCH_UP: "its catch-up on skipped steps could not pay over the tokens left",
            HeldBack.FLOOR: "the run's steps with it ran slower than plain decoding",
        }[self]
