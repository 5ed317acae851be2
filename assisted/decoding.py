"""Decoding runs that stream one event per target step, observing Transformers' own loop.

Each run is one `generate()` call: plain decoding, or assisted generation with the pair's
drafter. We never reimplement speculative decoding; we watch it (`assisted.observe`: a
streamer and forward hooks turn Transformers' callbacks into one Step per target step).
Under the `auto` schedule, a policy chooses each step's draft through one seam more
(`assisted.auto`).

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
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

from assisted import auto, learnt_store, quantize, stats
from assisted.drafters import DrafterKind
from assisted.loading import release_memory
from assisted.lookup import SuffixLookup, user_span
from assisted.observe import StepObserver, synchronize
from assisted.pairs import LoadedPair
from assisted.policy import DraftPolicy
from assisted.record import Mode, RunRecord, Step
from assisted.settings import (
    WARMUP_TOKENS,
    DraftSettings,
    RunSettings,
    SettingsError,
    validate_prompt,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class _DropAssistantConfigWarning(logging.Filter):
    """Transformers' own candidate generator passes both a generation_config and length
    arguments to the assistant's generate() and then warns about it on every first call;
    the warning is about its internals, not about anything a user can change."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Passing `generation_config` together with" not in record.getMessage()


logging.getLogger("transformers.generation.utils").addFilter(_DropAssistantConfigWarning())

_WARMUP_PROMPT = "Write one short sentence about the sea."
# How long the caller's thread sleeps on the event queue before checking that the worker is
# still alive. Events wake it at once, so this is only a safety net; a short poll wakes a
# thread that competes with the math library's threads on a small CPU (measured: +4% per
# token on 2 cores with 0.05 s).
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
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(prompt)["input_ids"]
    return list(ids)


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
    """Run one prompt in one mode, yielding a StepEvent per target step, then RunDone."""
    settings.validate()
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    check_length(pair, prompt_ids, settings)
    # `halt` is ours: set when the caller abandons this generator, so the worker ends
    # even if the caller's own `stop` is never set.
    halt = threading.Event()
    stopper = _StopRequested(*(e for e in (stop, halt) if e is not None))
    drafter = pair.spec.drafter if mode == "assisted" else None
    # Before the clock starts: an int8 copy of the assistant is made on first use.
    assistant, precision = _drafting_assistant(pair, draft) if drafter else (None, None)
    # Before the clock starts too: the policy's calibration, timed once per pair.
    policy = _auto_policy(pair, draft, assistant) if drafter else None
    record = RunRecord(
        mode=mode,
        drafter=drafter,
        prompt_tokens=len(prompt_ids),
        assistant_precision=precision,
        dtype=pair.dtype_name,
        sampled=settings.sample,
        calibration=learnt_store.calibration(pair.learnt, pair.learnt_file) if policy else None,
    )
    events: queue.Queue = queue.Queue()

    def on_step(index: int, step: Step) -> None:
        events.put(StepEvent(mode, index, step))

    observer = StepObserver(pair, record, on_step, len(prompt_ids), policy)
    kwargs = _generate_kwargs(pair, prompt_ids, mode, settings, draft, observer, stopper, assistant)
    seam = _drafting_seam(pair, prompt_ids, draft, policy) if drafter else nullcontext()

    def work() -> None:
        try:
            with observer.hooks(mode, assistant), seam:
                if settings.sample:
                    torch.manual_seed(settings.seed)
                synchronize(pair.device)
                observer.start = time.perf_counter()
                with torch.inference_mode():
                    pair.target.generate(**kwargs)
                synchronize(pair.device)
                record.total_s = time.perf_counter() - observer.start
            observer.flush()
            if policy is not None:
                record.verify_cost_s = policy.costs.verify_curve()
                auto.keep_learnt(pair, _precision_key(pair, draft), policy)  # off the clock
            record.stopped = stopper.triggered
            events.put(RunDone(record))
        except BaseException as error:  # surfaced in the caller's thread, never swallowed
            events.put(error)

    worker = threading.Thread(target=work, name=f"generate-{mode}", daemon=True)
    worker.start()
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
        # The caller may abandon us mid-run (closed browser tab): stop the worker and wait,
        # so the next run never races this one on the device.
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
    """Warm up, then run `modes` one after the other on one device, streaming every event."""
    prompt_ids = encode_prompt(pair, prompt, settings.chat_template)
    settings.validate()
    check_length(pair, prompt_ids, settings)
    stop = stop or threading.Event()
    yield Phase("warmup")
    warm_up(pair, modes, draft)
    for mode in modes:
        if stop.is_set():
            break
        yield Phase(mode)
        yield from run(pair, prompt_ids, mode, settings, draft, stop)


