"""A run and a comparison, top to bottom: check, prepare, plan, generate, keep.

A comparison (`compare`) checks once, warms each path up once per loaded pair
(`warm_up`: what it ran is kept by the pair's `assisted.engine.engine.Engine`, so no
timed run pays a first call's costs), then runs
each mode in turn on one device, yielding its `Phase`s between; `report` makes every figure
from the records (`assisted.analysis.stats`). A run (`run`) is one prompt in one mode:

- **check**: settings, draft and length refused with words at the door (`check`);
- **prepare**: the pair prepared to draft (`assisted.engine.engine.Engine.prepare`, once
  per process);
- **plan**: everything one `generate()` call is given, built before its clock (`make_plan`):
  plain decoding where nothing is prepared; else Transformers' assisted generation, its
  prompt lookup or early exit, and under `auto` the policy's seam
  (`assisted.engine.drafters.seam`). Every path the product has, the timed runs, the bare
  baseline and the sampling check's draws, takes its call from a `Plan`, so none can differ
  from another in what shapes the output. Building it reads what the pair learnt; a plan
  serves one run;
- **generate**: the watched `generate()` (`generate_watched`): Transformers' own loop,
  verification and acceptance, watched by `assisted.engine.observe` (a streamer and forward
  hooks make one `Step` per target step). It runs in a worker thread, its events crossing
  to the caller through a queue, so the CLI, the UI and the benchmark render as tokens
  arrive; it builds, times and writes nothing else, and reads nothing the pair learnt;
- **keep**: once the clock has stopped, an assisted run's hindsight for the oracle
  (`assisted.engine.hindsight`) and, under `auto`, its costs and what it learnt, for the
  pair's next runs (`assisted.engine.engine`; a plain run's T(1) too). On ZeroGPU the
  worker's memory ends with the call, so what is kept goes to the learnt file as well.

What a run yields is a `StepEvent` per target step, then `RunDone` with its record;
`drain` consumes them to the record. The engine takes a prompt's text (encoded by
`assisted.engine.engine`) or its ids; the way back to text is the observer's
`assisted.engine.observe.Detokenizer`.

Samples of a prompt's first tokens, drawn as the product draws them, for the sampling
check (`assisted.bench.sampling_check`), and the biased verifier that is its negative control.

- Plain samples take the product's plain path (`make_plan`: the same
  generation config, logits processors and seeding), n rows in one `generate()` call:
  rows of a batch sample independently, so this is the distribution of n runs of one row,
  up to the rounding of a batched matrix product. The prompt's prefill is computed once
  and its cache repeated for every row, since n prefills would cost as much as the
  assisted samples themselves.
- Assisted samples are runs of `decoding.run`, one by one (Transformers drafts for a batch
  of one only), each with its own seed, each starting from the same learnt state.
- A sample is the first tokens a run committed, cut after the first end of sequence.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList
from transformers.generation.candidate_generator import AssistantVocabTranslatorCache

from assisted.analysis import stats
from assisted.core.record import GENERATE, HINDSIGHT, DraftingPath, Mode, RunRecord, Step, attempted
from assisted.core.settings import (
    WARMUP_PROMPT,
    WARMUP_TOKENS,
    Band,
    DrafterKind,
    DraftSettings,
    RunSettings,
    SettingsError,
    band_of,
)
from assisted.engine import engine, hindsight
from assisted.engine.drafters.seam import DraftLoop, SuffixLookup, drafting_policy, user_span
from assisted.engine.engine import Engine, Prepared, encode_prompt, input_device
from assisted.engine.observe import StepObserver, synchronize
from assisted.models import learnt_store
from assisted.models.loading import end_ids, release_memory
from assisted.models.pairs import LoadedPair
from assisted.policy.choice import DraftPolicy
from assisted.policy.estimates import PlainSteps

if TYPE_CHECKING:
    from transformers import PreTrainedModel


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


def drain(events: Iterable[object]) -> RunRecord:
    """A run's events consumed to its end: the record its RunDone carries."""
    for event in events:
        if isinstance(event, RunDone):
            return event.record
    raise RuntimeError("the run ended without a record")


@dataclass(frozen=True)
class Phase:
    """The comparison moved on: "warmup", "plain" or "assisted"."""

    name: str


# What a comparison yields: its phases, and each run's steps and end.
Event = StepEvent | RunDone | Phase


