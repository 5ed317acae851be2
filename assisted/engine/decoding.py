"""Decoding runs that stream one event per target step, observing Transformers' own loop.

Each run is one `generate()` call: plain decoding, or assisted generation with the pair's
drafter. We never reimplement speculative decoding; we watch it (`assisted.engine.observe`: a
streamer and forward hooks turn Transformers' callbacks into one Step per target step).
Under the `auto` schedule, a policy chooses each step's draft through one seam more
(`assisted.engine.auto`).

An assisted run receives what `assisted.engine.prepare` built once (the drafting model, the
calibrated costs, the template's facts) and only runs: it builds, times and reads nothing
else. Its callers prepare first (`compare` and `warm_up` do); a run that finds nothing
prepared prepares before its clock starts. What an `auto` run learnt is saved at its end,
after the clock stops (`learning.keep_learnt`; a plain run's T(1), `learning.keep_plain_steps`):
every caller passes there, and on ZeroGPU the worker's memory ends with the call.

`generate()` runs in a worker thread and events cross to the caller through a queue, so
the caller (CLI, UI, benchmark) renders as tokens arrive. This module knows nothing of
text rendering: the observer decodes each step's text and its draft's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from assisted.analysis import stats
from assisted.core import bands
from assisted.core.bands import Band
from assisted.core.record import Mode, RunRecord, Step
from assisted.core.settings import (
    WARMUP_TOKENS,
    DraftSettings,
    RunSettings,
    SettingsError,
    validate_prompt,
)
from assisted.engine import generation, hindsight, learning
from assisted.engine.drafters.lookup import SuffixLookup
from assisted.engine.observe import StepObserver, synchronize
from assisted.engine.prepare import WARMUP_PROMPT, Prepared, chat_ids, prepare
from assisted.models import learnt_store
from assisted.models.loading import release_memory
from assisted.models.pairs import LoadedPair
from assisted.policy.choice import DraftPolicy
from assisted.policy.costs import PlainSteps

if TYPE_CHECKING:
    pass


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


@dataclass(frozen=True)
class StepEvent:
    """One target step of a run, as it happens."""

    mode: Mode
    index: int
    step: Step


@dataclass(frozen=True)
class RunDone:
    """A run finished (or was stopped); the record holds everything it produced."""

    record: RunRecord


@dataclass(frozen=True)
class Phase:
    """The comparison moved on: "warmup", "plain" or "assisted"."""

    name: str


Event = StepEvent | RunDone | Phase


def encode_prompt(pair: LoadedPair, prompt: str, chat_template: bool = True) -> list[int]:
    """Token ids of `prompt`, wrapped in the target's chat template where it has one."""
    validate_prompt(prompt)
    tokenizer = pair.tokenizer
    if chat_template and tokenizer.chat_template:
        return chat_ids(tokenizer, prompt)
    return list(tokenizer(prompt)["input_ids"])


def check_length(pair: LoadedPair, prompt_ids: list[int], settings: RunSettings) -> None:
    context = pair.context_length
    if context and len(prompt_ids) + settings.max_new_tokens > context:
        raise SettingsError(
            f"the prompt has {len(prompt_ids):,} tokens; with {settings.max_new_tokens} new "
            f"tokens that exceeds the model's context of {context:,} tokens"
        )


def run(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
    stop: threading.Event | None = None,
) -> Iterator[StepEvent | RunDone]:
    """Run one prompt in one mode, yielding a StepEvent per target step, then RunDone.
    An assisted run drafts as `prepare(pair, draft)` prepared it (done first if need be)."""
    draft = _checked(pair, prompt_ids, settings, draft)
    yield from _run(pair, prompt_ids, mode, settings, draft, stop)


def _checked(
    pair: LoadedPair, prompt_ids: list[int], settings: RunSettings, draft: DraftSettings | None
) -> DraftSettings:
    """Refuse settings, a draft or a length the pair cannot run; the draft to run with."""
    settings.validate()
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    check_length(pair, prompt_ids, settings)
    return draft


