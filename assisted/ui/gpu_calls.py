"""What every GPU entry point does inside its call (each tab's `gpu` module): the pair
ready in the call's process (`gpu_ready`), its status lines passed on as the tab's values
(`map_yields`).

On ZeroGPU each call runs in a process forked from the main one (or an idle one reused):
it loads the pair where that process does not hold it, and starts from what earlier
processes learnt.
"""

import time
from collections.abc import Callable, Generator
from typing import Any

from assisted.engine import learning
from assisted.models import pairs
from assisted.ui.requests import PairPlace


def gpu_ready(place: PairPlace) -> Generator[str, None, tuple[pairs.LoadedPair, float | None]]:
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
        yield f"**Loading** `{spec.name}` inside this GPU call…"
        started = time.perf_counter()
        pair = pairs.load_pair(spec, device, dtype, allow_local=place.allow_local)
        load_s = time.perf_counter() - started
    else:
        learning.refresh(pair)
    return pair, load_s


def map_yields(function: Callable[[Any], Any], generator: Generator) -> Generator:
    """`generator`'s yields passed through `function`; returns what it returns."""
    while True:
        try:
            item = next(generator)
        except StopIteration as done:
            return done.value
        yield function(item)