@dataclass(frozen=True)
class Warmed:
    """A path the warm-up ran once on a pair (`warm_up`), kept by the pair's engine
    (`assisted.engine.engine.Engine`): each assistant precision is a model of its
    own, with its own first-call costs, and so is sampling."""

    mode: Mode
    precision: str | None  # the assistant's precision key; None for plain runs
    sampled: bool


def compare(
    pair: LoadedPair,
    prompt: str | Sequence[int],
    settings: RunSettings,
    draft: DraftSettings | None = None,
    modes: tuple[Mode, ...] = ("plain", "assisted"),
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """Check, prepare and warm up, then run `modes` one after the other on one device,
    streaming every event. `prompt` is text, encoded here (`assisted.engine.engine`, in the
    chat template where `settings` ask for it), or the ids its caller encoded."""
    prompt_ids = (
        encode_prompt(pair, prompt, settings.chat_template)
        if isinstance(prompt, str)
        else list(prompt)
    )
    draft = check(pair, prompt_ids, settings, draft)  # refused before any warm-up
    stop = stop or threading.Event()
    yield Phase("warmup")
    warm_up(pair, modes, draft, settings)
    for mode in modes:
        if stop.is_set():
            break
        yield Phase(mode)
        yield from run(pair, prompt_ids, mode, settings, draft, stop)


def warm_up(
    pair: LoadedPair,
    modes: tuple[Mode, ...],
    draft: DraftSettings | None = None,
    settings: RunSettings | None = None,
    prepared: Prepared | None = None,
) -> None:
    """Prepare the pair to draft with `draft` (`assisted.engine.engine`) where `modes`
    draft (unless the caller hands its `prepared`), then run each mode briefly once per
    loaded pair and path (greedy, or sampled where `settings` sample: warping, sampling and
    the assistant's generator in place of the lean loop have first-call costs of their
    own), so no timed run pays first-call costs; then hand back to the system what the
    first runs, a quantized copy and the calibration freed."""
    sampled = settings is not None and settings.sample
    if "assisted" in modes and prepared is None:
        prepared = Engine.of(pair).prepare(draft, settings)
    ids = encode_prompt(pair, WARMUP_PROMPT)
    warm = RunSettings(max_new_tokens=WARMUP_TOKENS)
    if sampled:  # the run's own temperature and top-p
        warm = settings.with_(max_new_tokens=WARMUP_TOKENS, chat_template=True)
    warmed = Engine.of(pair).warmed
    ran = False
    for mode in modes:
        # Each assistant precision is its own model, with its own first-call costs.
        precision = prepared.precision if mode == "assisted" else None
        path = Warmed(mode, precision, sampled)
        if path not in warmed:
            for _ in run(pair, ids, mode, warm, draft, prepared=prepared):
                pass
            warmed.add(path)
            ran = True
    if ran:
        release_memory()


def warmed_paths(pair: LoadedPair) -> int:
    """How many paths the warm-up has run on `pair` in this process or the one it was
    forked from: more after a call than before means that call warmed up."""
    return len(Engine.of(pair).warmed)


def report(
    pair: LoadedPair,
    plain: RunRecord | None,
    assisted: RunRecord | None,
    steps: bool = True,
    pooled: Sequence[RunRecord] = (),
) -> dict:
    """`stats.report` of a comparison on `pair` (`per_step` only with `steps`, the oracle's
    T(k) priced from `pooled`'s steps too), with the text of the tokens where the runs
    diverged (`divergence`'s `plain_text` and `assisted_text`)."""
    device, dtype = str(pair.device), pair.dtype_name
    result = stats.report(pair.spec.name, device, dtype, plain, assisted, steps, pooled)
    found = result["divergence"]
    if found is not None:
        for run in ("plain", "assisted"):
            token = found[f"{run}_token"]
            found[f"{run}_text"] = None if token is None else pair.tokenizer.decode([token])
    return result


def check_length(pair: LoadedPair, prompt_ids: list[int], settings: RunSettings) -> None:
    context = pair.context_length
    if context and len(prompt_ids) + settings.max_new_tokens > context:
        raise SettingsError(
            f"the prompt has {len(prompt_ids):,} tokens; with {settings.max_new_tokens} new "
            f"tokens that exceeds the model's context of {context:,} tokens"
        )


def check(
    pair: LoadedPair, prompt_ids: list[int], settings: RunSettings, draft: DraftSettings | None
) -> DraftSettings:
    """Refuse settings, a draft or a length the pair cannot run, with a worded
    `SettingsError`; the draft to run with (default: the pair's). The engine's door: `run`
    and `compare` call it before anything runs."""
    settings.validate()
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    check_length(pair, prompt_ids, settings)
    return draft


def run(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
    stop: threading.Event | None = None,
    prepared: Prepared | None = None,
) -> Iterator[StepEvent | RunDone]:
    """Run one prompt in one mode, yielding a StepEvent per target step, then RunDone: the
    settings checked, the pair prepared to draft with `draft` (default: the pair's; a
    caller that prepared it already, as a benchmark's lane does once, hands its `prepared`)
    and the run planned before its clock starts; what it learnt kept before its RunDone."""
    draft = check(pair, prompt_ids, settings, draft)
    ready = _planned(pair, prompt_ids, mode, settings, draft, prepared)
    events = generate_watched(ready, stop)
    try:
        for event in events:
            if isinstance(event, RunDone):
                keep(ready, event.record)
            yield event
    finally:
        events.close()


def _planned(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings,
    prepared: Prepared | None = None,
) -> Plan:
    """The plan of one run, the pair prepared first where it drafts (cheap where it was),
    unless the caller's `prepared` is for this very draft."""
    if mode != "assisted":
        prepared = None
    elif prepared is None:
        prepared = Engine.of(pair).prepare(draft, settings)
    elif prepared.draft != draft or prepared.learnt is not pair.learnt:
        raise ValueError("the preparation handed to the run is for another draft or pair")
    return make_plan(pair, prompt_ids, mode, settings, prepared)


def keep(ready: Plan, record: RunRecord) -> None:
    """Off the run's clock: an assisted run's hindsight for the oracle, and under `auto`
    its final costs and what it learnt, kept for the pair's next runs in its temperature
    band; a plain run's T(1), where its passes were timed; every run's answer length."""
    pair, prepared, policy = ready.pair, ready.prepared, ready.policy
    kept = engine.keep_answer(pair, ready.prompt_ids, record, ready.settings)
    if prepared is not None:
        record.hindsight = None
        with attempted(HINDSIGHT, record.analysis_errors):
            record.hindsight = hindsight.find(
                pair, prepared, ready.prompt_ids, record, policy, ready.lookup
            )
        if policy is not None:
            record.verify_cost_s = policy.costs.verify_curve()
            engine.keep_learnt(pair, prepared.precision, policy, ready.band)
            kept = True
    if engine.keep_plain_steps(pair, ready.plain_steps) or kept:
        engine.keep_on_disk(pair)


def run_bare(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
) -> tuple[list[int], float]:
    """`generate_bare` of one run, checked and planned as `run` plans it: the
    overhead baseline, which keeps nothing it learnt."""
    draft = check(pair, prompt_ids, settings, draft)
    return generate_bare(_planned(pair, prompt_ids, mode, settings, draft))


@dataclass
class Plan:
    """What one run of `prompt_ids` in `mode` is given, all of it built before the run
    (`make_plan`): the run enters the seam, calls `generate()` and fills the record."""

    pair: LoadedPair
    mode: Mode
    prompt_ids: list[int]
    settings: RunSettings
    prepared: Prepared | None  # what drafting was prepared with; None: a plain run
    kwargs: dict[str, Any]  # generate()'s arguments, but for the streamer and the stopper
    band: Band  # the temperature band whose acceptance the policy starts from and feeds
    policy: DraftPolicy | None  # a fresh `auto` policy; None for the other schedules
    lookup: SuffixLookup | None  # the suffix lookup; None: Transformers' own search
    plain_steps: PlainSteps | None  # a plain run's timed passes, for T(1); None: not timed
    # The seam through which the policy (under `auto`) chooses each step's draft and prompt
    # lookup matches with the lookup (`assisted.engine.drafters.seam`); nothing for plain
    # runs. The lean drafters it builds are appended to `built`, whose path the record keeps.
    seam: AbstractContextManager
    built: list[DraftLoop]
    record: RunRecord  # the run's record, before its first step


def make_plan(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    prepared: Prepared | None = None,
) -> Plan:
    """The plan of one run: plain decoding in "plain" mode, else drafting as `prepared`
    (`assisted.engine.engine`) says. Times nothing. A plan serves one run."""
    if mode == "assisted" and prepared is None:
        raise ValueError("an assisted run's plan needs the pair prepared to draft")
    prepared = prepared if mode == "assisted" else None
    band = band_of(settings)
    # generate()'s `max_length`, which sizes the assistant's drafting (`draft_graphs.for_run`).
    max_length = len(prompt_ids) + settings.max_new_tokens
    policy = auto_policy(pair, prepared, band, max_length, prompt_ids)
    lookup = _lookup_for(prompt_ids, settings, prepared)
    # A plain run's passes set the pair's T(1), once something has timed its T(k)
    # (`engine.keep_plain_steps`).
    timed = mode == "plain" and 1 in pair.learnt.verify_s
    built: list[DraftLoop] = []
    seam = nullcontext()
    if prepared is not None:
        draft = prepared.draft
        seam = drafting_policy(pair.target, policy, draft, lookup, built=built)
    record = RunRecord(
        mode=mode,
        drafter=pair.spec.drafter if prepared else None,
        prompt_tokens=len(prompt_ids),
        assistant_precision=prepared.assistant_precision if prepared else None,
        dtype=pair.dtype_name,
        sampled=settings.sample,
        calibration=learnt_store.calibration(pair.learnt, pair.learnt_file) if policy else None,
        acceptance_band=band if policy else None,
    )
    return Plan(
        pair=pair,
        mode=mode,
        prompt_ids=list(prompt_ids),
        settings=settings,
        prepared=prepared,
        kwargs=generate_kwargs(pair, prompt_ids, settings, prepared),
        band=band,
        policy=policy,
        lookup=lookup,
        plain_steps=PlainSteps() if timed else None,
        seam=seam,
        built=built,
        record=record,
    )


def generate_kwargs(
    pair: LoadedPair,
    prompt_ids: list[int],
    settings: RunSettings,
    prepared: Prepared | None,
) -> dict[str, Any]:
    """generate()'s arguments: plain decoding where nothing is `prepared`, else drafting as
    it says. A run adds its streamer and stopping criteria (`generate_watched`)."""
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
    ids = torch.tensor([prompt_ids], device=input_device(pair))
    kwargs: dict[str, Any] = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "generation_config": config,
    }
    if prepared is not None:
        kwargs.update(_drafter_kwargs(pair, prepared.draft, prepared.assistant))
    return kwargs


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
        _translate_without_pruning(pair, assistant)
    return kwargs


