"""The way from a pair's name to a pair ready on the device, for every tab (`PairAccess`):
the spec a request names, its files fetched, its turn in the line for the device, then
loading; and the page's pair status line.

A request fetches its pair's files first, outside the line for the device, so a download
holds up no one comparing on a pair in memory. Only then does it take its turn
(`DeviceQueue`): timed runs, and loading pairs into memory, which would slow a
timed run down, use the device one at a time.

On ZeroGPU (`Config.zerogpu`) the handlers run in the main process, where CUDA is only
emulated, and only in the thread that imported `spaces`: they fetch files and check
settings, but never load a pair. A pair not loaded at start-up loads inside each GPU call
that needs it, and the status line says so and what it costs.

Turns on the one device: one request at a time, in order of arrival.

Timed runs must not share the device, and loading a pair into memory competes with them too.
A Gradio concurrency group gives the same order, but a request holds its place there for the
whole event, downloads included, so one visitor's large download stalls everyone. Here a
request joins the line only once its files are on disk, and sees its place while it waits.

On ZeroGPU there is no one device to share: each call gets a GPU of its own, and ZeroGPU
schedules the calls itself. A queue made with `one_at_a_time=False` lets every request
through at once.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import Protocol

import gradio as gr

from assisted.core.settings import DraftSettings, SettingsError, assistant_precision
from assisted.models import pairs
from assisted.models.pairs import PairError, PairSpec
from assisted.ui.errors import refusal
from assisted.ui.gpu_time import Estimate, GpuTimes
from assisted.ui.requests import StopFlag, StopFlags

POLL_S = 2.0  # a waiter hears of its place at least this often (and can notice a Stop)


class DeviceQueue:
    """The line for the device: the request using it first, then the waiting ones."""

    def __init__(self, one_at_a_time: bool = True) -> None:
        self.one_at_a_time = one_at_a_time
        self._changed = threading.Condition()
        self._line: list[Turn] = []

    def turn(self) -> Turn:
        """A place to take in the line: `Turn.waiting()` joins it, `Turn.leave()` leaves."""
        return Turn(self)


class Turn:
    """One request's turn on the device."""

    def __init__(self, queue: DeviceQueue) -> None:
        self._queue = queue

    def waiting(self, poll_s: float = POLL_S) -> Iterator[int]:
        """Join the line. Yields how many requests are ahead, whenever that changes and at
        least every `poll_s`; ends once the device is ours, to keep until `leave()`."""
        if not self._queue.one_at_a_time:
            return
        changed, line = self._queue._changed, self._queue._line
        with changed:
            line.append(self)
            ahead = line.index(self)
        while ahead:
            yield ahead
            with changed:
                if line.index(self) == ahead:
                    changed.wait(poll_s)
                ahead = line.index(self)

    def leave(self) -> None:
        """Give up the place, or the device (nothing, if the line was never joined)."""
        changed, line = self._queue._changed, self._queue._line
        with changed:
            if self in line:
                line.remove(self)
                changed.notify_all()


CUSTOM = "custom"  # the pair dropdown's choice for user-supplied target/assistant ids


