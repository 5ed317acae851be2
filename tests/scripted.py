"""A scripted `auto` policy for tests: the drafts it chooses are given, not weighed."""

from __future__ import annotations

from assisted.engine.drafters import seam
from assisted.policy.choice import Choice, DraftPolicy


class Scripted(DraftPolicy):
    """A policy that drafts the lengths it is given, in turn, from the sources it is given
    in turn (by default the assistant where one is offered), and remembers what it saw."""

    def __init__(self, lengths, sources=(None,)):
        sources_s = {seam.ASSISTANT: 0.0, seam.LOOKUP: 0.0}
        super().__init__(8, {k: 0.01 for k in range(1, 10)}, sources_s, seam.ASSISTANT)
        self.lengths = lengths
        self.sources = sources
        self.seen: list[tuple[int, int]] = []
        self.offered: list[dict[str, int]] = []

    def choose(self, offers, tokens_left, context, match_length=0):
        step = len(self.seen)
        gamma = self.lengths[step % len(self.lengths)]
        source = self.sources[step % len(self.sources)]
        if source is None:
            source = seam.ASSISTANT if seam.ASSISTANT in offers else seam.LOOKUP
        gamma = min(gamma, offers.get(source, 0))
        self.offered.append(offers)
        self.choice = Choice(source, gamma) if gamma else Choice(None, 0)
        return self.choice

    def observe(self, drafted, accepted):
        self.seen.append((drafted, accepted))
