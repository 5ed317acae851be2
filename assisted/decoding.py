"""Decoding runs that stream one event per target step, observing Transformers' own loop.

Each run is one `generate()` call: plain decoding, or assisted generation with the pair's
drafter. We never reimplement speculative decoding; we watch it:
- a streamer receives each step's committed tokens (`put` is called once with the prompt,
  then once per step: one token in plain decoding, accepted + 1 in assisted generation);
- a forward pre-hook on the target sees the positions each step verifies, which gives the
  draft: the candidates' ids, hence the drafted and accepted counts (Transformers reports
  neither);
- forward hooks on the assistant time each drafting pass, which gives each step's drafting
  time and the cost ratio c.

Under the `auto` schedule, one seam more: the target's `_get_candidate_generator` is
overridden on the instance for the run, wrapping the candidate generator Transformers
built so that `assisted.policy` chooses, before each step, the source of the candidates (the
assistant, or a prompt-lookup match) and their number (0: a plain target step).
Transformers still drafts, verifies and accepts; hooks on the target time each
verification to refine the policy's cost model.

On a GPU, passes are timed with CUDA events read once per step, not by synchronising the
device around each pass, which would stall the very runs being compared.

`generate()` runs in a worker thread and events cross to the caller through a queue, so
the caller (CLI, UI, benchmark) renders as tokens arrive. This module knows nothing of
text rendering beyond the incremental detokenisation of each step and of its draft.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch
from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList
from transformers.generation.candidate_generator import (
    AssistedCandidateGenerator,
    CandidateGenerator,
    PromptLookupCandidateGenerator,
    _prepare_attention_mask,
    _prepare_position_ids,
)
from transformers.generation.streamers import BaseStreamer

from assisted import quantize
from assisted.drafters import DrafterKind
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
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


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
# Calibration of the `auto` policy: each timing is the median of this many forward passes,
# after one untimed pass, over the cached warm-up prompt.
_CALIBRATION_REPEATS = 3
_CALIBRATION_ATTEMPTS = 3  # timings of the target's rows, while they look disturbed
_PREFILL_ROWS = 64  # the block whose time per token estimates an assistant's prefill
# The `auto` policy's draft sources.
ASSISTANT = DrafterKind.ASSISTANT
LOOKUP = DrafterKind.PROMPT_LOOKUP


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
        mode=mode, drafter=drafter, prompt_tokens=len(prompt_ids), assistant_precision=precision
    )
    events: queue.Queue = queue.Queue()
    observer = _StepObserver(pair, record, events, len(prompt_ids), policy)
    kwargs = _generate_kwargs(pair, prompt_ids, mode, settings, draft, observer, stopper, assistant)
    seam = drafting_policy(pair.target, policy, draft) if policy else nullcontext()

    def work() -> None:
        try:
            with observer.hooks(mode, assistant), seam:
                if settings.sample:
                    torch.manual_seed(settings.seed)
                _synchronize(pair.device)
                observer.start = time.perf_counter()
                with torch.inference_mode():
                    pair.target.generate(**kwargs)
                _synchronize(pair.device)
                record.total_s = time.perf_counter() - observer.start
            observer.flush()
            if policy is not None:
                record.verify_cost_s = policy.costs.verify_curve()
                _keep_learnt(pair, draft, policy)
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
    """Run each mode briefly once per loaded pair, so no timed run pays first-call costs."""
    ids = encode_prompt(pair, _WARMUP_PROMPT)
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    for mode in modes:
        # Each assistant precision is its own model, with its own first-call costs.
        key = mode if mode == "plain" else f"{mode}:{_precision_key(pair, draft)}"
        if key not in pair.warmed_modes:
            for _ in run(pair, ids, mode, RunSettings(max_new_tokens=WARMUP_TOKENS), draft):
                pass
            pair.warmed_modes.add(key)


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
    _synchronize(pair.device)
    start = time.perf_counter()
    seam = drafting_policy(pair.target, policy, draft) if policy else nullcontext()
    with torch.inference_mode(), seam:
        output = pair.target.generate(**kwargs)
    _synchronize(pair.device)
    elapsed = time.perf_counter() - start
    return output[0, len(prompt_ids) :].tolist(), elapsed


def _generate_kwargs(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings,
    observer: _StepObserver | None,
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
    if kind is LOOKUP:
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


def _auto_policy(
    pair: LoadedPair, draft: DraftSettings, assistant: PreTrainedModel | None
) -> DraftPolicy | None:
    """A fresh policy for one `auto` run, seeded by the pair's calibration and by the
    acceptance its earlier runs saw; None under the other schedules.

    A pair with an assistant drafts from two sources: the assistant, and prompt-lookup
    matches, which cost no drafting. A prompt-lookup pair drafts from matches only."""
    if draft.schedule != "auto":
        return None
    precision = _precision_key(pair, draft)
    if pair.spec.drafter is LOOKUP:
        cap, drafter_s, model = draft.prompt_lookup_num_tokens, {LOOKUP: 0.0}, None
        verify_s, _, _ = calibrate(pair, None, precision, cap)
        prefill_s = 0.0
    else:
        cap, model = draft.num_assistant_tokens, ASSISTANT
        verify_s, per_token_s, prefill_s = calibrate(pair, assistant, precision, cap)
        drafter_s = {ASSISTANT: per_token_s, LOOKUP: 0.0}
    history = pair.learnt.precision(precision).acceptance
    return DraftPolicy(cap, verify_s, drafter_s, model, prefill_s, history)


def _keep_learnt(pair: LoadedPair, draft: DraftSettings, policy: DraftPolicy) -> None:
    """What an `auto` run learnt, for the pair's next runs: acceptance per source, T(k) for
    the rows it verified, and the assistant's prefill time per token."""
    learnt = pair.learnt.precision(_precision_key(pair, draft))
    learnt.acceptance = policy.acceptance.counts()
    pair.learnt.verify_s.update(policy.costs.observed_verify_s())
    if policy.model_source is not None:
        learnt.prefill_s = policy.costs.prefill_s


