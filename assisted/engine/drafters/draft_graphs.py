"""The assistant's draft as CUDA graphs: captured once per process and assistant, checked
against the eager draft, replayed with one read back.

On a GPU at batch 1 an eager pass of a small assistant is launch-bound: Python and the
launches of a few hundred small kernels cost more than the kernels' work, so a drafted token
costs nearly a target step (docs/space.md). A CUDA graph replays the kernels a pass launched
when it was captured without Python or launch overhead. ZeroGPU forbids `torch.compile`;
`torch.cuda.CUDAGraph` compiles nothing: it records the assistant's own eager kernels.

Captured per draft length γ = 1 … cap (`static_draft.draft_on_device`: γ passes, the
first of two ids, each argmax the next pass's input, on the static cache of
`static_draft.StaticState`), for each of a few cache sizes (`BUCKETS`): every pass
attends, masked, over its whole cache, so a run drafts on the smallest that holds it
(`for_run`), and its attention reads what the run has, not 4,096 slots. All of an
assistant's graphs share one memory pool: no tensor a capture makes outlives it (the
tests' stand-in holds the capture to that), so their scratch memory is never live between
replays and any order of replays is safe. Each cache's graphs are captured after
warm-up passes on a side stream (cuBLAS picks its kernels there, not inside the capture).
Transformers treats a stream capture as tracing (`is_tracing`), so its mask code takes the
path without host reads.

Then a self-check that can fail (`static_draft.self_check`): every replay against eager
passes on its cache, bit for bit or within the last bits the dtype allows (reported, and
kept), and against the lean loop on a DynamicCache, whose verdict is inconclusive where it
judged too few positions.

Nothing in drafting fails a request. Where the capture, the self-check or the timing of
the replays raises, or the check fails or is inconclusive, the assistant drafts with the
lean loop on a DynamicCache, the path the check trusts, priced at that loop's own cost as
timed then; a replay that raises in a run hands the rest of it to that loop, which the next
preparation times. The outcome is kept for the process (on ZeroGPU, the worker's life), so
nothing that failed is tried again; the run's `drafting_path` says why, in one line. After
a failure, a device that no longer answers (a sticky CUDA error) ends the request in words
instead (below).

Captured in `assisted.engine.engine` (off every run's clock) and kept on the assistant for
the process, so they go with an evicted pair.
`ASSISTED_CUDA_GRAPHS=0` (the CLI's `--no-cuda-graphs`) turns graphs off, for measuring.

The target is never graphed: it stays Transformers' own eager model in both modes, the
comparison a Transformers user would make.

**A broken context.** What a failure in drafting leaves on a GPU: a device that still
answers, where the caller falls back to a path that works (above), or a broken CUDA context,
where nothing can.

A sticky CUDA error (a device-side assert, an illegal address, a launch failure) fails every
later CUDA call in the process, a fallback's too, and a synchronisation: so after any
failure in drafting the device is asked to synchronise (`check_context`). Where it cannot,
the request ends in words (`BrokenContext`), and the process keeps them (`broken`): every
later GPU call says them before it touches the device (`assisted.ui.gpu_calls`), rather than
meet the broken context again. On ZeroGPU the call's exception also retires its worker:
`spaces` 0.51 hands a worker to the next call only when its call ended without one
(`spaces/zero/wrappers.py`, `generator_function_wrapper`: the worker goes back to `workers`
on an `EndResult` alone), so the next request runs in a fresh fork of the main process,
which never ran CUDA. Elsewhere the process has to be restarted.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from assisted.core.record import EAGER, FAILED, PASSED, TRUSTED, DraftingPath
from assisted.engine.drafters.static_draft import (
    DraftGraphs,
    LeanDrafter,
    Replay,
    StaticDrafter,
    StaticState,
    Verdict,
    draft_on_device,
    has_sliding_layers,
    self_check,
    start,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel


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


ENV = "ASSISTED_CUDA_GRAPHS"  # "0" turns graphs off
# Positions of the captured caches: a prompt and its answer, at most the largest (or the
# assistant's `max_position_embeddings`, where fewer). Each doubles the last: a run's
# cache is at most twice what it needs, for 4 captures.
BUCKETS = (512, 1024, 2048, 4096)
WARMUP_DRAFTS = 3  # eager drafts of the longest length on a side stream before capture
TIMED_REPLAYS = 5  # replays of each draft length timed after the self-check
EAGER_STATIC = "eager on a static cache"
DYNAMIC_LOOP = "the lean loop on a DynamicCache"


class CudaGraphs:
    """What a capture asks of CUDA: a side stream for the warm-up, a region of kernels
    recorded as a graph and replayed, a wait for the device. The tests' CPU stand-in takes
    its place (`GRAPHS`), so that the rest of `_capture`, its cache, warm-up and buffers,
    runs there as on a GPU, held to the contract a graph relies on: a replay reads and
    writes the addresses its capture recorded."""

    @contextmanager
    def side_stream(self, device: torch.device) -> Iterator[None]:
        """The body on a side stream, which the current stream then waits for: cuBLAS picks
        its kernels and allocates its workspace there, not inside a capture."""
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            yield
        torch.cuda.current_stream(device).wait_stream(side)

    def pool(self) -> object:
        """A memory pool that graphs may share (`record`)."""
        return torch.cuda.graph_pool_handle()

    def record(self, region: Callable[[], None], pool: object = None) -> Callable[[], None]:
        """`region`'s kernels captured as a graph, its memory from `pool` (None: its own):
        its replay."""
        graph = torch.cuda.CUDAGraph()
        # Thread-local: another thread's CUDA call must not invalidate the capture.
        with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
            region()
        return graph.replay

    def synchronize(self, device: torch.device) -> None:
        torch.cuda.synchronize(device)


GRAPHS = CudaGraphs()


def enabled() -> bool:
    """Whether graphs may be captured and replayed (`ENV` unset or not "0")."""
    return os.environ.get(ENV, "1") != "0"


def device_of(model: PreTrainedModel) -> torch.device:
    return model.device  # a padded vocabulary wraps the input embedding (`models.vocab`)


@dataclass
class _Outcome:
    """What capturing an assistant's graphs gave in process `pid`: graphs that passed the
    self-check, one per cache size, smallest first, or None and why not; the self-check's
    verdict (None where the capture failed first); the lean loop on a DynamicCache's
    seconds per drafted token as the check timed it, which prices the drafts that fall
    back to it (None where not timed)."""

    pid: int
    graphs: tuple[DraftGraphs, ...] | None
    reason: str
    verdict: Verdict | None = None
    loop_s: float | None = None
    untimed: bool = False  # a replay failed in a run: the loop is timed at the next capture()


# The attribute of an assistant that holds its `_Outcome`. On the assistant itself, as the
# outcome's graphs hold the assistant (their static state runs it): kept anywhere else, the
# outcome would keep an evicted assistant, its cache and its graphs' memory alive. On the
# model, the two form a cycle that the collector frees with the pair.
OUTCOME = "_assisted_draft_graphs"


def outcome_of(model: PreTrainedModel) -> _Outcome | None:
    """What capturing `model`'s graphs gave in this process; None where none was tried."""
    found = getattr(model, OUTCOME, None)
    return found if found is not None and found.pid == os.getpid() else None


