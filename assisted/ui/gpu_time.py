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
  set-up (preparing the pair, the warm-up, the calibration until a call has kept its
  costs on disk), as the latest call that did it measured, and on CUDA the capture of the
  assistant's drafts as graphs (`assisted.engine.drafters.draft_graphs`) for the call's cap
  (`capture_s`). Both are counted on every call: ZeroGPU may hand the call a fresh fork,
  which has to warm up and capture again, and the app cannot know beforehand. A capture
  records one graph a draft length on each cache, 1 + … + cap passes a cache, and costs
  as many: so the latest capture measured, at its own cap, prices the call's by that
  ratio, a longer cap's recapture included; until one is measured, `first_guess` prices
  it;
- a worker's cold start: ZeroGPU may hand the call a freshly forked worker, which sets up
  CUDA and moves every weight preloaded at start-up onto the GPU before the call's task
  starts, inside the time asked for (`spaces/zero/wrappers.py`, `worker_init`). Until a
  fresh worker has timed its start (`CallReport.cold_start_s`), it is estimated: CUDA's
  set-up plus the preloaded bytes at the device's load bandwidth (`ColdStart`; the
  device's figures are `assisted.models.hardware`'s). Counted on
  every call, as the set-up is;
- after ZeroGPU aborted a call on a pair (it ends one that outruns its request), the next
  request for it asks ABORT_GROWTH times more, again after each abort, up to the most a
  call may ask: an abort returns no timings, so without this the next call would ask the
  same and could be aborted again. A call that finishes ends the growth;
- a pair not measured yet: what its published size says on the device (`first_guess`),
  before any call has timed it. A step at batch 1 moves every weight once and launches
  each layer's kernels in eager mode, and the host launches while the device computes, so
  its seconds are the larger of the weights' bytes over the device's bandwidth and its
  layers times a launch cost (`assisted.models.hardware.Device.step_s`; MARGIN covers a
  guess that falls short). The set-up is a fixed start plus a number of the target's
  steps, and the capture of the assistant's drafts its recorded passes, each at
  `RECORDED_PASS_STEPS` of the assistant's own steps;
  loading inside a call moves the weights from the start-up's copy in memory or on disk.
  A custom pair, whose size is not known before it loads, is priced at the largest that
  its checks let load.

`spaces` multiplies a `large` call's requested duration by its machine's `duration_factor`
(1.5 on the RTX PRO 6000 Blackwell, 1.0 on the H200; `spaces/zero/client.py`,
`get_duration_seconds`, in the main process) before it schedules the call and charges the
visitor's quota. So a call asks for what it needs divided by that factor
(`assisted.models.machines.duration_factor`, read as `spaces` reads it): what ZeroGPU
schedules, and the visitor pays, is then the estimate times MARGIN, and the floor and the
most a call may ask (`max_s`) bound that scheduled time. A first guess's figures are the
machine's that a GPU worker reported (`CallReport.gpu`); until one has, the slowest that
`spaces` knows (`assisted.models.hardware.zerogpu_slice`).

Each GPU call reports what it measured (`CallReport`, its last yield, which the handler
keeps and does not show). Imports neither torch nor gradio: it runs in the main process.

How fast each pair decodes here, as this app process has measured it: seconds per plain
token, for the Benchmark tab's time estimate. Imports neither torch nor gradio.

