"""ZeroGPU, emulated: the app's GPU functions run as `spaces` 0.51 runs them on a Space.

The real wrapper does the work (`spaces.zero.wrappers.generator_function_wrapper`): each
call runs in a process forked from this one, a fresh one or the idle worker of an earlier
call reused; the arguments go there pickled, every yield comes back pickled, and nothing
the call changes in that process flows back. Stubbed are only what needs the Hub's
servers or a GPU: the scheduler's HTTP calls (`client.schedule`, `release`, `allow`,
`duration_warning`) and the CUDA work of a worker's start (`torch.unpatch`, `init`, `move`).
The models stay on the CPU. On a CPU build of torch, `spaces.zero.torch` cannot even be
imported (it reads `torch.version.cuda`), so a stand-in module of the same functions takes
its place.

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
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import spaces.zero
import torch

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

    def calls(self):
        """The app's GPU entry points (`app.GpuCalls`), each wrapped as ZeroGPU wraps it."""
        import app

        return app.GpuCalls(
            self.wrap(app.stream_comparison, app._gpu_duration),
            self.wrap(app.stream_benchmark, app._bench_gpu_duration),
        )

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


# The slice ZeroGPU's patch describes (`spaces/config.py`'s defaults).
SLICE = SimpleNamespace(
    name="NVIDIA H200 MIG 3g.71gb",
    total_memory=74625056768,
    major=9,
    minor=0,
    multi_processor_count=60,
)
LOW_LEVEL_INIT = "Low-level CUDA init (`torch._C._cuda_init`) reached"


_DEVICE = torch.device


def _is_cuda(value: object) -> bool:
    """A CUDA device: by name, or by index, which ZeroGPU reads as CUDA's (`no_int_device`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, str | _DEVICE) and str(value).startswith("cuda")


class _DeviceMeta(type):
    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, _DEVICE)


class _DeviceByName(metaclass=_DeviceMeta):
    """`torch.device` as ZeroGPU replaces it (`_DeviceStringOnly`): an index names a CUDA
    device, so nothing asks torch which accelerator this machine has."""

    def __new__(cls, *args, **kwargs):
        if args and isinstance(args[0], int) and not isinstance(args[0], bool):
            args = (f"cuda:{args[0]}", *args[1:])
        return _DEVICE(*args, **kwargs)


class _CudaStaysHere(torch.overrides.TorchFunctionMode):
    """In the thread that entered it, what is asked onto CUDA stays on the CPU, as ZeroGPU
    keeps it aside until a call's worker moves it (`ZeroGPUFunctionMode`)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {
            k: "cpu" if k == "device" and _is_cuda(v) else v for k, v in (kwargs or {}).items()
        }
        if func is torch.Tensor.to:
            args = tuple("cpu" if _is_cuda(arg) else arg for arg in args)
        return func(*args, **kwargs)


def _raise_low_level_init(*args, **kwargs):
    raise RuntimeError(
        f"{LOW_LEVEL_INIT}. This means ZeroGPU's PyTorch CUDA emulation mode did not "
        "intercept a CUDA operation in your code."
    )


@contextmanager
def cuda_emulated_in_this_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """CUDA as ZeroGPU emulates it in the main process (`spaces/zero/torch/patching.py`),
    on this CPU: `torch.cuda` answers for one device of the slice's properties, as its
    patch makes it, and `torch.accelerator` as a CUDA build does; in the calling thread,
    taken for the one that imported `spaces`, tensors asked onto CUDA stay on the CPU; in
    any other thread a copy to CUDA reaches the low-level init, which raises as `spaces`'
    own replacement does. Its modes are per thread, its patches global: so is this."""
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda, "current_device", lambda: 0)
    monkeypatch.setattr(cuda, "synchronize", lambda *args: None)
    monkeypatch.setattr(cuda, "get_device_properties", lambda *args, **kwargs: SLICE)
    monkeypatch.setattr(cuda, "get_device_capability", lambda *args, **kwargs: (9, 0))
    monkeypatch.setattr(cuda, "get_device_name", lambda *args, **kwargs: SLICE.name)
    monkeypatch.setattr(cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    monkeypatch.setattr(cuda, "mem_get_info", lambda *args: (SLICE.total_memory,) * 2)
    # Every CUDA call that no mode intercepts initialises CUDA through here.
    monkeypatch.setattr(cuda, "_lazy_init", _raise_low_level_init)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: 1)
    monkeypatch.setattr(torch, "device", _DeviceByName)
    with _CudaStaysHere():
        yield