def capture(model: PreTrainedModel, cap: int, probe: torch.Tensor) -> float | None:
    """Capture `model`'s drafts of up to `cap` tokens where it runs on CUDA and graphs are
    on, once per process (again for a longer cap), and self-check them on the `probe` ids
    (1, n ≥ 3); or time the loop on a DynamicCache that a run fell back to. The seconds
    that took, where this call did it; else None. Raises only `BrokenContext`."""
    if not pending(model, cap):
        return None
    started = time.perf_counter()
    found = outcome_of(model)
    if found is not None and found.untimed:
        found.untimed = False
        found.loop_s = _timed_loop(model, probe.to(model.device), cap, found)
    else:
        setattr(model, OUTCOME, _captured(model, cap, probe))
    return time.perf_counter() - started


def pending(model: PreTrainedModel, cap: int) -> bool:
    """Whether `capture` would capture `model`'s drafts of up to `cap` tokens (on CUDA with
    graphs on, where this process has not tried a cap as long) or time its fallback."""
    if device_of(model).type != "cuda" or not enabled() or has_sliding_layers(model):
        return False  # a sliding-window assistant drafts on a DynamicCache
    found = outcome_of(model)
    if found is None or found.untimed:
        return True
    return found.graphs is not None and found.graphs[0].cap < cap


