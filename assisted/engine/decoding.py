"""The watched `generate()`: one call of Transformers' own loop per ready plan, streaming
one event per target step.

Each run is one `generate()` call: plain decoding, or assisted generation with the pair's
drafter. The loop, the target's verification and the acceptance rule are Transformers';
we watch them (`assisted.engine.observe`: a streamer and forward hooks turn Transformers'
callbacks into one Step per target step). Under the `auto` schedule, a policy chooses each
step's draft through one seam more (`assisted.engine.drafters.seam`), and the project's
own drafters draft it.

It receives a ready plan (`assisted.engine.plan`: generate()'s arguments, the drafting
seam, the policy and the lookup, built from what `assisted.engine.prepare` built once) and
only runs: it builds, times and writes nothing else, and reads nothing the pair learnt.
Its callers prepare and plan before it, and keep what it learnt once its clock stops
(`assisted.engine.running`).

`generate()` runs in a worker thread and events cross to the caller through a queue, so
the caller (CLI, UI, benchmark) renders as tokens arrive. This module knows nothing of
text rendering: the observer decodes each step's text and its draft's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from assisted.core.record import GENERATE, DraftingPath, Step
from assisted.engine.clock import synchronize
from assisted.engine.events import RunDone, StepEvent
from assisted.engine.observe import StepObserver
from assisted.engine.plan import Plan


class _DropAssistantConfigWarning(logging.Filter):
    """Transformers' own candidate generator passes both a generation_config and length
    arguments to the assistant's generate() and then warns about it on every first call;
    the warning is about its internals, not about anything a user can change."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Passing `generation_config` together with" not in record.getMessage()


logging.getLogger("transformers.generation.utils").addFilter(_DropAssistantConfigWarning())

# How long the caller's thread sleeps on the event queue before checking that the worker is
# still alive. Events wake it at once, so this is only a safety net; a short poll wakes a
# thread that competes with the math library's threads on a small CPU, and slows every
# token.
_POLL_S = 1.0


def generate_watched(
    ready: Plan, stop: threading.Event | None = None
) -> Iterator[StepEvent | RunDone]:
    """The watched `generate()` of a `ready` plan: a StepEvent per target step, then
    RunDone. Setting `stop` ends the run after the current step."""
    pair, mode = ready.pair, ready.mode
    # `halt` is ours: set when the caller abandons this generator, so the worker ends
    # even if the caller's own `stop` is never set.
    halt = threading.Event()
    stopper = StopRequested(*(e for e in (stop, halt) if e is not None))
    assistant = ready.prepared.assistant if ready.prepared else None
    record = ready.record
    events: queue.Queue = queue.Queue()

    def on_step(index: int, step: Step) -> None:
        events.put(StepEvent(mode, index, step))

    prompt_tokens = len(ready.prompt_ids)
    observer = StepObserver(pair, record, on_step, prompt_tokens, ready.policy, ready.plain_steps)
    kwargs = {**ready.kwargs, "streamer": observer}
    kwargs["stopping_criteria"] = StoppingCriteriaList([stopper])
    seam = ready.seam

    def work() -> None:
        try:
            # The drafts' p and q are watched inside the seam, whose generator they wrap.
            with observer.hooks(mode, assistant), seam, observer.watching_drafts():
                if ready.settings.sample:
                    torch.manual_seed(ready.settings.seed)
                synchronize(pair.device)
                observer.start = time.perf_counter()
                with torch.inference_mode():
                    pair.target.generate(**kwargs)
                synchronize(pair.device)
                record.total_s = time.perf_counter() - observer.start
            record.drafting_path = _drafting_path(ready)
            observer.flush()
            record.stopped = stopper.triggered
            events.put(RunDone(record))
        except BaseException as error:  # surfaced in the caller's thread, never swallowed
            events.put(error)

    worker = threading.Thread(target=work, name=f"generate-{mode}", daemon=True)
    worker.start()
    yield from _relay(events, worker, halt)


def _drafting_path(ready: Plan) -> DraftingPath | None:
    """How the run's assistant drafted: as the lean drafter its seam built says, else
    through the assistant's own `generate()`; None without an assistant model."""
    prepared = ready.prepared
    if prepared is None or prepared.assistant is None:
        return None
    if ready.built:
        return ready.built[-1].path
    reason = f"the {prepared.draft.schedule} schedule drafts through Transformers' generator"
    if ready.settings.sample:
        reason = "sampling reads the assistant's scores, which its generate() returns"
    return DraftingPath(GENERATE, reason)


def _relay(
    events: queue.Queue, worker: threading.Thread, halt: threading.Event
) -> Iterator[StepEvent | RunDone]:
    """The `worker`'s events as they arrive, up to its RunDone; an error it put there is
    raised here, in the caller's thread. Sets `halt` and waits for the worker however this
    ends: the caller may abandon us mid-run (a closed browser tab), and the next run must
    never race this one on the device."""
    try:
        while True:
            try:
                item = events.get(timeout=_POLL_S)
            except queue.Empty:
                if not worker.is_alive() and events.empty():
                    raise RuntimeError("generation ended without a result") from None
                continue
            if isinstance(item, BaseException):
                raise item
            yield item
            if isinstance(item, RunDone):
                return
    finally:
        halt.set()
        worker.join()


def generate_bare(ready: Plan) -> tuple[list[int], float]:
    """One `generate()` call of a `ready` plan with no streamer, hooks or thread: the overhead
    baseline. Under `auto` the policy still chooses each step's γ, from its calibration and
    the acceptance it sees (no timed verifications refine it here)."""
    pair, settings = ready.pair, ready.settings
    if settings.sample:
        torch.manual_seed(settings.seed)
    synchronize(pair.device)
    start = time.perf_counter()
    with torch.inference_mode(), ready.seam:
        output = pair.target.generate(**ready.kwargs)
    synchronize(pair.device)
    elapsed = time.perf_counter() - start
    return output[0, len(ready.prompt_ids) :].tolist(), elapsed


class StopRequested(StoppingCriteria):
    """Ends generation after the current step once any of `events` is set."""

    def __init__(self, *events: threading.Event):
        self.events = events
        self.triggered = False

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        self.triggered = any(event.is_set() for event in self.events)
        return torch.full(
            (input_ids.shape[0],), self.triggered, dtype=torch.bool, device=input_ids.device
        )
