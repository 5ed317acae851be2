"""How much GPU time a ZeroGPU call asks for: what this app measured, times a stated margin.

ZeroGPU charges the requested duration against the visitor's quota when it schedules the
call (`spaces/zero/client.py`, `schedule(duration=...)`), and may abort a call that runs
past it. Over-asking turns visitors away sooner (a free visitor's quota is minutes a day);
under-asking loses the run. So a call asks for what the calls before it measured, times
MARGIN:

- the timed runs: the new tokens at the pair's latest seconds per token, plain and assisted
  (a run's `total_s` over its new tokens: prefill included);
- a benchmark's sampling check: each of its samples as CHECK_SAMPLE_TOKENS assisted tokens;
- what a call does before them: loading the pair, unless it was loaded at start-up; and the
  set-up (preparing the pair, the warm-up, and the calibration until a call has kept its
  costs on disk), as the latest call that did it measured. The set-up is counted on every
  call: ZeroGPU may hand the call a fresh fork, which has to warm up again, and the app
  cannot know beforehand;
- a pair not measured yet: FIRST_S_PER_TOKEN, FIRST_SETUP_S and FIRST_LOAD_S, generous.

Each GPU call reports what it measured (`CallReport`, its last yield, which the handler
keeps and does not show). Imports neither torch nor gradio: it runs in the main process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assisted import stats
from assisted.examples import Example
from assisted.record import RunRecord
from assisted.settings import RunSettings

if TYPE_CHECKING:
    from assisted.sampling_check import CheckSettings

MARGIN = 1.5  # the request is this many times the estimate: runs vary by up to 1.5x
FLOOR_S = 20  # never ask for less: scheduling and the fork's start cost seconds too
FIRST_S_PER_TOKEN = 0.1  # a pair never timed here: a 7-9B target in bf16 on a shared GPU
FIRST_SETUP_S = 30.0  # warm-up and calibration of a pair never timed here
FIRST_LOAD_S = 90.0  # loading a pair inside a call before any load was timed
# A sampling check's sample, in assisted tokens of a benchmark's runs: a run of 3 tokens,
# whose prefill costs most. The embedded pair's check drew 400 in 393 s on a busy 2-core
# AMD EPYC CPU, about 1 s each (the two plain sets, drawn in batches, far less), where its
# runs take about 0.2 s per token: 5 tokens, and 6 to spare.
CHECK_SAMPLE_TOKENS = 6


@dataclass(frozen=True)
class CallReport:
    """What one GPU call measured, for the next call's request. Seconds are None for work
    the call did not do (the pair was in memory; the process was warm)."""

    pair: str
    load_s: float | None
    setup_s: float | None
    plain_s_per_token: float | None = None
    assisted_s_per_token: float | None = None


@dataclass
class _PairTimes:
    load_s: float | None = None
    setup_s: float | None = None
    plain_s_per_token: float | None = None
    assisted_s_per_token: float | None = None


@dataclass(frozen=True)
class Estimate:
    """A request: `seconds` to ask for, and the sum it came from, for the status line."""

    seconds: int
    estimate_s: float
    measured: bool  # False: the pair has no measured pace yet, so the figures are guesses

    def describe(self) -> str:
        basis = "measured here" if self.measured else "a first guess: not measured here yet"
        return (
            f"asks ZeroGPU for {self.seconds} s: {self.estimate_s:.0f} s estimated ({basis}) "
            f"× {MARGIN:g} margin"
        )


class GpuTimes:
    """What the GPU calls measured, by pair; shared by the tabs' handlers (threads)."""

    def __init__(self, max_s: int) -> None:
        self.max_s = max_s
        self._lock = threading.Lock()
        self._pairs: dict[str, _PairTimes] = {}

    def note(self, report: CallReport) -> None:
        with self._lock:
            times = self._pairs.setdefault(report.pair, _PairTimes())
            for name in ("load_s", "setup_s", "plain_s_per_token", "assisted_s_per_token"):
                if (value := getattr(report, name)) is not None:
                    setattr(times, name, value)

    def comparison(self, pair: str, new_tokens: int, preloaded: bool) -> Estimate:
        """The request for a comparison of `new_tokens` on `pair` (plain, then assisted)."""
        return self.runs(pair, new_tokens, new_tokens, preloaded)

    def runs(self, pair: str, plain_tokens: int, assisted_tokens: int, preloaded: bool) -> Estimate:
        """The request for a call that times `plain_tokens` of plain decoding and
        `assisted_tokens` of assisted decoding on `pair`, after its set-up."""
        with self._lock:
            times = self._pairs.get(pair, _PairTimes())
        plain = times.plain_s_per_token
        assisted = times.assisted_s_per_token or plain
        measured = plain is not None
        estimate = (
            plain_tokens * (plain or FIRST_S_PER_TOKEN)
            + assisted_tokens * (assisted or FIRST_S_PER_TOKEN)
            + (times.setup_s if times.setup_s is not None else FIRST_SETUP_S)
            + (0.0 if preloaded else times.load_s if times.load_s is not None else FIRST_LOAD_S)
        )
        seconds = min(self.max_s, max(FLOOR_S, math.ceil(MARGIN * estimate)))
        return Estimate(seconds, estimate, measured)

    def benchmark(
        self,
        pair: str,
        prompts: int,
        variants: int,
        settings: RunSettings,
        repeats: int,
        preloaded: bool,
        check: CheckSettings | None = None,
    ) -> Estimate:
        """The request for a call that benchmarks `prompts` prompts, each `repeats` times
        plain and with each of `variants` drafting variants, then runs the sampling
        `check`, if any."""
        tokens = prompts * repeats * settings.max_new_tokens
        checking = check.draws() * CHECK_SAMPLE_TOKENS if check is not None else 0
        return self.runs(pair, tokens, tokens * variants + checking, preloaded)

    def load_s(self, pair: str) -> float | None:
        """Seconds the latest call that loaded `pair` took to load it; None: none did."""
        with self._lock:
            return self._pairs.get(pair, _PairTimes()).load_s


