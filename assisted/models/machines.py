"""The machines ZeroGPU runs calls on, as the installed `spaces` knows them: its
`spaces/zero/configs.json`, read the way `spaces.zero.config` reads it (a package resource),
so the app follows `spaces` when ZeroGPU's hardware changes. No torch.

`spaces` 0.51 knows the H200 (its MIG half, which ZeroGPU ran on before) and the RTX PRO
6000 Blackwell Server Edition (the whole card). On the Blackwell a call is `large` by
default, half the card; `spaces` makes every call `xlarge`, the whole card at twice the
quota, once the weights packed at the launch exceed `xlarge_threshold`
(`spaces/zero/__init__.py`, `startup`, which sets `spaces.zero.default_gpu_size()`), and
it multiplies the requested duration of a call that is not `xlarge` by `duration_factor`
(`spaces/zero/client.py`, `get_duration_seconds`).
"""

from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Machine:
    """One of `spaces`' machines: the GPU model its driver names, the memory CUDA reports,
    its SMs, what a `large` call's duration is multiplied by, and the packed weights past
    which every call is `xlarge` (None: the machine has no `xlarge`)."""

    model: str
    memory_bytes: int
    sm_count: int
    duration_factor: float
    xlarge_threshold: int | None

    @property
    def large_bytes(self) -> float:
        """The memory of a `large` call: where an `xlarge` exists, the config's memory is
        the whole card's (the Blackwell's 102 GB) and `large` is half of it (hub-docs:
        48 GB); else the config's memory is the slice's own (the H200's MIG half)."""
        return self.memory_bytes / 2 if self.xlarge_threshold is not None else self.memory_bytes


@functools.cache
def machines() -> tuple[Machine, ...]:
    """Every machine the installed `spaces` knows, in its file's order."""
    from importlib.resources import files

    from spaces.zero import config

    raw = json.loads(files("spaces.zero").joinpath(config.CONFIGS_FILENAME).read_text())
    return tuple(
        Machine(
            item["model"],
            item["memory"],
            item["sm_count"],
            item["duration_factor"],
            item["xlarge_threshold"],
        )
        for item in raw
    )


def duration_factor() -> float:
    """What `spaces` multiplies this app's calls' requested duration by in this process, as
    `get_duration_seconds` does: 1.0 where the default size is `xlarge` (the app's calls
    name no size, so they take the default, `spaces.zero.default_gpu_size()`), else the
    factor of the machine it names (`spaces.zero.config.get_config`), the driver's GPU
    where the process sees one, else the first machine of its file."""
    from spaces import zero
    from spaces.zero import config

    if zero.default_gpu_size() == "xlarge":
        return 1.0
    with warnings.catch_warnings():
        # Its complaint that no driver is there: off ZeroGPU, and in tests, always so.
        warnings.simplefilter("ignore", UserWarning)
        return config.get_config()["duration_factor"]


def smallest_large_bytes() -> float:
    """The memory of the smallest `large` call among the machines: what the default pair,
    preloaded for every call, must fit."""
    return min(machine.large_bytes for machine in machines())


def lowest_xlarge_threshold() -> int | None:
    """The least packed weight past which `spaces` makes every call `xlarge` on some
    machine; None where no machine has an `xlarge`."""
    thresholds = [m.xlarge_threshold for m in machines() if m.xlarge_threshold is not None]
    return min(thresholds) if thresholds else None