def draft_costs(model: PreTrainedModel, max_length: int, cap: int) -> dict[int, float] | None:
    """The seconds of a draft of each length γ = 1 … `cap` on the path a greedy run of at
    most `max_length` tokens takes in this process: a replay of γ on the cache the run
    drafts on, each timed after their capture (`for_run`); or γ tokens of the lean loop on
    a DynamicCache after a failed or inconclusive self-check, as the check timed it
    (`falls_back`); else None: the run drafts eagerly, at the calibration's time per token,
    an eager pass's. A policy priced by that where graphs draft would rarely draft; one
    priced by the graphs where the run drafts eagerly, too often."""
    graphs, _ = for_run(model, max_length, cap)
    if graphs is not None:
        return graphs.replay_s
    found = outcome_of(model) if falls_back(model) else None
    if found is None or found.loop_s is None:
        return None
    return {gamma: found.loop_s * gamma for gamma in range(1, cap + 1)}


def falls_back(model: PreTrainedModel) -> bool:
    """Whether `model`'s graphs were tried in this process, on CUDA with graphs on, and
    are not to be trusted: the capture failed, or the self-check failed or was
    inconclusive. Its drafts then take the lean loop on a DynamicCache (the module's note)."""
    found = outcome_of(model)
    return (
        found is not None and found.graphs is None and device_of(model).type == "cuda" and enabled()
    )


def replay_module(model: PreTrainedModel) -> Replay | None:
    """The module whose calls replay `model`'s captured drafts in this process, for the
    hooks that time drafting; None where none were captured."""
    found = outcome_of(model)
    if found is None or found.graphs is None:
        return None
    return found.graphs[0].module  # shared by the graphs of every cache


def drafter_for_run(
    model: PreTrainedModel,
    threshold: float,
    eos_ids: Collection[int],
    cumulative: float,
    max_length: int,
    cap: int,
) -> LeanDrafter | StaticDrafter:
    """The lean drafter of a greedy run of at most `max_length` tokens drafting at most
    `cap` a step: through the graphs captured for `model` where they serve it (`for_run`);
    the loop on a DynamicCache where the graphs failed their capture or self-check, or
    were inconclusive (`falls_back`), or where the assistant has sliding-window layers;
    else eager on a static cache sized for the run (`assisted.engine.drafters.static_draft`)."""
    if has_sliding_layers(model):
        return LeanDrafter(model, threshold, eos_ids, cumulative)
    if falls_back(model):
        found = outcome_of(model)
        return LeanDrafter(model, threshold, eos_ids, cumulative, _fallback_path(found))
    graphs, reason = for_run(model, max_length, cap)
    state = graphs.state if graphs is not None else StaticState(model, max_length, cap)

    def fall_back(error: Exception) -> LeanDrafter:
        """After a replay raised in a run: the loop on a DynamicCache for the rest of it,
        and for the process's later runs (timed at the next capture); `BrokenContext`
        where the device no longer answers."""
        check_context(error, device_of(model), "a replay", GRAPHS.synchronize)
        reason = f"a replay failed in a run ({describe(error)}): {DYNAMIC_LOOP}"
        found = _Outcome(os.getpid(), None, reason, untimed=True)
        setattr(model, OUTCOME, found)
        return LeanDrafter(model, threshold, eos_ids, cumulative, _fallback_path(found))

    return StaticDrafter(state, threshold, eos_ids, cumulative, graphs, reason, fall_back)