def _translate_without_pruning(pair: LoadedPair, assistant: PreTrainedModel) -> None:
    """Make the vocabulary translator of sampled universal runs one that leaves the
    assistant whole.

    Sampling with two tokenizers takes its translator from a cache keyed by the two
    tokenizers, and Transformers 5.23 builds it on first use pruning the assistant's head
    and embeddings to the tokens both share: in place, for good (the greedy generator
    then drafts from the pruned head), and, where the assistant's vocabulary is all in the
    target's, with no map back from the pruned ids (an AttributeError at the first draft).
    The cache keeps the first translator built for the two tokenizers, so one built here
    without pruning is what every later run finds: it suppresses the assistant's tokens
    that the target lacks instead."""
    AssistantVocabTranslatorCache.get_translator(
        pair.tokenizer,
        pair.assistant_tokenizer,
        pair.target.config.get_text_config().vocab_size,
        assistant_model=assistant,
        assistant_prune_lm_head=False,
    )


def suffix_lookup(prompt_ids: list[int], prepared: Prepared, chat_template: bool) -> SuffixLookup:
    """The suffix lookup of a run of `prompt_ids`. In the chat template the user's message
    is what the prompt does not share with the template; a prompt sent without it
    (`RunSettings.chat_template` off) is the user's text throughout, even where its ends
    happen to match the template's (a final newline, say)."""
    span = user_span(prompt_ids, prepared.template_ids) if chat_template else (0, len(prompt_ids))
    return SuffixLookup(len(prompt_ids), span, prepared.never_drafted)