def warm_up(pair: LoadedPair, modes: tuple[Mode, ...], draft: DraftSettings | None = None) -> None:
    """Run each mode briefly once per loaded pair, so no timed run pays first-call costs;
    then hand back to the system what the first runs, a quantized copy and the calibration
    freed."""
    ids = encode_prompt(pair, _WARMUP_PROMPT)
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    warmed = False
    for mode in modes:
        # Each assistant precision is its own model, with its own first-call costs.
        key = mode if mode == "plain" else f"{mode}:{_precision_key(pair, draft)}"
        if key not in pair.warmed_modes:
            for _ in run(pair, ids, mode, RunSettings(max_new_tokens=WARMUP_TOKENS), draft):
                pass
            pair.warmed_modes.add(key)
            warmed = True
    if warmed:
        release_memory()


def report(pair: LoadedPair, plain: RunRecord | None, assisted: RunRecord | None) -> dict:
    """`stats.report` of a comparison on `pair`, with the text of the tokens where the runs
    diverged (`divergence`'s `plain_text` and `assisted_text`)."""
    result = stats.report(pair.spec.name, str(pair.device), pair.dtype_name, plain, assisted)
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
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    assistant, _ = _drafting_assistant(pair, draft) if mode == "assisted" else (None, None)
    kwargs = _generate_kwargs(pair, prompt_ids, mode, settings, draft, None, None, assistant)
    policy = _auto_policy(pair, draft, assistant) if mode == "assisted" else None
    if settings.sample:
        torch.manual_seed(settings.seed)
    seam = _drafting_seam(pair, prompt_ids, draft, policy) if mode == "assisted" else nullcontext()
    synchronize(pair.device)
    start = time.perf_counter()
    with torch.inference_mode(), seam:
        output = pair.target.generate(**kwargs)
    synchronize(pair.device)
    elapsed = time.perf_counter() - start
    return output[0, len(prompt_ids) :].tolist(), elapsed


def _generate_kwargs(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings,
    observer: StepObserver | None,
    stopper: _StopRequested | None,
    assistant: PreTrainedModel | None,
) -> dict:
    target_config = pair.target.generation_config
    # Explicit values for everything that shapes the output, so a checkpoint's own
    # defaults (repetition penalty, top-k, sampling on) cannot make the two runs differ
    # from what the user chose.
    config = GenerationConfig(
        max_new_tokens=settings.max_new_tokens,
        do_sample=settings.sample,
        temperature=settings.temperature if settings.sample else None,
        top_p=settings.top_p if settings.sample else None,
        top_k=0 if settings.sample else None,
        repetition_penalty=1.0,
        eos_token_id=target_config.eos_token_id,
        pad_token_id=_pad_token_id(pair),
    )
    ids = torch.tensor([prompt_ids], device=_input_device(pair))
    kwargs: dict = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "generation_config": config,
    }
    if observer is not None:
        kwargs["streamer"] = observer
    if stopper is not None:
        kwargs["stopping_criteria"] = StoppingCriteriaList([stopper])
    if mode == "assisted":
        kwargs.update(_drafter_kwargs(pair, draft, assistant))
    return kwargs


def _drafting_assistant(
    pair: LoadedPair, draft: DraftSettings
) -> tuple[PreTrainedModel | None, str | None]:
    """The assistant model that drafts with `draft`, and what it computes in ("int8", or
    the pair's dtype); (None, None) for drafters without a model of their own."""
    precision = _precision_key(pair, draft)
    assistant = pair.drafting_assistant(precision)
    if assistant is None:
        return None, None
    return assistant, pair.dtype_name if precision == "none" else precision


def _precision_key(pair: LoadedPair, draft: DraftSettings) -> str:
    return quantize.resolve(draft.assistant_quant, pair.spec.drafter, pair.device)


