"""A request's way to the GPU, the same for every tab: its Stop flag and its turn in the
line for the device (`gpu_turn`), status lines while its pair's files are fetched and it
waits, the pair loaded (off ZeroGPU; on ZeroGPU the call loads it), then each GPU call
(`GpuTurn.call`): the status line as it asks ZeroGPU for a GPU, the call's events
(`assisted.ui.gpu_calls.GpuEvents`) read, its status lines shown and its items streamed,
what the call measured kept for the next one's request, and ZeroGPU's refusals said in
the status line.

A tab writes only what is its own: its request, and how its values and status lines show.
"""

import contextlib
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

import gradio as gr

from assisted.models.pairs import PairSpec
from assisted.ui.device_queue import Turn
from assisted.ui.gpu_calls import GpuEvents, Status
from assisted.ui.gpu_time import CallReport
from assisted.ui.refusals import Refused, explained
from assisted.ui.requests import GpuRequest, PairPlace
from assisted.ui.stop_flags import StopFlag
from assisted.ui.tabs import Outputs, TabState, updating_only

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
