"""The one way every tab's GPU work runs inside its call (`gpu_call`; each tab's `gpu`
module hands it the tab's work): the pair ready in the call's process, the work on it,
then what the call measured. A call yields typed events (`GpuEvents`): a `Status` line of
the call's own, the tab's items, and last a `CallReport`. The handlers' side of the call
is `gpu_turn`, below.

On ZeroGPU each call runs in a process forked from the main one (or an idle one reused):
it loads the pair where that process does not hold it, and starts from what earlier
processes learnt.

A request's way to the GPU, the same for every tab: its Stop flag and its turn in the
line for the device (`gpu_turn`), status lines while its pair's files are fetched and it
waits, the pair loaded (off ZeroGPU; on ZeroGPU the call loads it), then each GPU call
(`GpuTurn.call`): the status line as it asks ZeroGPU for a GPU, the call's events
(`GpuEvents`) read, its status lines shown and its items streamed,
what the call measured kept for the next one's request, and ZeroGPU's refusals said in
the status line.

A tab writes only what is its own: its request, and how its values and status lines show.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import gradio as gr

from assisted import bench
from assisted.core.record import RunRecord
from assisted.core.settings import SettingsError
from assisted.engine import decoding, engine
from assisted.models import loading, pairs
from assisted.models.pairs import PairSpec
from assisted.ui.errors import Refused, explained, refusal
from assisted.ui.gpu_time import CallReport, runs_capture_s, runs_s_per_token, worker_start_s
from assisted.ui.pair_access import Turn
from assisted.ui.requests import GpuRequest, PairPlace, StopFlag
from assisted.ui.tabs import Outputs, TabState, updating_only

Item = TypeVar("Item")


@dataclass(frozen=True)
class Status:
    """A status line of the GPU call's own (its pair loading inside it), which the tab
    shows as it shows the status lines of the call's turn (`gpu_turn.GpuTurn.call`)."""

    line: str


GpuEvents = Iterator[Status | Item | CallReport]
"""What a GPU call yields: its status lines, the tab's items (picklable: on ZeroGPU they
cross a process boundary), then what the call measured."""


def gpu_ready(place: PairPlace) -> Generator[Status, None, tuple[pairs.LoadedPair, float | None]]:
    """The pair in this process, loaded here where it is not (a status line meanwhile),
    and the seconds loading took (None: it was in memory). Runs in the GPU call: on
    ZeroGPU nothing may touch CUDA in the main process's handler threads.

    The pair starts from what every process learnt so far: on ZeroGPU this process was
    forked from the main one, which holds what it read at start-up only, or it is an idle
    worker reused, which holds what it learnt itself; the file holds what all of them
    kept (`assisted.models.learnt_store`)."""
    spec, device, dtype = place.spec, place.device, place.dtype
    pair = pairs.loaded(spec, device, dtype)
    load_s = None
    if pair is None:
        yield Status(f"**Loading** `{spec.name}` inside this GPU call…")
        started = time.perf_counter()
        pair = pairs.load_pair(spec, device, dtype, allow_local=place.allow_local)
        load_s = time.perf_counter() - started
    else:
        engine.refresh(pair)
    return pair, load_s


