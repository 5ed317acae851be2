"""What every tab's GPU call takes: one request object per call, built once from the tab's
inputs, given whole to the GPU entry point and to the function that sizes its ZeroGPU
duration (each tab's `format` and `gpu` modules). This module holds what every request
has (`GpuRequest`): the place of its pair (`PairPlace`), its Stop flag, and the tokens it
times, from which `assisted.ui.gpu_time` sizes its call.

On ZeroGPU the call runs in a forked process and its arguments are pickled: a request is
a frozen dataclass of plain values, the settings and a Stop flag that a file carries
across processes (`StopFlag`). No torch, no gradio.

Stop requests that a forked process can see: one file per request.

The Stop button's handler runs in the app's main process. On ZeroGPU the run it must stop
streams from another process, forked from the main one for each GPU call or an idle one
reused (`spaces/zero/wrappers.py`), which holds its own copy of everything it inherited: a
`threading.Event` set in the main process never reaches it. A file does, in a folder made
at import, before any fork, so that every process names the same one. Off ZeroGPU the
same flags serve the threads of one process.

A run checks its flag once per target step (`assisted.engine.decoding`): one `stat` call, a few
microseconds, against steps of tens of milliseconds or more.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from assisted.models.registry import PairSpec


class StopFlag:
    """One request's Stop, readable from any process: `set()` in one, `is_set()` in
    another. The same methods as `threading.Event` that a run uses."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def is_set(self) -> bool:
        return self.path.exists()

    def set(self) -> None:
        self.path.touch()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StopFlag) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)


class StopFlags:
    """The stop flags of the requests under way, by key (the session, and the tab).

    `open(key)` gives a request its own flag and `close(key, flag)` ends it, in the process
    that serves the page; `get(key)` is the Stop button's way to it. A flag is picklable:
    a GPU worker is handed the flag itself, and reads the same file."""

    def __init__(self, folder: Path | None = None) -> None:
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="assisted-stops-"))
            # The process that made the folder removes it on exit; forks never run this.
            weakref.finalize(self, shutil.rmtree, folder, True)
        self.folder = folder
        self._open: dict[str, StopFlag] = {}
        self._lock = threading.Lock()

    def open(self, key: str) -> StopFlag:
        """A new request under `key`, with a flag of its own: a Stop meant for an earlier
        request of the same session does not stop this one. The key may hold any text; the
        file is named by a random id."""
        flag = StopFlag(self.folder / uuid.uuid4().hex)
        with self._lock:
            self._open[key] = flag
        return flag

    def close(self, key: str, flag: StopFlag) -> None:
        """The request that opened `flag` ended: forget it (unless a newer request of the
        same key replaced it meanwhile) and remove its file."""
        with self._lock:
            if self._open.get(key) == flag:
                del self._open[key]
        flag.clear()

    def get(self, key: str) -> StopFlag | None:
        """The flag of the request under way under `key`; None when there is none."""
        with self._lock:
            return self._open.get(key)

    def __getitem__(self, key: str) -> StopFlag:
        flag = self.get(key)
        if flag is None:
            raise KeyError(key)
        return flag


@dataclass(frozen=True)
class PairPlace:
    """Where a call finds its pair: loaded on `device` in `dtype`, local folders accepted
    for its ids only with `allow_local`."""

    spec: PairSpec
    device: str
    dtype: str
    allow_local: bool


class GpuRequest(Protocol):
    """What every tab's request for a GPU call holds (`ComparisonRequest`,
    `BenchmarkRequest`, `ShootoutRequest`, each in its tab's `format`)."""

    @property
    def pair(self) -> PairPlace: ...
    @property
    def stop(self) -> StopFlag: ...
    def timed_tokens(self) -> tuple[int, int]:
        """The new tokens the call times, plain and assisted."""
        ...

    def drafting_cap(self) -> int:
        """The longest draft the call's runs ask of the assistant: the cap its drafts are
        captured as graphs for, on CUDA (`assisted.ui.gpu_time.capture_s`)."""
        ...