def calibrate(
    pair: LoadedPair, assistant: PreTrainedModel | None, precision: str, cap: int
) -> tuple[dict[int, float], float, float]:
    """T(k), the target's seconds to verify k rows for k = 1 … cap + 1; the assistant's
    seconds per drafted token; and its seconds per token of a prefill (both 0 without an
    assistant model). Each is timed once per pair.

    Only T(1) and T(cap + 1) are timed, and the rows between are interpolated linearly:
    timing all nine rows of cap 8 took 20 s on the embedded pair in fp32 on 2 busy CPU
    cores (T(1) 0.3 s), these two and the assistant's row 5.6 s. Runs then refine each
    T(k) they use, and keep it for the pair's next runs (`_keep_learnt`), as they do the
    prefill time.

    A pass disturbed by other work on the machine reads slow, and a slow T(cap + 1) would
    keep the policy from ever drafting long enough to correct it; so verifying k rows
    timed slower than k separate one-row passes is taken as disturbed and timed again."""
    verify_s = pair.learnt.verify_s
    learnt = pair.learnt.precision(precision)
    ids = torch.tensor([encode_prompt(pair, _WARMUP_PROMPT)], device=_input_device(pair))
    missing = [k for k in (1, cap + 1) if k not in verify_s]
    for _ in range(_CALIBRATION_ATTEMPTS if missing else 0):
        for k, seconds in _time_forwards(pair.target, ids, missing, pair.device).items():
            verify_s[k] = min(seconds, verify_s.get(k, seconds))
        if verify_s[cap + 1] <= (cap + 1) * verify_s[1]:
            break
    if assistant is not None and learnt.draft_s is None:
        # One row, as the assistant drafts one token per forward pass; a block of rows for
        # the prefill, whose time per token is flatter than a single row's.
        timed = _time_forwards(assistant, ids, [1, _PREFILL_ROWS], pair.device)
        learnt.draft_s = timed[1]
        if learnt.prefill_s is None:
            learnt.prefill_s = timed[_PREFILL_ROWS] / _PREFILL_ROWS
    curve = {k: _interpolate(verify_s, k) for k in range(1, cap + 2)}
    if assistant is None:
        return curve, 0.0, 0.0
    return curve, learnt.draft_s, learnt.prefill_s