def _run(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings,
    stop: threading.Event | None,
) -> Iterator[StepEvent | RunDone]:
    """`run` on settings it has checked."""
    prepared = prepare(pair, draft, settings) if mode == "assisted" else None
    # `halt` is ours: set when the caller abandons this generator, so the worker ends
    # even if the caller's own `stop` is never set.
    halt = threading.Event()
    stopper = generation.StopRequested(*(e for e in (stop, halt) if e is not None))
    drafter = pair.spec.drafter if prepared else None
    assistant = prepared.assistant if prepared else None
    band = bands.band(settings)
    policy = generation.auto_policy(pair, prepared, band)
    record = RunRecord(
        mode=mode,
        drafter=drafter,
        prompt_tokens=len(prompt_ids),
        assistant_precision=prepared.assistant_precision if prepared else None,
        dtype=pair.dtype_name,
        sampled=settings.sample,
        calibration=learnt_store.calibration(pair.learnt, pair.learnt_file) if policy else None,
        acceptance_band=band if policy else None,
    )
    events: queue.Queue = queue.Queue()

    def on_step(index: int, step: Step) -> None:
        events.put(StepEvent(mode, index, step))

    # A plain run's passes set the pair's T(1), once something has timed its T(k)
    # (`learning.keep_plain_steps`).
    timed = mode == "plain" and 1 in pair.learnt.verify_s
    plain_steps = PlainSteps() if timed else None
    observer = StepObserver(pair, record, on_step, len(prompt_ids), policy, plain_steps)
    kwargs = generation.generate_kwargs(pair, prompt_ids, settings, prepared, observer, stopper)
    lookup = generation.lookup_for(prompt_ids, settings, prepared)
    built: list = []  # the lean drafter the seam builds, whose path the record keeps
    seam = generation.drafting_seam(pair, prepared, policy, lookup, built)

    def work() -> None:
        try:
            # The drafts' p and q are watched inside the seam, whose generator they wrap.
            with observer.hooks(mode, assistant), seam, observer.watching_drafts():
                if settings.sample:
                    torch.manual_seed(settings.seed)
                synchronize(pair.device)
                observer.start = time.perf_counter()
                with torch.inference_mode():
                    pair.target.generate(**kwargs)
                synchronize(pair.device)
                record.total_s = time.perf_counter() - observer.start
            record.drafting_path = generation.drafting_path(prepared, settings, built)
            observer.flush()
            record.stopped = stopper.triggered
            if prepared is not None:
                _after(pair, prepared, prompt_ids, record, policy, lookup, band)
            learning.keep_plain_steps(pair, plain_steps)
            events.put(RunDone(record))
        except BaseException as error:  # surfaced in the caller's thread, never swallowed
            events.put(error)

    worker = threading.Thread(target=work, name=f"generate-{mode}", daemon=True)
    worker.start()
    yield from _relay(events, worker, halt)


def drain(events: Iterable[Event]) -> RunRecord:
    """A run's events consumed to its end: the record its RunDone carries."""
    for event in events:
        if isinstance(event, RunDone):
            return event.record
    raise RuntimeError("the run ended without a record")


def _after(
    pair: LoadedPair,
    prepared: Prepared,
    prompt_ids: list[int],
    record: RunRecord,
    policy: DraftPolicy | None,
    lookup: SuffixLookup | None,
    band: Band,
) -> None:
    """Off the assisted run's clock: its hindsight for the oracle (`assisted.engine.hindsight`),
    and under `auto` its final costs and what it learnt, kept for the pair's next runs in
    its temperature `band`."""
    record.hindsight = hindsight.find(pair, prepared, prompt_ids, record, policy, lookup)
    if policy is not None:
        record.verify_cost_s = policy.costs.verify_curve()
        learning.keep_learnt(pair, prepared.precision, policy, band)


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