class Config(Protocol):
    """What the tabs read from the app's configuration (`app.AppConfig`)."""

    @property
    def registry(self) -> dict[str, PairSpec]: ...
    @property
    def default_pair(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def allow_local(self) -> bool: ...
    @property
    def allow_custom(self) -> bool: ...
    @property
    def zerogpu(self) -> bool: ...


YOUR_TURN = "**Your turn:** starting…"


def waiting_status(ahead: int) -> str:
    requests = "request" if ahead == 1 else "requests"
    return (
        f"**Waiting for the device:** {ahead} {requests} ahead of yours. Runs take turns, "
        "so each is timed alone."
    )


def pair_status(pair: pairs.LoadedPair) -> str:
    note = f" — {pair.spec.note}" if pair.spec.note else ""
    return (
        f"**Ready:** `{pair.spec.name}`{note} · {pair.device} · {pair.dtype_name}. "
        f"In memory: {', '.join(pairs.loaded_pairs())}, {pairs.memory_in_use() / 1e9:.1f} GB "
        f"(at most {pairs.MAX_LOADED_PAIRS} pairs, {pairs.MAX_MODEL_GB:g} GB)."
    )


def _not_loaded(spec: PairSpec, error: Exception) -> gr.Error:
    """The error for a pair that did not load: a refusal where the pair cannot be used (a
    PairError), a fault with its traceback otherwise."""
    message = (
        f"Could not load {spec.name}: {error}. The pairs already in memory "
        f"({', '.join(pairs.loaded_pairs()) or 'none'}) are still usable."
    )
    if isinstance(error, PairError):
        return refusal(message, title="Pair not loaded")
    return gr.Error(message, title="Pair not loaded")


class PairAccess:
    """From a pair's name to the pair ready on the device, for both tabs: the spec a request
    names, its files fetched, its turn in the line for the device, then loading (on
    ZeroGPU the GPU call loads it; the status lines say what that costs, from `gpu_times`).
    `preloaded`: the pairs loaded at start-up. `load_chosen` and `load_custom` are the
    page's handlers for the pair status line."""

    def __init__(
        self, config: Config, queue: DeviceQueue, gpu_times: GpuTimes, preloaded: set[str]
    ):
        self.config = config
        self.queue = queue
        self.gpu_times = gpu_times
        self.preloaded = preloaded

    def device_type(self) -> str:
        """The type of the device runs use ("cpu", "cuda"). On ZeroGPU it is CUDA, known
        without asking torch: a handler thread must not touch CUDA there."""
        if self.config.zerogpu:
            return "cuda"
        return pairs.choose_device(self.config.device).type

    def check_for_device(self, spec: PairSpec, draft: DraftSettings) -> None:
        """Refuse draft settings that cannot run on the device, before any GPU is asked for."""
        try:
            assistant_precision(draft.assistant_quant, spec.drafter, self.device_type())
        except (SettingsError, PairError) as error:
            raise refusal(str(error), title="Settings") from error

    def gpu_call_status(self, spec: PairSpec, estimate: Estimate) -> str:
        """The status line as a request asks ZeroGPU for a GPU."""
        if spec.name in self.preloaded:
            where = f"`{spec.name}` is in memory"
        else:
            where = f"`{spec.name}` loads inside the call ({self._load_cost(spec)})"
        return f"**Asking ZeroGPU for a GPU**: {where}; the call {estimate.describe()}."

    def _load_cost(self, spec: PairSpec) -> str:
        load_s = self.gpu_times.load_s(spec.name)
        if load_s is None:
            return "its load time is not measured yet, and counts toward the call's time"
        return f"{load_s:.0f} s on the latest call, counted toward the call's time"

    def spec_for(
        self, pair: str, custom_target: str, custom_assistant: str
    ) -> tuple[PairSpec, bool]:
        """The spec to load and whether local folders are allowed for it."""
        config = self.config
        if pair == CUSTOM and not config.allow_custom:  # the page's Load pair button, hidden
            raise refusal(
                "Custom pairs are turned off on this server (ASSISTED_ALLOW_CUSTOM=0).",
                title="Pair",
            )
        if pair == CUSTOM:
            if not (custom_target or "").strip():
                raise refusal("Enter a target model id for the custom pair.", title="Pair")
            try:
                spec = pairs.custom_pair(
                    custom_target.strip(), (custom_assistant or "").strip() or None
                )
            except PairError as error:
                raise refusal(str(error), title="Pair") from error
            return spec, config.allow_local
        if pair not in config.registry:
            known = ", ".join([*config.registry, CUSTOM])
            raise refusal(f"Unknown pair {pair!r}; choose one of {known}.", title="Pair")
        return config.registry[pair], True

    def load(self, spec: PairSpec, allow_local: bool, progress: gr.Progress) -> pairs.LoadedPair:
        def report(message: str, fraction: float | None) -> None:
            progress(fraction, desc=message)

        try:
            return pairs.load_pair(
                spec,
                self.config.device,
                self.config.dtype,
                progress=report,
                allow_local=allow_local,
            )
        except Exception as error:  # the previously loaded pairs stay loaded
            raise _not_loaded(spec, error) from error

    def in_memory(self, spec: PairSpec, allow_local: bool) -> bool:
        """Whether `spec` is in memory for this app's runs: fetched and checked when it
        loaded, so a request for it neither fetches nor checks again. Its ids are resolved
        all the same (`allow_local` may refuse a folder that another request loaded). On
        ZeroGPU only a pair loaded at start-up counts: any other loads inside each call."""
        pairs.model_refs(spec, allow_local)
        if self.config.zerogpu:
            return spec.name in self.preloaded and pairs.loaded_spec(spec) is not None
        return pairs.loaded(spec, self.config.device, self.config.dtype) is not None

    def fetch_status(self, spec: PairSpec, allow_local: bool) -> Iterator[str]:
        """Status lines while the pair's files are fetched and it is first checked (nothing
        for a pair in memory, or one whose files are here and which passed its check)."""
        try:
            if self.in_memory(spec, allow_local):
                return
            for message, fraction in pairs.fetching(spec, allow_local):
                done = f" ({fraction:.0%})" if fraction is not None else ""
                yield (
                    f"**{message}**{done}. Comparisons on the pairs in memory go on "
                    "meanwhile; yours runs once the files are here."
                )
        except Exception as error:
            raise _not_loaded(spec, error) from error

    def until_ready(
        self, spec: PairSpec, allow_local: bool, turn: Turn, stop: StopFlag
    ) -> Iterator[str]:
        """Status lines while the pair's files are fetched, then while the request waits for
        its turn on the device, and one as the turn comes; ends early when Stop is pressed.
        The download comes first, outside the line, so it holds up no one comparing on a
        pair in memory; a pair in memory goes straight to the line.

        The last line comes before anything uses the device. Gradio closes a request's
        generator at its next yield once its visitor has cancelled it or gone (a cancelled
        job, a closed page or client): one that left while it waited ends there, and never
        takes the device."""
        waiting = map(waiting_status, turn.waiting())  # joins the line once fetched
        for status in itertools.chain(self.fetch_status(spec, allow_local), waiting):
            if stop.is_set():
                return
            yield status
        yield YOUR_TURN

    @contextlib.contextmanager
    def request(self, stops: StopFlags, key: str) -> Iterator[tuple[Turn, StopFlag]]:
        """A request's place in the line for the device and its Stop flag (under `key` in
        `stops`), both given up when the request ends."""
        stop = stops.open(key)
        turn = self.queue.turn()
        try:
            yield turn, stop
        finally:
            turn.leave()
            stops.close(key, stop)

    def load_for_run(self, spec: PairSpec, allow_local: bool, progress: gr.Progress) -> None:
        """Load the pair before its timed runs; on ZeroGPU the GPU call loads it instead."""
        if not self.config.zerogpu:
            self.load(spec, allow_local, progress)

    def load_chosen(
        self,
        pair: str,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (Gradio's injection idiom)
    ) -> Iterator[str]:
        if pair == CUSTOM:
            yield (
                "Enter a target id and an assistant id (or leave the assistant empty for "
                "prompt lookup), then press **Load pair**."
            )
            return
        spec, allow_local = self.spec_for(pair, "", "")
        yield from self._load_into_memory(spec, allow_local, progress)

    def load_custom(
        self,
        target: str,
        assistant: str,
        progress: gr.Progress = gr.Progress(),  # noqa: B008
    ) -> Iterator[str]:
        spec, allow_local = self.spec_for(CUSTOM, target, assistant)
        yield from self._load_into_memory(spec, allow_local, progress)

    def _load_into_memory(
        self, spec: PairSpec, allow_local: bool, progress: gr.Progress
    ) -> Iterator[str]:
        """The pair's status lines: fetched, then loaded on the device's turn (the turn is
        skipped for a pair already in memory). On ZeroGPU, fetched only: a pair loaded at
        start-up is in memory, and any other loads inside the GPU calls."""
        turn = self.queue.turn()
        try:
            yield from self.fetch_status(spec, allow_local)
            if self.config.zerogpu:
                pair = pairs.loaded_spec(spec) if spec.name in self.preloaded else None
                yield (
                    pair_status(pair)
                    if pair
                    else (
                        f"**Ready:** `{spec.name}`'s files are here. On ZeroGPU it loads inside "
                        f"each GPU call that uses it ({self._load_cost(spec)})."
                    )
                )
                return
            pair = pairs.loaded(spec, self.config.device, self.config.dtype)
            if pair is None:
                yield from map(waiting_status, turn.waiting())
                pair = self.load(spec, allow_local, progress)
            yield pair_status(pair)
        finally:
            turn.leave()