def _interpolate(points: dict[int, float], k: int) -> float:
    """The value at `k`, linear between the nearest points around it."""
    low = max(x for x in points if x <= k)
    high = min(x for x in points if x >= k)
    if low == high:
        return points[k]
    return points[low] + (points[high] - points[low]) * (k - low) / (high - low)


def _time_forwards(
    model: PreTrainedModel, prefix: torch.Tensor, rows: list[int], device: torch.device
) -> dict[int, float]:
    """Seconds of one forward pass over `k` new rows on a cache holding `prefix`, for each k
    in `rows`: the fastest of a few passes, as other work on the machine only ever adds
    time. The cache is cropped back after each pass."""
    timings = {}
    with torch.inference_mode():
        cache = model(input_ids=prefix, use_cache=True).past_key_values
        # One untimed pass: the first after the prefill pays one-off costs.
        model(input_ids=prefix[:, -1:], past_key_values=cache, use_cache=True)
        cache.crop(-1)  # 5.23: a negative count removes that many tokens
        for k in rows:
            block = prefix[:, -1:].repeat(1, k)  # the ids do not change the time
            times = []
            for _ in range(_CALIBRATION_REPEATS):
                _synchronize(device)
                start = time.perf_counter()
                model(input_ids=block, past_key_values=cache, use_cache=True)
                _synchronize(device)
                times.append(time.perf_counter() - start)
                cache.crop(-k)
            timings[k] = min(times)
    return timings


@contextmanager
def drafting_policy(
    target: PreTrainedModel, policy: DraftPolicy, draft: DraftSettings | None = None
) -> Iterator[None]:
    """Within the block, `target.generate()` drafts as `policy` chooses.

    Overrides the private `GenerationMixin._get_candidate_generator` on this instance only
    (tests/test_decoding.py pins it), wrapping the generator Transformers builds. Where it
    builds an assistant's generator, a prompt-lookup generator joins it as a second source,
    with `draft`'s n-gram size."""
    build = type(target)._get_candidate_generator
    ngram = (draft or DraftSettings()).max_matching_ngram_size

    def get_candidate_generator(*args, **kwargs) -> CandidateGenerator:
        generator = build(target, *args, **kwargs)
        config = kwargs["generation_config"]
        if type(generator) is PromptLookupCandidateGenerator:
            return _PolicyDrafter(None, generator, policy, config.max_length)
        if type(generator) is not AssistedCandidateGenerator:
            # Subclasses (universal, early exit, MTP) draft and read their length elsewhere.
            raise TypeError(f"the auto schedule cannot drive {type(generator).__name__}")
        lookup = PromptLookupCandidateGenerator(
            eos_token_id=config._eos_token_tensor,
            num_output_tokens=policy.cap,
            max_matching_ngram_size=ngram,
            max_length=config.max_length,
            logits_processor=kwargs["logits_processor"],
            vocab_size=target.config.get_text_config().vocab_size,
        )
        return _PolicyDrafter(generator, lookup, policy, config.max_length)

    target._get_candidate_generator = get_candidate_generator
    try:
        yield
    finally:
        del target._get_candidate_generator


