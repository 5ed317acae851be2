"""ZeroGPU, emulated: the app's GPU functions run as `spaces` 0.51 runs them on a Space.

The real wrapper does the work (`spaces.zero.wrappers.generator_function_wrapper`): each
call runs in a process forked from this one, a fresh one or the idle worker of an earlier
call reused; the arguments go there pickled, every yield comes back pickled, and nothing
the call changes in that process flows back. Stubbed are only what needs the Hub's
servers or a GPU: the scheduler's HTTP calls (`client.schedule`, `release`, `allow`,
`duration_warning`) and the CUDA work of a worker's start (`torch.unpatch`, `init`, `move`).
The models stay on the CPU. On a CPU build of torch, `spaces.zero.torch` cannot even be
imported (it reads `torch.version.cuda`), so a stand-in module of the same functions takes
its place: the real patching holds for the whole process that imports it, so a Space's
start on it (preload, pack, a worker's start) runs as a program of its own
(`tests/zerogpu_real.py`).

The stub's `schedule` answers as ZeroGPU would: `idle` tells the wrapper to reuse the
worker of the previous call, if it is alive; a test sets `ZeroGPU.reuse` to have each call
forked afresh instead. Each request's duration is recorded. A test sets `refusal` to have
the next schedule refuse as ZeroGPU's client does (the same `gr.Error`, title and text),
or `abort` to have the next fresh worker die mid-call, which the real wrapper reports as
ZeroGPU reports a call it ended.

In the main process, `pairs.load_pair`, `pairs.loaded` and `pairs.choose_device` record
calls made from any thread but the one that imported the app: on ZeroGPU, CUDA is emulated
only there (`spaces/zero/torch/patching.py`), so a handler thread that loads a pair meets
"Low-level CUDA init reached". Calls in a worker are not recorded here: they happen in
another process.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import spaces.zero

from assisted.models import pairs


def _cuda_stand_in() -> types.ModuleType:
    """`spaces.zero.torch`, where it imports; else a module of its functions, doing nothing."""
    try:
        from spaces.zero import torch as zero_torch
    except AttributeError:  # torch.version.cuda is None: a CPU build
        zero_torch = types.ModuleType("spaces.zero.torch")
        sys.modules["spaces.zero.torch"] = spaces.zero.torch = zero_torch
    return zero_torch


zero_torch = _cuda_stand_in()

from spaces.zero import client, wrappers  # noqa: E402
from spaces.zero import gradio as zero_gradio  # noqa: E402
from spaces.zero.api import ScheduleResponse  # noqa: E402


@dataclass(frozen=True)
class Worker:
    """Marks a call's first yield: the process it ran in (the harness strips it)."""

    pid: int


@dataclass(frozen=True)
class Request:
    duration_s: float | None
    reuse: bool


class ZeroGPU:
    """`spaces`' ZeroGPU wrapper with its scheduler and CUDA calls stubbed (module note)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reuse = True
        self.refusal: tuple[str, str] | None = None  # the next schedule's (title, message)
        self.abort = False  # the next fresh worker dies mid-call, as ZeroGPU ends one
        self.requests: list[Request] = []
        self.releases: list[bool] = []  # each release's `fail`
        self.worker_pids: list[int] = []
        self.handler_calls: list[str] = []  # pairs functions called by main-process threads
        self._main = threading.main_thread()
        self._pid = os.getpid()
        monkeypatch.setattr(client, "schedule", self._schedule)
        monkeypatch.setattr(client, "release", self._release)
        monkeypatch.setattr(client, "allow", lambda token: None)
        monkeypatch.setattr(client, "duration_warning", lambda: None)
        for name in ("unpatch", "init", "move", "enter_mode"):
            monkeypatch.setattr(zero_torch, name, lambda *args, **kwargs: None, raising=False)
        monkeypatch.setattr(zero_torch, "size", lambda: 0, raising=False)
        for name in ("load_pair", "loaded", "choose_device"):
            monkeypatch.setattr(pairs, name, self._watched(name, getattr(pairs, name)))

    def calls(self, tabs=None) -> dict:
        """Every tab's GPU call (of `tabs`, by default `app.TABS`), by its id, each wrapped
        as ZeroGPU wraps it."""
        import app

        return {tab.name: self.wrap(tab.gpu, app._gpu_duration) for tab in tabs or app.TABS}

    def wrap(self, task: Callable[..., Iterator], duration: Callable[..., int]) -> Callable:
        """`task` as `@spaces.GPU(duration=duration)` makes it on ZeroGPU."""

        def marked(*args, **kwargs) -> Iterator:
            yield Worker(os.getpid())
            if self.abort:  # read in the worker: a fresh fork's copy of the flag
                os._exit(1)
            yield from task(*args, **kwargs)

        wrapped = wrappers.generator_function_wrapper(marked, duration, None)

        def handler(*args, **kwargs) -> Iterator:
            for item in wrapped(*args, **kwargs):
                if isinstance(item, Worker):
                    self.worker_pids.append(item.pid)
                else:
                    yield item

        return handler

    def _schedule(self, task_id, request=None, duration=None, gpu_size=None, **kwargs):
        seconds = duration.total_seconds() if duration is not None else None
        self.requests.append(Request(seconds, self.reuse))
        if self.refusal is not None:  # raised as the real client raises it
            title, message = self.refusal
            self.refusal = None
            raise zero_gradio.error(title, message)
        return ScheduleResponse(
            idle=self.reuse, nvidiaIndex=0, nvidiaUUID="stub", allowToken="stub"
        )

    def _release(self, allow_token, *, fail=False, allow_404=False) -> None:
        self.releases.append(fail)

    def _watched(self, name: str, function: Callable) -> Callable:
        def watched(*args, **kwargs):
            if os.getpid() == self._pid and threading.current_thread() is not self._main:
                self.handler_calls.append(name)
            return function(*args, **kwargs)

        return watched