class CallTiming:
    """What one call measures of its work: the work says when each timed run ends
    (`timed`), and learns whether this call set the pair up (`set_up`)."""

    def __init__(
        self, pair: pairs.LoadedPair, started: float, load_s: float | None, cap: int | None = None
    ) -> None:
        self.pair = pair
        self.cap = cap  # the longest draft the call's runs ask, which a capture records
        self.ready = started + (load_s or 0.0)  # when the pair was ready
        self.load_s = load_s
        self.setup_s: float | None = None
        self.records: list[RunRecord] = []
        self._warmed = decoding.warmed_paths(pair)

    def timed(self, record: RunRecord) -> None:
        """A timed run ended: it counts towards the call's seconds per token, and the
        first one's start ends the call's set-up (preparing the pair, the warm-up, the
        calibration, the capture of the assistant's drafts)."""
        if self.setup_s is None:
            self.setup_s = time.perf_counter() - self.ready - record.total_s
        self.records.append(record)

    @property
    def set_up(self) -> bool:
        """Whether this call prepared the pair (its warm-up ran here, not in an earlier
        call of this process): only then did it pay for a set-up and a capture, which a
        fresh fork pays again."""
        return decoding.warmed_paths(self.pair) > self._warmed

    def report(self, cold_start_s: float | None) -> CallReport:
        """What the call measured. A set-up and a capture count only where this call did
        them: a reused worker's few seconds would price the next call, which may be a
        fresh fork, as if it set up nothing."""
        set_up = self.set_up
        plain, assisted = runs_s_per_token(self.records)
        return CallReport(
            self.pair.spec.name,
            self.load_s,
            self.setup_s if set_up else None,
            plain,
            assisted,
            cold_start_s,
            runs_capture_s(self.records) if set_up else None,
            gpu=loading.gpu_name(self.pair.device),
            capture_cap=self.cap,
        )


Work = Callable[[pairs.LoadedPair, CallTiming], Iterator[Item]]
"""A tab's GPU work on the pair ready: its items, each timed run told to the timing."""


def gpu_call(request: GpuRequest, work: Work[Item], title: str, fault: str = "") -> GpuEvents[Item]:
    """One GPU call of `work` on the request's pair: a `Status` while the pair loads, the
    work's items, then what the call measured (a CallReport). Bad settings are refused
    under `title`; a pair that cannot load is said as such; a CUDA context that broke, in
    this call or an earlier one in this process, in its own words, before anything runs
    in it (`engine.BrokenContext`: raising ends the worker's use on ZeroGPU); any
    other failure as "`fault` (default: `title`) failed", never hung on."""
    spec = request.pair.spec
    started = time.perf_counter()
    cold_start_s = worker_start_s()
    try:
        if (words := engine.broken()) is not None:
            raise engine.BrokenContext(words)
        pair, load_s = yield from gpu_ready(request.pair)
        timing = CallTiming(pair, started, load_s, request.drafting_cap())
        yield from work(pair, timing)
    except engine.BrokenContext as error:
        raise gr.Error(str(error), title="GPU fault") from error
    except pairs.PairError as error:
        raise refusal(f"Could not load {spec.name}: {error}", title="Pair not loaded") from error
    except (bench.BenchError, SettingsError) as error:
        raise refusal(str(error), title=title) from error
    except Exception as error:  # a failure inside loading or generation: say so, never hang
        raise gr.Error(f"{fault or title} failed: {type(error).__name__}: {error}") from error
    yield timing.report(cold_start_s)


def bench_call(
    request: GpuRequest,
    runs: Callable[[pairs.LoadedPair], Generator[Item, None, None]],
    title: str,
) -> GpuEvents[Item]:
    """A GPU call of `assisted.bench`'s runs (the Benchmark's, the Shoot-out's): `runs(pair)`
    through `gpu_call`, each Progress's record told to the call's timing as a timed run.
    The runs are closed with the call: a request closed mid-run ends its run after the
    current step."""

    def work(pair: pairs.LoadedPair, timing: CallTiming) -> Iterator[Item]:
        events = runs(pair)
        with contextlib.closing(events):
            for event in events:
                if isinstance(event, bench.Progress) and event.record is not None:
                    timing.timed(event.record)
                yield event

    return gpu_call(request, work, title)


Request = TypeVar("Request", bound=GpuRequest)
Item = TypeVar("Item")


def stop_key(request: gr.Request, tab: str) -> str:
    """The key of a request's Stop flag (`TabState.stops`): its session and its tab, so a
    tab's Stop button stops that tab's run only. The Stop button's own request reads the
    same key: it comes from the same session."""
    return f"{request.session_hash or id(request)}:{tab}"