class _PolicyDrafter(CandidateGenerator):
    """Transformers' own candidate generators, one chosen per step with its draft length.

    Before each step, prompt lookup searches for a match (up to the cap; an n-gram search,
    far cheaper than a forward pass), and the policy weighs it against the assistant's
    draft and a plain step. The assistant's generator reads `num_assistant_tokens` at each
    `get_candidates`; a step without it leaves its cache behind, and its next drafting pass
    reads the tokens it missed first (Transformers crops and extends the cache from the
    ids). Zero candidates make the target verify one row: a plain step."""

    def __init__(
        self,
        assistant: AssistedCandidateGenerator | None,
        lookup: PromptLookupCandidateGenerator,
        policy: DraftPolicy,
        max_length: int,
    ):
        self.assistant = assistant
        self.lookup = lookup
        self.policy = policy
        self.max_length = max_length
        self.length = 0  # the sequence's length before the step
        self.matched: list[int] = []  # this step's lookup candidates

    def get_candidates(self, input_ids: torch.LongTensor, **kwargs):
        length = input_ids.shape[1]
        matched, _ = self.lookup.get_candidates(input_ids)
        self.length, self.matched = length, matched[0, length:].tolist()
        offers = {LOOKUP: len(self.matched)}
        if self.assistant is not None:
            # The target adds a token of its own to the candidates: leave room for it.
            offers[ASSISTANT] = self.max_length - length - 1
        choice = self.policy.choose(offers, tokens_left=self.max_length - length, context=length)
        if choice.source == LOOKUP:
            return matched[:, : length + choice.gamma], None
        if choice.source == ASSISTANT:
            self.assistant.num_assistant_tokens = choice.gamma
            if self.assistant.assistant_kwargs.get("past_key_values") is None:
                # Transformers extends the assistant's attention mask and position ids only
                # once it has a cache; an assistant that starts after the first step needs
                # them as long as the ids it prefills.
                kwargs_ = self.assistant.assistant_kwargs
                kwargs_ = _prepare_attention_mask(kwargs_, length, is_encoder_decoder=False)
                kwargs_ = _prepare_position_ids(kwargs_, length, is_encoder_decoder=False)
                self.assistant.assistant_kwargs = kwargs_
            started = time.perf_counter()
            candidates = self.assistant.get_candidates(input_ids, **kwargs)
            # generate() has synchronised the device before returning the draft's ids.
            self.policy.costs.observe_call(time.perf_counter() - started)
            return candidates
        return input_ids, None

    def update_candidate_strategy(
        self, input_ids: torch.LongTensor, scores: torch.Tensor, num_matches: int
    ) -> None:
        if self.policy.choice.source == ASSISTANT:
            self.assistant.update_candidate_strategy(input_ids, scores, num_matches)
        # `scores` holds one row per candidate plus the target's own token.
        self.policy.observe(scores.shape[1] - 1, num_matches)
        # A match not chosen is scored against what the step committed (past the cap, a
        # match is never verified: it counts only up to the cap).
        committed = input_ids[0, self.length :].tolist()
        agreed = _common_prefix_length(self.matched, committed)
        self.policy.observe_unverified(LOOKUP, len(self.matched), agreed, len(committed))