def _drafter_kwargs(
    pair: LoadedPair, draft: DraftSettings, assistant: PreTrainedModel | None
) -> dict:
    kind = pair.spec.drafter
    if kind is DrafterKind.PROMPT_LOOKUP:
        return {
            "prompt_lookup_num_tokens": draft.prompt_lookup_num_tokens,
            "max_matching_ngram_size": draft.max_matching_ngram_size,
        }
    # Transformers reads draft settings from the drafting model's generation_config, not
    # from generate()'s arguments, and the heuristic schedule writes its state back there:
    # set all three before every run so runs are reproducible. Transformers knows no `auto`
    # schedule: under it the generator runs a constant one whose length the policy sets.
    early_exit = kind is DrafterKind.EARLY_EXIT
    drafter = pair.target if early_exit else assistant
    drafter.generation_config.num_assistant_tokens = draft.num_assistant_tokens
    drafter.generation_config.num_assistant_tokens_schedule = (
        "constant" if draft.schedule == "auto" else draft.schedule
    )
    drafter.generation_config.assistant_confidence_threshold = draft.confidence_threshold
    if early_exit:
        return {"assistant_early_exit": pair.spec.early_exit_layer}
    kwargs = {"assistant_model": assistant}
    if kind.own_tokenizer:
        kwargs.update(tokenizer=pair.tokenizer, assistant_tokenizer=pair.assistant_tokenizer)
    return kwargs


def _drafting_seam(
    pair: LoadedPair, prompt_ids: list[int], draft: DraftSettings, policy: DraftPolicy | None
) -> AbstractContextManager:
    """The seam through which `policy` (under `auto`) chooses each step's draft and prompt
    lookup matches as `draft.lookup` says (`assisted.lookup`, or Transformers' own)."""
    lookup = None
    if draft.lookup == "suffix":
        span = user_span(prompt_ids, _template_ids(pair))
        lookup = SuffixLookup(len(prompt_ids), span, never_drafted(pair))
    return auto.drafting_policy(pair.target, policy, draft, lookup)


def never_drafted(pair: LoadedPair) -> set[int]:
    """The ids a lookup never drafts: end of sequence and every special token, role markers
    such as Qwen's <|im_start|> included (added tokens that `all_special_ids` leaves out),
    even where a user typed one into the prompt."""
    tokenizer = pair.tokenizer
    eos = pair.target.generation_config.eos_token_id
    special = set(tokenizer.all_special_ids) | set(eos if isinstance(eos, list) else [eos])
    special |= {i for i, token in tokenizer.added_tokens_decoder.items() if token.special}
    return special - {None}


def _template_ids(pair: LoadedPair) -> list[int]:
    """The chat template's ids around an empty user message (none without a template)."""
    tokenizer = pair.tokenizer
    if not tokenizer.chat_template:
        return []
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": ""}], tokenize=False, add_generation_prompt=True
    )
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _auto_policy(
    pair: LoadedPair, draft: DraftSettings, assistant: PreTrainedModel | None
) -> DraftPolicy | None:
    """A fresh policy for one `auto` run, calibrated on a cache holding the warm-up prompt
    where the pair has not been timed yet; None under the other schedules."""
    if draft.schedule != "auto":
        return None
    prefix = torch.tensor([encode_prompt(pair, _WARMUP_PROMPT)], device=_input_device(pair))
    return auto.new_policy(pair, draft, assistant, _precision_key(pair, draft), prefix)


class _StopRequested(StoppingCriteria):
    """Ends generation after the current step once any of `events` is set."""

    def __init__(self, *events: threading.Event):
        self.events = events
        self.triggered = False

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        self.triggered = any(event.is_set() for event in self.events)
        return torch.full(
            (input_ids.shape[0],), self.triggered, dtype=torch.bool, device=input_ids.device
        )


def _pad_token_id(pair: LoadedPair) -> int | None:
    config = pair.target.generation_config
    if config.pad_token_id is not None:
        return config.pad_token_id
    eos = config.eos_token_id
    return eos[0] if isinstance(eos, list) else eos


def _input_device(pair: LoadedPair) -> torch.device:
    # With a device map the embeddings may sit anywhere; inputs go where they are.
    return pair.target.get_input_embeddings().weight.device