def _fallback_path(found: _Outcome) -> DraftingPath:
    """The path of drafts that fell back to the loop on a DynamicCache, and why."""
    verdict = found.verdict
    if verdict is None:
        return DraftingPath(EAGER, found.reason)
    return DraftingPath(
        EAGER, found.reason, None, verdict.check, verdict.judged, verdict.gap, verdict.gap_at
    )


def for_run(model: PreTrainedModel, max_length: int, cap: int) -> tuple[DraftGraphs | None, str]:
    """The graphs a run of at most `max_length` tokens drafting up to `cap` a step replays,
    on the smallest cache that holds it, or None; and why, in words for the run's report."""
    if device_of(model).type != "cuda":
        return None, f"not on CUDA: {EAGER_STATIC}"
    if not enabled():
        return None, f"{ENV}=0: {EAGER_STATIC}"
    found = outcome_of(model)
    if found is None:
        return None, f"no graphs captured in this process: {EAGER_STATIC}"
    if found.graphs is None:
        return None, found.reason
    fits = [graphs for graphs in found.graphs if max_length <= graphs.state.capacity]
    if not fits:
        capacity = found.graphs[-1].state.capacity
        return None, f"the run's {max_length} tokens exceed the graphs' {capacity}: {EAGER_STATIC}"
    if cap > fits[0].cap:
        return None, f"drafts of {cap} exceed the graphs' {fits[0].cap}: {EAGER_STATIC}"
    return fits[0], f"{found.reason}; a cache of {fits[0].state.capacity}"


def _captured(model: PreTrainedModel, cap: int, probe: torch.Tensor) -> _Outcome:
    """Capture, self-check and time the replays (the module's note); the outcome, in this
    process, with the loop on a DynamicCache where any of them raised or the check did not
    pass. The seconds recorded for the capture include the self-check and the timing: a
    worker pays them before it drafts, and a ZeroGPU call's request counts them
    (`assisted.ui.gpu_time`)."""
    pid = os.getpid()
    probe = probe.to(model.device)  # where it runs (`device_of` says whether on CUDA)
    started = time.perf_counter()
    stage, verdict = "the capture", None
    try:
        buckets = _capture(model, cap, probe)
        stage = "the self-check"
        verdict = self_check(buckets, probe)
        stage = "timing the replays"
        timed = [_replay_s(graphs, probe) for graphs in buckets] if verdict.check in TRUSTED else ()
    except Exception as error:  # a fault of the path: the loop drafts
        check_context(error, device_of(model), stage, GRAPHS.synchronize)
        if stage == "the self-check":
            verdict = Verdict(FAILED, 0, f"a replay raised ({describe(error)})")
        reason = f"{stage} failed ({describe(error)}): {DYNAMIC_LOOP}"
        return _fell_back(_Outcome(pid, None, reason, verdict), model, probe, cap)
    if verdict.check not in TRUSTED:
        reason = f"self-check {verdict.check}: {verdict.detail}: {DYNAMIC_LOOP}"
        return _fell_back(_Outcome(pid, None, reason, verdict), model, probe, cap)
    capture_s = time.perf_counter() - started
    for graphs, replay_s in zip(buckets, timed, strict=True):
        graphs.capture_s, graphs.replay_s, graphs.verdict = capture_s, replay_s, verdict
    # Without its seconds: every run in the process reads this reason, and only the call
    # that captured paid them (`DraftingPath.capture_s` keeps them).
    against = "bit for bit"
    if verdict.check != PASSED:
        against = f"within the last bits: {verdict.detail}"
    reason = (
        f"captured and self-checked: every replay as eager passes on its cache, {against}, "
        f"and {verdict.judged} positions as the DynamicCache loop drafts them"
    )
    return _Outcome(pid, buckets, reason, verdict)