class TabHandlers:
    """What every tab's handlers hold: the app's state and the tab's GPU entry point; and
    its Stop, which sets the running request's flag under the tab's key (`stop_key`)."""

    tab: str  # the tab's part of its requests' Stop keys

    def __init__(self, shared: TabState, stream: Callable[[Any], Iterator[Any]]):
        self.shared = shared
        self.stream = stream

    def request_stop(self, request: gr.Request) -> None:
        flag = self.shared.stops.get(stop_key(request, self.tab))
        if flag is not None:
            flag.set()


class GpuTurn:
    """One request's turn on the device, held inside `gpu_turn`: its pair's place
    (`place`), its Stop flag (`stop`), the wait for the turn (`ready`) and the GPU calls
    it makes (`call`)."""

    def __init__(
        self, state: TabState, spec: PairSpec, allow_local: bool, turn: Turn, stop: StopFlag
    ):
        self.state = state
        self.spec = spec
        self.allow_local = allow_local
        self.turn = turn
        self.stop = stop
        config = state.pairs.config
        self.place = PairPlace(spec, config.device, config.dtype, allow_local)

    def ready(self, progress: gr.Progress) -> Iterator[str]:
        """Status lines while the pair's files are fetched and the request waits for its
        turn; then, off ZeroGPU, the pair loaded. It ends early, loading nothing, when
        Stop is pressed (`stopped`)."""
        access = self.state.pairs
        yield from access.until_ready(self.spec, self.allow_local, self.turn, self.stop)
        if not self.stopped:
            access.load_for_run(self.spec, self.allow_local, progress)

    def waited(
        self, progress: gr.Progress, idle: Callable[[str], Outputs], nothing: str
    ) -> Generator[Outputs, None, bool]:
        """`ready`'s status lines as the tab's values (`idle(line)`); whether the runs may
        start: False where Stop was pressed first, said with what the tab then shows
        (`nothing`: "no report", "no ranking")."""
        yield from map(idle, self.ready(progress))
        if self.stopped:
            yield idle(f"**Stopped** before the timed runs started: {nothing}.")
            return False
        return True

    @property
    def stopped(self) -> bool:
        return self.stop.is_set()

    def call(
        self,
        stream: Callable[[Request], GpuEvents[Item]],
        request: Request,
        outputs: type[Outputs],
        status: Callable[[str], Outputs],
    ) -> Iterator[Item | Outputs]:
        """One GPU call of `request` through `stream` (the GPU entry point): the tab's
        items, and `status(line)`, the tab's values for each status line of the call's own
        (on ZeroGPU first the line as the call asks for a GPU; then each `Status` the call
        yields, its pair loading inside it). What the call measured (its `CallReport`) is
        kept for the next call's request, not passed on. A ZeroGPU refusal or abort ends
        the call with `outputs` that show it in their status line only, and a clear error.

        The call is closed before the turn is given up: a request closed mid-run (a
        cancelled job, a visitor gone) ends its run after the current step, as Stop does,
        and the next request never shares the device with it."""
        access, gpu_times = self.state.pairs, self.state.gpu_times
        if access.config.zerogpu:
            estimate = gpu_times.estimate(request, self.spec.name in access.preloaded)
            yield status(access.gpu_call_status(self.spec, estimate))
        events = stream(request)
        with contextlib.closing(events):
            try:
                for event in explained(events):
                    if isinstance(event, CallReport):  # for the next call's request
                        gpu_times.note(event)
                    elif isinstance(event, Status):
                        yield status(event.line)
                    else:
                        yield event
            except Refused as refused:
                if refused.aborted:  # the next call on the pair asks more
                    gpu_times.aborted(self.spec.name)
                yield updating_only(outputs, status=refused.status)
                raise


@contextlib.contextmanager
def gpu_turn(state: TabState, spec: PairSpec, allow_local: bool, key: str) -> Iterator[GpuTurn]:
    """A request's turn on the device and its Stop flag (under `key`, from `stop_key`), both
    given up when the request ends."""
    with state.pairs.request(state.stops, key) as (turn, stop):
        yield GpuTurn(state, spec, allow_local, turn, stop)