A comparison and a benchmark make plain runs, and the latest one on a pair sets its pace:
the run's seconds per token after its first step (`stats.target_s_per_token`; the first
step holds the prefill). Plain decoding runs the target alone, so paces are kept by
target: pairs that share one (`embedded` and `embedded-prompt-lookup`) share a pace.
Until a pair has that figure (a comparison stopped within two steps of plain decoding), an
`auto` run's T(1), the target's measured time to verify one row (`verify_cost_s`, the
policy's calibration refined by the run), stands in for it. Before either, the pair has no
pace, and the estimate says it is guessing.

The figures come from the results the tabs receive, not from the loaded pair, so they are
there on ZeroGPU too, where the runs happen in another process.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assisted.analysis import stats
from assisted.core.record import RunRecord
from assisted.core.settings import DraftSettings
from assisted.models import machines
from assisted.models.hardware import CUDA_SETUP_S, Device, zerogpu_slice
from assisted.models.registry import PAIRS, PairSpec, Size

if TYPE_CHECKING:
    from assisted.ui.requests import GpuRequest


@dataclass(frozen=True)
class Pace:
    """Seconds per plain token on one pair, and how they were measured (for the estimate's
    wording: "measured in …")."""

    s_per_token: float
    source: str


class Paces:
    """The latest pace of each target (a model id or folder, `PairSpec.target`); shared by
    the tabs' handlers (threads). `pair` names the pair a figure was measured on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paces: dict[str, Pace] = {}

    def of(self, target: str) -> Pace | None:
        with self._lock:
            return self._paces.get(target)

    def note(self, target: str, s_per_token: float | None, source: str) -> None:
        if s_per_token is not None and s_per_token > 0:
            with self._lock:
                self._paces[target] = Pace(s_per_token, source)

    def note_plain_run(self, target: str, pair: str, record: RunRecord) -> None:
        """A run on `pair` (the benchmark's); only plain runs set the pace."""
        if record.mode == "plain":
            pace = stats.target_s_per_token(record)
            self.note(target, pace, f"measured in the latest plain run on {pair} here")

    def note_comparison(self, target: str, pair: str, result: dict) -> None:
        """A finished comparison on `pair`: `stats.report(...)`'s dict."""
        rate = (result.get("plain") or {}).get("decode_tokens_per_s")
        if rate:
            self.note(target, 1 / rate, f"measured in the latest plain run on {pair} here")
            return
        curve = (result.get("assisted") or {}).get("verify_cost_s") or []
        one_row = dict((int(k), s) for k, s in curve).get(1)
        if self.of(target) is None:  # a plain run's figure is the better one
            source = f"the target's measured time for one row on {pair} (auto)"
            self.note(target, one_row, source)


MARGIN = 1.5  # the request is this many times the estimate: runs of the same work vary
ABORT_GROWTH = 2.0  # after an abort, the pair's next request asks this many times more
FLOOR_S = 20  # never schedule less: scheduling and the fork's start cost seconds too
# The set-up of a pair never timed here, in its target's steps: two warm-up runs of 8
# tokens, the calibration's T(k) for k up to 9 rows a few times over, the assistant's
# drafting cost, and room for the prefills; after a fixed start (CUDA context, first
# kernels) that no step count covers.
SETUP_STEPS = 200
SETUP_START_S = 10.0
# The capture of an assistant's drafts (`assisted.engine.drafters.draft_graphs`): on each
# of its caches, one graph a draft length, 1 + … + cap recorded passes, each with its
# share of the warm-ups, the self-check and the timing around it. An H200 captured the
# 0.5B's drafts up to 8 in 2.78 s a cache (docs/space.md): 36 recorded passes, 77 ms each,
# 9.2 of the 0.5B's modelled steps (24 layers × 0.35 ms of launches).
CAPTURED_CACHES = 4  # `draft_graphs.BUCKETS`
RECORDED_PASS_STEPS = 9.2
# A custom pair: as large as its checks let it be (ASSISTED_MAX_MODEL_GB's 40 GB in bf16),
# at the depth of the deepest offered target and more.
UNKNOWN_SIZE = Size(20.0, 64)
# A sampling check's sample, in assisted tokens of a benchmark's runs: a run of 3 tokens,
# whose prefill costs most: on the embedded pair a sample takes about as long as 5 tokens
# of its runs (docs/benchmarks.md#sampling-check), and 6 leave room.
CHECK_SAMPLE_TOKENS = 6


@dataclass(frozen=True)
class ColdStart:
    """A fresh worker's start before its task: measured, or estimated from what it moves."""

    seconds: float
    measured: bool
    moved_bytes: int = 0

    def describe(self, device: Device) -> str:
        if self.measured:
            return f"a worker's cold start, {self.seconds:.0f} s as measured here"
        return (
            f"a worker's cold start, {self.seconds:.0f} s estimated: CUDA's set-up "
            f"({CUDA_SETUP_S:g} s) and {self.moved_bytes / 1e9:.1f} GB moved onto the GPU "
            f"at {device.load_bytes_per_s / 1e9:g} GB/s"
        )


def recorded_passes(cap: int, caches: int = CAPTURED_CACHES) -> int:
    """The passes a capture of drafts of 1 … `cap` records on `caches` caches."""
    return caches * cap * (cap + 1) // 2


def first_guess(
    spec: PairSpec | None, device: Device | None = None, cap: int | None = None
) -> _PairTimes:
    """The times of a pair never timed on `device` (default: the ZeroGPU slice of
    `zerogpu_slice`), from its published size (the module's note); a pair of unknown size
    (custom, or None) at `UNKNOWN_SIZE`, its assistant too; its capture at `cap` (default:
    the pair's own). The assistant's runs are priced as plain ones: where drafting would
    cost more, `auto` stops drafting."""
    device = device or zerogpu_slice()
    target = spec.target_size if spec is not None and spec.target_size else UNKNOWN_SIZE
    step_s = device.step_s(target)
    capture_s = None
    # Only a pair whose assistant is a model of its own captures its drafts.
    if spec is None or spec.drafter.has_model:
        assistant = spec.assistant_size if spec is not None and spec.assistant_size else None
        cap = cap or (spec.draft if spec is not None else DraftSettings()).num_assistant_tokens
        passes = recorded_passes(cap) * RECORDED_PASS_STEPS
        capture_s = passes * device.step_s(assistant or UNKNOWN_SIZE)
    weights = spec.weight_bytes() if spec is not None else None
    if weights is None:
        weights = 2 * UNKNOWN_SIZE.weight_bytes()
    return _PairTimes(
        load_s=weights / device.load_bytes_per_s,
        setup_s=SETUP_START_S + SETUP_STEPS * step_s,
        plain_s_per_token=step_s,
        assisted_s_per_token=step_s,
        capture_s=capture_s,
        capture_cap=cap,
    )


@dataclass(frozen=True)
class CallReport:
    """What one GPU call measured, for the next call's request. Seconds are None for work
    the call did not do (the pair was in memory; the process was warm; it captured no
    graphs). `capture_s` is part of `setup_s`, the graphs' capture that set-up included."""

    pair: str
    load_s: float | None
    setup_s: float | None
    plain_s_per_token: float | None = None
    assisted_s_per_token: float | None = None
    cold_start_s: float | None = None  # a fresh worker's start; None: a reused one
    capture_s: float | None = None  # the graphs' capture, within setup_s
    gpu: str | None = None  # the GPU the call ran on, as torch names it; None: not on CUDA
    capture_cap: int | None = None  # the longest draft the capture recorded


@dataclass
class _PairTimes:
    load_s: float | None = None
    setup_s: float | None = None  # without the capture
    plain_s_per_token: float | None = None
    assisted_s_per_token: float | None = None
    capture_s: float | None = None
    capture_cap: int | None = None  # the cap `capture_s` recorded drafts up to

    def capture_at(self, cap: int) -> float:
        """The capture of drafts up to `cap`, from this one's by their recorded passes."""
        if self.capture_s is None:
            return 0.0
        return self.capture_s * recorded_passes(cap) / recorded_passes(self.capture_cap or cap)


@dataclass(frozen=True)
class Estimate:
    """A request: `seconds` to ask for, and the sum it came from, for the status line."""

    seconds: int
    estimate_s: float
    measured: bool  # False: the pair has no measured pace yet, so the figures are guesses
    cold_start: str = ""  # the cold start's term, in words ("": none counted)
    aborts: int = 0  # ZeroGPU's aborts of the pair's calls since one finished
    duration_factor: float = 1.0  # what `spaces` multiplies `seconds` by (the module's note)

    @property
    def asked_s(self) -> float:
        """What the estimate wants ZeroGPU to schedule, before the floor and the cap."""
        return MARGIN * self.estimate_s * ABORT_GROWTH**self.aborts

    @property
    def scheduled_s(self) -> float:
        """What ZeroGPU schedules, and charges the visitor's quota, for `seconds`."""
        return self.seconds * self.duration_factor

    def describe(self) -> str:
        basis = "measured here" if self.measured else "a first guess: not measured here yet"
        cold = f", {self.cold_start} included" if self.cold_start else ""
        grown = (
            f" × {ABORT_GROWTH**self.aborts:g} after {self.aborts} aborted call"
            + ("s" if self.aborts > 1 else "")
            if self.aborts
            else ""
        )
        scaled = (
            f", which it schedules as {self.scheduled_s:.0f} s (× {self.duration_factor:g}"
            " on this GPU)"
            if self.duration_factor != 1.0
            else ""
        )
        return (
            f"asks ZeroGPU for {self.seconds} s{scaled}: {self.estimate_s:.0f} s estimated "
            f"({basis}{cold}) × {MARGIN:g} margin{grown}"
        )


class GpuTimes:
    """What the GPU calls measured, by pair; shared by the tabs' handlers (threads). Pairs
    not measured yet are priced by `first_guess` on `device` (default: `zerogpu_slice`'s,
    then the one a call reports), from their spec in `specs` (the registry). `max_s`: the
    most ZeroGPU may schedule for one call."""

    def __init__(
        self, max_s: int, device: Device | None = None, specs: dict[str, PairSpec] = PAIRS
    ) -> None:
        self.max_s = max_s
        self.device = device or zerogpu_slice()
        self.specs = specs
        self._lock = threading.Lock()
        self._pairs: dict[str, _PairTimes] = {}
        self._aborts: dict[str, int] = {}
        # What a fresh worker moves onto the GPU at its start (`preloaded`); None: no cold
        # start is counted (off ZeroGPU, where nothing forks).
        self._moved_bytes: int | None = None
        self._cold_start_s: float | None = None  # the latest fresh worker's, measured

    def preloaded(self, moved_bytes: int) -> None:
        """The start-up preloaded `moved_bytes` of weights, which every fresh worker moves."""
        self._moved_bytes = moved_bytes

    def note(self, report: CallReport) -> None:
        """What a finished call measured; it ends its pair's growth after aborts."""
        with self._lock:
            times = self._pairs.setdefault(report.pair, _PairTimes())
            for name in ("load_s", "plain_s_per_token", "assisted_s_per_token"):
                if (value := getattr(report, name)) is not None:
                    setattr(times, name, value)
            if report.capture_s is not None:
                times.capture_s, times.capture_cap = report.capture_s, report.capture_cap
            if report.setup_s is not None:
                # Kept apart: every call counts a capture at its own cap (the module's note).
                times.setup_s = report.setup_s - (report.capture_s or 0.0)
            if report.cold_start_s is not None:
                self._cold_start_s = report.cold_start_s
            if report.gpu is not None:  # the machine the calls run on
                self.device = zerogpu_slice(report.gpu)
            self._aborts.pop(report.pair, None)

    def aborted(self, pair: str) -> None:
        """ZeroGPU aborted a call on `pair`: its next request asks more (the module's note)."""
        with self._lock:
            self._aborts[pair] = self._aborts.get(pair, 0) + 1

    def cold_start(self) -> ColdStart | None:
        """A fresh worker's start, measured or estimated; None where none is counted."""
        if self._cold_start_s is not None:
            return ColdStart(self._cold_start_s, measured=True)
        if self._moved_bytes is None:
            return None
        moving_s = self._moved_bytes / self.device.load_bytes_per_s
        return ColdStart(CUDA_SETUP_S + moving_s, measured=False, moved_bytes=self._moved_bytes)

    def estimate(self, request: GpuRequest, preloaded: bool) -> Estimate:
        """The request for a tab's GPU call (`request`): the tokens it times, plain and
        assisted, on its pair; `preloaded`: the pair was loaded at start-up."""
        name = request.pair.spec.name
        return self.runs(name, *request.timed_tokens(), preloaded, request.drafting_cap())

    def runs(
        self,
        pair: str,
        plain_tokens: int,
        assisted_tokens: int,
        preloaded: bool,
        cap: int | None = None,
    ) -> Estimate:
        """The request for a call that times `plain_tokens` of plain decoding and
        `assisted_tokens` of assisted decoding on `pair`, after its set-up and a capture of
        drafts up to `cap` (default: the pair's own)."""
        with self._lock:
            times = self._pairs.get(pair, _PairTimes())
            aborts = self._aborts.get(pair, 0)
        guess = first_guess(self.specs.get(pair), self.device, cap)
        cap = cap or guess.capture_cap
        cold = self.cold_start()
        plain = times.plain_s_per_token
        assisted = times.assisted_s_per_token or plain
        measured = plain is not None
        setup_s = times.setup_s if times.setup_s is not None else guess.setup_s
        # A measured capture, else the guess's until a set-up was measured without one (a
        # pair whose runs never captured: sampled or constant-schedule, or not on CUDA).
        if times.capture_s is not None:
            setup_s += times.capture_at(cap)
        elif times.setup_s is None:
            setup_s += guess.capture_at(cap)
        load_s = times.load_s if times.load_s is not None else guess.load_s
        estimate = (
            plain_tokens * (plain or guess.plain_s_per_token)
            + assisted_tokens * (assisted or guess.assisted_s_per_token)
            + setup_s
            + (0.0 if preloaded else load_s)
            + (cold.seconds if cold else 0.0)
        )
        described = cold.describe(self.device) if cold else ""
        factor = machines.duration_factor()
        unbounded = Estimate(0, estimate, measured, described, aborts, factor)
        scheduled = min(self.max_s, max(FLOOR_S, unbounded.asked_s))
        # Rounded up, unless that would schedule more than the most allowed.
        seconds = math.ceil(scheduled / factor)
        if seconds * factor > self.max_s:
            seconds = math.floor(self.max_s / factor)
        return dataclasses.replace(unbounded, seconds=seconds)

    def load_s(self, pair: str) -> float | None:
        """Seconds the latest call that loaded `pair` took to load it; None: none did."""
        with self._lock:
            return self._pairs.get(pair, _PairTimes()).load_s


# The process that imported this module, the app's main one: a GPU worker is forked from it.
_MAIN_PID = os.getpid()
_start_timed = False  # whether this process's start was timed already


def worker_start_s() -> float | None:
    """Seconds from this process's creation to now, asked at the start of a GPU call's task:
    a fresh worker's cold start (its fork, CUDA's set-up, the weights moved). None in the
    main process, where nothing was forked, and in a reused worker, already timed."""
    global _start_timed
    if os.getpid() == _MAIN_PID or _start_timed:
        return None
    import psutil

    _start_timed = True
    return time.time() - psutil.Process().create_time()


def runs_s_per_token(records: Sequence[RunRecord]) -> tuple[float | None, float | None]:
    """Seconds per new token, prefill included, over the plain and over the assisted runs
    among `records` (a call's timed runs); None where there were none."""
    rates = []
    for mode in ("plain", "assisted"):
        runs = [record for record in records if record.mode == mode]
        tokens = sum(stats.new_tokens(record) for record in runs)
        rates.append(sum(record.total_s for record in runs) / tokens if tokens else None)
    return rates[0], rates[1]


def runs_capture_s(records: Sequence[RunRecord]) -> float | None:
    """The capture of the assistant's drafts as graphs that `records` (a call's timed
    runs) drafted through, in seconds; None where none drafted through graphs."""
    paths = [record.drafting_path for record in records if record.drafting_path is not None]
    return next((path.capture_s for path in paths if path.capture_s is not None), None)