def compare(
    pair: LoadedPair,
    prompt: str,
    settings: RunSettings,
    draft: DraftSettings | None = None,
    modes: tuple[Mode, ...] = ("plain", "assisted"),
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """Prepare and warm up, then run `modes` one after the other on one device, streaming
    every event."""
    prompt_ids = encode_prompt(pair, prompt, settings.chat_template)
    yield from compare_ids(pair, prompt_ids, settings, draft, modes, stop)


def compare_ids(
    pair: LoadedPair,
    prompt_ids: list[int],
    settings: RunSettings,
    draft: DraftSettings | None = None,
    modes: tuple[Mode, ...] = ("plain", "assisted"),
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """`compare` for a prompt its caller encoded (`encode_prompt`), checked once for
    every run."""
    draft = _checked(pair, prompt_ids, settings, draft)
    stop = stop or threading.Event()
    yield Phase("warmup")
    warm_up(pair, modes, draft, settings)
    for mode in modes:
        if stop.is_set():
            break
        yield Phase(mode)
        yield from _run(pair, prompt_ids, mode, settings, draft, stop)


def warm_up(
    pair: LoadedPair,
    modes: tuple[Mode, ...],
    draft: DraftSettings | None = None,
    settings: RunSettings | None = None,
) -> None:
    """Prepare the pair to draft with `draft` (`assisted.engine.prepare`) where `modes` draft, then
    run each mode briefly once per loaded pair and path (greedy, or sampled where
    `settings` sample: warping, sampling and the assistant's generator in place of the
    lean loop have first-call costs of their own), so no timed run pays first-call costs;
    then hand back to the system what the first runs, a quantized copy and the
    calibration freed."""
    sampled = settings is not None and settings.sample
    prepared = prepare(pair, draft, settings) if "assisted" in modes else None
    ids = encode_prompt(pair, WARMUP_PROMPT)
    warm = RunSettings(max_new_tokens=WARMUP_TOKENS)
    if sampled:  # the run's own temperature and top-p
        warm = settings.with_(max_new_tokens=WARMUP_TOKENS, chat_template=True)
    warmed = False
    for mode in modes:
        # Each assistant precision is its own model, with its own first-call costs.
        key = mode if mode == "plain" else f"{mode}:{prepared.precision}"
        key += ":sampled" if sampled else ""
        if key not in pair.warmed_modes:
            for _ in run(pair, ids, mode, warm, draft):
                pass
            pair.warmed_modes.add(key)
            warmed = True
    if warmed:
        release_memory()


def report(
    pair: LoadedPair, plain: RunRecord | None, assisted: RunRecord | None, steps: bool = True
) -> dict:
    """`stats.report` of a comparison on `pair` (`per_step` only with `steps`), with the
    text of the tokens where the runs diverged (`divergence`'s `plain_text` and
    `assisted_text`)."""
    device, dtype = str(pair.device), pair.dtype_name
    result = stats.report(pair.spec.name, device, dtype, plain, assisted, steps)
    found = result["divergence"]
    if found is not None:
        for run in ("plain", "assisted"):
            token = found[f"{run}_token"]
            found[f"{run}_text"] = None if token is None else pair.tokenizer.decode([token])
    return result


def generate_bare(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
) -> tuple[list[int], float]:
    """One `generate()` call with no streamer, hooks or thread: the overhead baseline.
    Under `auto` the policy still chooses each step's γ, from its calibration and the
    acceptance it sees (no timed verifications refine it here)."""
    prepared = prepare(pair, draft, settings) if mode == "assisted" else None
    kwargs = generation.generate_kwargs(pair, prompt_ids, settings, prepared, None, None)
    policy = generation.auto_policy(pair, prepared, bands.band(settings))
    if settings.sample:
        torch.manual_seed(settings.seed)
    seam = generation.drafting_seam(
        pair, prepared, policy, generation.lookup_for(prompt_ids, settings, prepared)
    )
    synchronize(pair.device)
    start = time.perf_counter()
    with torch.inference_mode(), seam:
        output = pair.target.generate(**kwargs)
    synchronize(pair.device)
    elapsed = time.perf_counter() - start
    return output[0, len(prompt_ids) :].tolist(), elapsed