def benchmark_calls(
    examples: list[Example],
    variants: Sequence[object],
    settings: RunSettings,
    repeats: int,
    times: GpuTimes,
    pair: str,
    preloaded: bool,
    check: CheckSettings | None = None,
) -> list[list[Example]]:
    """The prompts of each ZeroGPU call of a benchmark timing `variants` beside plain
    decoding: as many, in order, as the measured pace lets one call time within the limit
    (`times.max_s`), and at least one. The sampling `check` runs in the last call: one of
    its own, with no prompts, where it does not fit beside the last prompts."""
    calls: list[list[Example]] = []

    def fits(prompts: int, checking: CheckSettings | None = None) -> bool:
        estimate = times.benchmark(
            pair, prompts, len(variants), settings, repeats, preloaded, checking
        )
        return estimate.estimate_s * MARGIN <= times.max_s

    for example in examples:
        if calls and fits(len(calls[-1]) + 1):
            calls[-1].append(example)
        else:
            calls.append([example])
    if check is not None and calls and not fits(len(calls[-1]), check):
        calls.append([])
    return calls


def runs_s_per_token(records: Sequence[RunRecord]) -> tuple[float | None, float | None]:
    """Seconds per new token, prefill included, over the plain and over the assisted runs
    among `records` (a benchmark call's timed runs); None where there were none."""
    rates = []
    for mode in ("plain", "assisted"):
        runs = [record for record in records if record.mode == mode]
        tokens = sum(stats.new_tokens(record) for record in runs)
        rates.append(sum(record.total_s for record in runs) / tokens if tokens else None)
    return rates[0], rates[1]


def s_per_token(result: dict | None, mode: str) -> float | None:
    """A comparison result's seconds per new token in `mode`, prefill included."""
    run = (result or {}).get(mode) or {}
    tokens, seconds = run.get("new_tokens"), run.get("total_s")
    return seconds / tokens if tokens and seconds else None