class _StepObserver(BaseStreamer):
    """Streamer plus hooks: turns Transformers' callbacks into Step events."""

    def __init__(
        self,
        pair: LoadedPair,
        record: RunRecord,
        events: queue.Queue,
        prompt_len: int,
        policy: DraftPolicy | None = None,
    ):
        self.pair = pair
        self.record = record
        self.events = events
        self.committed = prompt_len  # sequence length the target has accepted so far
        self.start = 0.0
        self.pending_draft: tuple[int, ...] = ()
        # Forward hooks time drafting, so only for drafters that run a model.
        self.times_drafting = record.drafter is not None and record.drafter.times_drafting
        self.pending_draft_s = 0.0
        self.seen_prompt = False
        self.detokenizer = _Detokenizer(pair.tokenizer)
        self.draft_timer = _PassTimer(pair.device)
        self.draft_prefilled = False
        self.policy = policy
        self.verify_timer = _PassTimer(pair.device)
        self.verify_rows: list[int] = []  # rows of each verification timed since the last step

    # -- streamer ------------------------------------------------------------------------
    def put(self, value: torch.Tensor) -> None:
        if not self.seen_prompt:  # generate() first puts the prompt itself
            self.seen_prompt = True
            return
        token_ids = tuple(value.reshape(-1).tolist())
        t_s = time.perf_counter() - self.start
        self._read_timers()
        draft = self.pending_draft
        # Counted from the ids, not as len(token_ids) - 1: where EOS or the length limit
        # ends a step, the target's own token may be missing and every token a candidate.
        accepted = _common_prefix_length(draft, token_ids)
        text, accepted_text, rejected_text = self.detokenizer.add_step(token_ids, draft, accepted)
        step = Step(
            token_ids=token_ids,
            text=text,
            drafted=len(draft),
            accepted=accepted,
            t_s=t_s,
            draft_ids=draft,
            accepted_text=accepted_text,
            rejected_text=rejected_text,
            draft_s=self.pending_draft_s if self.times_drafting else None,
            chosen=self.policy.choice.gamma if self.policy else None,
            source=self._source(draft),
        )
        if self.policy and self.times_drafting:
            self.policy.observe_draft(self.policy.choice, len(draft), self.pending_draft_s)
        self.committed += len(token_ids)
        self.pending_draft = ()
        self.pending_draft_s = 0.0
        self.record.steps.append(step)
        self.events.put(StepEvent(self.record.mode, len(self.record.steps) - 1, step))

    def end(self) -> None:
        pass

    def _source(self, draft: tuple[int, ...]) -> str | None:
        if not draft:
            return None
        return self.policy.choice.source if self.policy else self.record.drafter

    def _read_timers(self) -> None:
        """Turn the passes timed since the last step into drafting and verification times
        (on a GPU, one wait for the step's last event instead of one per pass)."""
        for elapsed in self.draft_timer.read():
            # The step's drafting time counts every pass, the assistant's prefill included.
            self.pending_draft_s += elapsed
            # The first drafting pass is the assistant's prefill, not a draft token.
            if self.draft_prefilled:
                self.record.draft_forward_s.append(elapsed)
            self.draft_prefilled = True
        for rows, elapsed in zip(self.verify_rows, self.verify_timer.read(), strict=True):
            self.policy.costs.observe_verify(rows, elapsed)
        self.verify_rows = []

    def flush(self) -> None:
        """Attach text held back for an incomplete character to the last step."""
        rest = self.detokenizer.finish()
        if rest and self.record.steps:
            last = self.record.steps[-1]
            self.record.steps[-1] = replace(last, text=last.text + rest)

    # -- hooks ---------------------------------------------------------------------------
    def hooks(self, mode: Mode, assistant: PreTrainedModel | None) -> _Hooks:
        handles = [
            self.pair.target.register_forward_pre_hook(self._before_target, with_kwargs=True)
        ]
        if self.pair.spec.drafter is DrafterKind.EARLY_EXIT:
            handles.append(self.pair.target.register_forward_hook(self._after_target))
        elif mode == "assisted" and assistant is not None:
            handles.append(assistant.register_forward_pre_hook(self._before_draft))
            handles.append(assistant.register_forward_hook(self._after_draft))
        if self.policy is not None:
            target = self.pair.target
            handles.append(target.register_forward_pre_hook(self._before_verify, with_kwargs=True))
            handles.append(target.register_forward_hook(self._after_verify))
        return _Hooks(handles)

    def _before_verify(self, module, args, kwargs) -> None:
        cache = kwargs.get("past_key_values")
        # The first step's pass is fused with the prompt's prefill: not a verification time.
        cached = cache.get_seq_length() if cache is not None else 0
        input_ids = kwargs.get("input_ids")
        if cached and input_ids is not None:
            self.verify_rows.append(input_ids.shape[1])
            self.verify_timer.start()

    def _after_verify(self, module, args, output) -> None:
        self.verify_timer.stop()

    def _before_target(self, module, args, kwargs) -> None:
        if self._early_exit_drafting():
            self._before_draft(module, args)
            return
        input_ids = kwargs.get("input_ids")
        if input_ids is None:
            return
        cache = kwargs.get("past_key_values")
        cached = cache.get_seq_length() if cache is not None else 0
        # The target verifies every position past what it has committed: the candidates.
        # They follow the prompt in the first step (prefill and verification are fused),
        # and the last committed token, which the cache does not hold yet, in later ones.
        first = self.committed - cached
        if input_ids.shape[1] > first:
            self.pending_draft = tuple(input_ids[0, first:].tolist())

    def _after_target(self, module, args, output) -> None:
        if self._early_exit_drafting():
            self._after_draft(module, args, output)

    def _early_exit_drafting(self) -> bool:
        if self.pair.spec.drafter is not DrafterKind.EARLY_EXIT:
            return False
        base = getattr(self.pair.target, self.pair.target.base_model_prefix)
        return base.config.num_hidden_layers == self.pair.spec.early_exit_layer

    def _before_draft(self, module, args) -> None:
        self.draft_timer.start()

    def _after_draft(self, module, args, output) -> None:
        self.draft_timer.stop()


