"""What a failure in drafting leaves on a GPU: a device that still answers, where the
caller falls back to a path that works (`assisted.engine.drafters.draft_graphs`), or a
broken CUDA context, where nothing can.

A sticky CUDA error (a device-side assert, an illegal address, a launch failure) fails
every later CUDA call in the process, a fallback's too, and a synchronisation: so after any
failure in drafting the device is asked to synchronise (`check_context`). Where it cannot,
the request ends in words (`BrokenContext`), and the process keeps them (`broken`): every
later GPU call says them before it touches the device (`assisted.ui.gpu_calls`), rather
than meet the broken context again. On ZeroGPU the call's exception also retires its
worker: `spaces` 0.51 hands a worker to the next call only when its call ended without one
(`spaces/zero/wrappers.py`, `generator_function_wrapper`: the worker goes back to
`workers` on an `EndResult` alone), so the next request runs in a fresh fork of the main
process, which never ran CUDA. Elsewhere the process has to be restarted.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch


class BrokenContext(RuntimeError):
    """The device stopped answering after a failure in drafting (`check_context`). Its text
    is for the page."""


# pid: why its CUDA context broke. Keyed by process: a fork starts from a copy of its
# parent's dict, and on ZeroGPU the parent never ran CUDA (it is emulated there).
_broken: dict[int, str] = {}


def broken() -> str | None:
    """Why this process's CUDA context broke (`BrokenContext`'s words); None where it did not."""
    return _broken.get(os.getpid())


def check_context(
    error: Exception,
    device: torch.device,
    what: str,
    synchronize: Callable[[torch.device], None],
) -> None:
    """Raise `BrokenContext` from `error`, which `what` raised on `device`, where the device
    no longer answers `synchronize`; else return, and the caller falls back."""
    if device.type != "cuda":
        return
    try:
        synchronize(device)
    except Exception:
        words = (
            f"The GPU stopped answering after {what} failed ({describe(error)}): its CUDA "
            "context is broken, and nothing more can run in it. On ZeroGPU the next request "
            "starts in a fresh GPU worker; elsewhere the app has to be restarted."
        )
        _broken[os.getpid()] = words
        raise BrokenContext(words) from error


def describe(error: Exception) -> str:
    """`error` in one line: its type and the first line of its message."""
    message = str(error).strip()
    first = message.splitlines()[0][:160] if message else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