def _lookup_for(
    prompt_ids: list[int], settings: RunSettings, prepared: Prepared | None
) -> SuffixLookup | None:
    """The run's suffix lookup where the draft settings choose it (None: Transformers' own
    search, or a plain run)."""
    if prepared is None or prepared.draft.lookup != "suffix":
        return None
    return suffix_lookup(prompt_ids, prepared, settings.chat_template)


def auto_policy(
    pair: LoadedPair,
    prepared: Prepared | None,
    band: Band,
    max_length: int,
    prompt_ids: Sequence[int] = (),
) -> DraftPolicy | None:
    """A fresh policy for one `auto` run of `prompt_ids`, of at most `max_length` tokens in
    temperature `band`, from the costs and acceptance the pair holds (timing nothing);
    None for plain runs and the other schedules."""
    if prepared is None or prepared.draft.schedule != "auto":
        return None
    return engine.new_policy(
        pair, prepared.draft, prepared.precision, band, prepared.assistant, max_length, prompt_ids
    )


def _pad_token_id(pair: LoadedPair) -> int | None:
    config = pair.target.generation_config
    if config.pad_token_id is not None:
        return config.pad_token_id
    return next(iter(end_ids(config)), None)


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


Sample = tuple[int, ...]


@dataclass
class Drawn:
    """Assisted samples, with what their runs drafted and the target accepted."""

    samples: list[Sample] = field(default_factory=list)
    drafted: int = 0
    accepted: int = 0
    steps: int = 0


