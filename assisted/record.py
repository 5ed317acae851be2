"""The raw record of one decoding run: what happened at each target step, nothing derived.

Plain data only (no torch), so the UI, the CLI, the benchmark and `stats` can all read it.
Every number shown anywhere is computed from these fields by `assisted.stats`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Mode = Literal["plain", "assisted"]


@dataclass(frozen=True)
class Step:
    """One target forward pass and the tokens it committed.

    `t_s` is seconds since the run started (prompt encoded, clock read after a device
    synchronisation). `drafted` is how many candidates the target verified in this pass
    (0 in plain decoding); `accepted` how many of them it kept. The step emits
    `accepted + 1` tokens unless EOS or the length limit cuts it.
    """

    token_ids: tuple[int, ...]
    text: str
    drafted: int
    accepted: int
    t_s: float


@dataclass
class RunRecord:
    """Everything recorded about one run of one prompt in one mode."""

    mode: Mode
    drafter: str | None
    prompt_tokens: int
    steps: list[Step] = field(default_factory=list)
    # Seconds from start to the end of generate(), device synchronised.
    total_s: float = 0.0
    # Wall time of each drafter forward pass after its prefill (assistant models only);
    # used to measure the cost ratio c of the speculative-decoding model.
    draft_forward_s: list[float] = field(default_factory=list)
    stopped: bool = False
    # What the assistant model computed in ("int8", "bfloat16", ...); None without one.
    assistant_precision: str | None = None

    @property
    def token_ids(self) -> list[int]:
        return [t for step in self.steps for t in step.token_ids]

    @property
    def text(self) -> str:
        return "".join(step.text for step in self.steps)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RunRecord:
        steps = [Step(**{**s, "token_ids": tuple(s["token_ids"])}) for s in data.get("steps", [])]
        return cls(**{**data, "steps": steps})