def _fell_back(found: _Outcome, model: PreTrainedModel, probe: torch.Tensor, cap: int) -> _Outcome:
    """`found`, a fallback to the loop on a DynamicCache, with that loop's cost timed."""
    found.loop_s = _timed_loop(model, probe, cap, found)
    return found


def _timed_loop(
    model: PreTrainedModel, probe: torch.Tensor, cap: int, found: _Outcome
) -> float | None:
    """The loop on a DynamicCache's seconds per drafted token (`_loop_s`), which prices the
    drafts that fall back to it; None where timing it raised too, said in `found`'s reason
    (the run's own timings then correct the calibration's eager price)."""
    try:
        return _loop_s(model, probe, cap)
    except Exception as error:
        what = "timing the loop on a DynamicCache"
        check_context(error, device_of(model), what, GRAPHS.synchronize)
        found.reason += f"; timing it failed ({describe(error)})"
        return None


def _capture(model: PreTrainedModel, cap: int, probe: torch.Tensor) -> tuple[DraftGraphs, ...]:
    """`model`'s drafts of 1 … `cap` captured as CUDA graphs after `probe` (on its device),
    on a static cache of each size of `BUCKETS` that its positions allow, smallest first,
    all in one memory pool (the module's note); raises where the capture fails."""
    most = getattr(model.config, "max_position_embeddings", BUCKETS[-1])
    capacities = sorted({min(bucket, most) for bucket in BUCKETS})
    pool, module = GRAPHS.pool(), Replay()
    return tuple(
        _capture_cache(model, cap, probe, capacity, pool, module) for capacity in capacities
    )


def _capture_cache(
    model: PreTrainedModel,
    cap: int,
    probe: torch.Tensor,
    capacity: int,
    pool: object,
    module: Replay,
) -> DraftGraphs:
    """`_capture` on one static cache of `capacity` positions."""
    device = probe.device
    with torch.inference_mode():
        state = StaticState(model, capacity, cap)
        state.feed(probe[:, :-2])  # allocates the cache's tensors before any capture
        base = probe.shape[1] - 2
        with GRAPHS.side_stream(device):
            for _ in range(WARMUP_DRAFTS):
                start(state, base, probe[0, -2:])
                draft_on_device(state, cap)
        replays = {
            gamma: GRAPHS.record(functools.partial(draft_on_device, state, gamma), pool)
            for gamma in range(1, cap + 1)
        }
        GRAPHS.synchronize(device)
    return DraftGraphs(state, replays, module=module)


def _loop_s(model: PreTrainedModel, probe: torch.Tensor, cap: int) -> float:
    """The median seconds per drafted token of the lean loop on a DynamicCache drafting
    `cap` after `probe`, its cache holding all but the probe's last id: the path drafts
    take after a failed or inconclusive self-check, timed as `_replay_s` times a replay."""
    drafter, seconds = LeanDrafter(model, 0.0, ()), []
    ids = probe[0].tolist()
    drafter.draft(probe, cap, ids)  # reads the probe
    for _ in range(TIMED_REPLAYS):
        GRAPHS.synchronize(probe.device)
        started = time.perf_counter()
        drafter.draft(probe, cap, ids)
        seconds.append(time.perf_counter() - started)
    return sorted(seconds)[len(seconds) // 2] / cap


def _replay_s(graphs: DraftGraphs, probe: torch.Tensor) -> dict[int, float]:
    """The median seconds of a replay of each draft length after `probe`, read back."""
    state, timed = graphs.state, {}
    with torch.inference_mode():
        for gamma in graphs.replays:
            seconds = []
            for _ in range(TIMED_REPLAYS):
                start(state, probe.shape[1] - 2, probe[0, -2:])
                GRAPHS.synchronize(state.token.device)
                started = time.perf_counter()
                graphs.replay(gamma)
                state.out.tolist()  # the draft's one read, which waits for the replay
                seconds.append(time.perf_counter() - started)
            timed[gamma] = sorted(seconds)[len(seconds) // 2]
        state.rewind(0)
    return timed