def plain_samples(
    pair: LoadedPair, prompt_ids: list[int], settings: RunSettings, n: int
) -> list[Sample]:
    """`n` samples of plain sampling (the module's note), seeded by `settings.seed`."""
    kwargs = dict(make_plan(pair, prompt_ids, "plain", settings).kwargs)
    ids = kwargs["input_ids"]
    with torch.inference_mode():
        if ids.shape[1] > 1:
            # The cache holds all but the last prompt token: generate() feeds that one.
            prefix = pair.target(input_ids=ids[:, :-1], use_cache=True).past_key_values
            prefix.batch_repeat_interleave(n)
            kwargs["past_key_values"] = prefix
        batch = ids.expand(n, -1)
        kwargs.update(input_ids=batch, attention_mask=torch.ones_like(batch))
        torch.manual_seed(settings.seed)
        output = pair.target.generate(**kwargs)
    eos = frozenset(end_ids(pair.target.generation_config))
    return [first_tokens(row, eos) for row in output[:, ids.shape[1] :].tolist()]


def assisted_samples(
    pair: LoadedPair,
    prompt_ids: list[int],
    settings: RunSettings,
    draft: DraftSettings,
    seeds: Sequence[int],
    stop: threading.Event | None = None,
) -> Generator[int, None, Drawn | None]:
    """One assisted run per seed (the module's note); yields the count drawn after each.
    Returns the samples, or None if `stop` was set."""
    eos = frozenset(end_ids(pair.target.generation_config))
    drawn = Drawn()
    learnt = pair.learnt.snapshot()
    for seed in seeds:
        if stop is not None and stop.is_set():
            return None
        pair.learnt.restore(learnt)
        seeded = settings.with_(seed=seed)
        record = drain(run(pair, prompt_ids, "assisted", seeded, draft, stop))
        if record.stopped:
            return None
        drawn.samples.append(first_tokens(record.token_ids, eos))
        drawn.drafted += sum(step.drafted for step in record.steps)
        drawn.accepted += sum(step.accepted for step in record.steps)
        drawn.steps += len(record.steps)
        yield len(drawn.samples)
    return drawn


def first_tokens(ids: Sequence[int], eos: frozenset[int]) -> Sample:
    """`ids` up to and including the first end-of-sequence id: what follows it in a batch
    is padding, and an assisted run ends there."""
    for index, token in enumerate(ids):
        if token in eos:
            return tuple(ids[: index + 1])
    return tuple(ids)


@contextmanager
def biased_verifier() -> Iterator[list[int]]:
    """Within the block, Transformers' speculative sampling keeps every draft token without
    the test of p against q, and the target adds one token of its own after them: drafted
    tokens then follow the assistant's q, not the target's p. The negative control of the
    sampling check, which must flag it. Yields a list that gets each verification's
    number of candidates.

    Patches `_speculative_sampling` in `transformers.generation.utils`, which
    `_assisted_decoding` looks up there at every step, for the whole process while the
    block runs (the check holds the device meanwhile); restored however the block ends.
    It verifies only drafts that come with the assistant's logits: prompt-lookup drafts
    take another path, and the control then verifies nothing (the list stays empty)."""
    from transformers.generation import utils

    original = utils._speculative_sampling
    calls: list[int] = []

    def accept_every_draft(
        candidate_input_ids, candidate_logits, candidate_length, new_logits, **_
    ):
        calls.append(candidate_length)
        start = candidate_input_ids.shape[1] - candidate_length
        drafts = candidate_input_ids[:, start:]
        own = torch.multinomial(new_logits[:, candidate_length].softmax(dim=-1), num_samples=1)
        return torch.cat([drafts, own], dim=-1), candidate_length

    utils._speculative_sampling = accept_every_draft
    try:
        yield calls
    finally:
        utils._speculative_sampling = original