class _PassTimer:
    """Times forward passes on `device`: CUDA events recorded around each pass and read
    together once per step, or the CPU's clock."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.started: torch.cuda.Event | float | None = None
        self.timed: list = []  # CUDA: (start, end) event pairs; CPU: seconds

    def start(self) -> None:
        if self.cuda:
            self.started = torch.cuda.Event(enable_timing=True)
            self.started.record()
        else:
            self.started = time.perf_counter()

    def stop(self) -> None:
        if self.started is None:
            return
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.timed.append((self.started, end))
        else:
            self.timed.append(time.perf_counter() - self.started)
        self.started = None

    def read(self) -> list[float]:
        """Seconds of each pass timed since the last read, in order."""
        timed, self.timed = self.timed, []
        if not self.cuda or not timed:
            return timed
        timed[-1][1].synchronize()  # the last pass's end: every earlier event has happened
        return [start.elapsed_time(end) / 1000 for start, end in timed]


@dataclass
class _Hooks:
    handles: list

    def __enter__(self) -> _Hooks:
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()


class _Detokenizer:
    """Incremental text: the new characters of each step, never half a multi-byte character."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.emitted = ""

    def add(self, token_ids: tuple[int, ...]) -> str:
        self.ids.extend(token_ids)
        # A character split across tokens waits for the rest; the text before it does not.
        return self._advance(self._decode(self.ids))

    def add_step(
        self, token_ids: tuple[int, ...], draft_ids: tuple[int, ...], accepted: int
    ) -> tuple[str, str, str]:
        """The step's text, and its draft's text split into the accepted part and the
        rejected remainder.

        The draft is decoded after everything committed before it, as the step's text is,
        so a token's leading space or a character spread over tokens comes out as it would
        have in the output. The accepted part is what the step's text and the draft both
        begin with (the accepted candidates' text); a character that the boundary splits
        goes to the remainder."""
        emitted = len(self.emitted)
        before = list(self.ids)
        text = self.add(token_ids)
        if not draft_ids:
            return text, "", ""
        draft = self._decode(before + list(draft_ids))[emitted:]
        if accepted == len(draft_ids):
            head = draft
        else:
            head = self._decode(before + list(draft_ids[:accepted]))[emitted:]
        cut = min(_common_prefix_length(text, head), _common_prefix_length(head, draft))
        return text, text[:cut], draft[cut:]

    def finish(self) -> str:
        return self._advance(self.tokenizer.decode(self.ids, skip_special_tokens=True))

    def _decode(self, ids: list[int]) -> str:
        """Text of `ids` without a trailing incomplete character."""
        return self.tokenizer.decode(ids, skip_special_tokens=True).rstrip("\ufffd")

    def _advance(self, text: str) -> str:
        delta = text[len(self.emitted) :]
        self.emitted = text
        return delta


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


def _common_prefix_length(a: Sequence, b: Sequence) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _pad_token_id(pair: LoadedPair) -> int | None:
    config = pair.target.generation_config
    if config.pad_token_id is not None:
        return config.pad_token_id
    eos = config.eos_token_id
    return eos[0] if isinstance(eos, list) else eos


def _input_device(pair: LoadedPair) -> torch.device:
    # With a device map the embeddings may sit anywhere; inputs go where they are.
    return pair.target.get_input_embeddings().weight.device


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
