"""One loaded pair's engine (`Engine`): what is built for the pair once, before any run's
clock starts, and the `auto` policy's life across its runs.

**Preparing** (`Engine.prepare`). Done inside a run, this work would fall in the middle of
its timing: resolving the assistant's precision, building the int8 copy (evicting other
pairs to make room), timing the `auto` policy's calibration, rendering the chat template
for its ids and collecting the ids never drafted. Here it is one stage, whose result a run
receives (`Prepared`):

- the assistant's precision, and the model that drafts in it (`LoadedPair.drafting_assistant`:
  an int8 copy is made once, and may evict other pairs);
- under `auto`, the calibration of the costs (`calibrate`, below), timed once per pair,
  machine and dtype, on a cache holding the warm-up prompt; on CUDA, the capture of the
  assistant's drafts as graphs, checked against its eager passes
  (`assisted.engine.drafters.draft_graphs`), once per process and once a greedy run is
  prepared, as only greedy runs replay them; and once a run samples, the assistant's
  drafting through its sampling generator (`calibrate_sampled`), which greedy runs never
  pay for;
- the template facts: the chat template's ids around an empty message, from which a run
  finds the user's message in its prompt (`assisted.engine.drafters.seam.user_span`), and
  the ids a lookup never drafts;
- the learnt state, read and merged where other processes kept more on disk.

Prepared once per process, pair and draft settings, and kept by the pair's `Engine`
(beside the paths the warm-up ran): the comparison's warm-up, the benchmark and a ZeroGPU
worker each prepare first, and a second call costs a dictionary lookup. On ZeroGPU each GPU
call runs in a process forked from the main one; preparations are kept by process, so a
fresh fork prepares again on its own device (the int8 copy and the costs it inherited are
not built or timed again), while a reused worker finds its own. Plain runs need nothing
prepared. A process whose CUDA context a failure in drafting broke (`BrokenContext`, a
sticky CUDA error: `assisted.engine.drafters.draft_graphs`) prepares nothing more: `broken`
says why, and callers ask it before they touch the device (`assisted.ui.gpu_calls`).

**The calibration** (`calibrate`): the target's verification times T(k) and the
assistant's drafting and prefill times, timed once per pair, machine and dtype, and read
back without timing (`calibrated`). It times T(1), T(2) and T(cap + 1) and fits the rows
between them (`assisted.core.cost_curve`: monotone, never above a larger row), plus the
assistant's row and its read of a block of context, in a fraction of the time every row of
the cap would take (docs/lab-notes.md says how long, and on what). T(2) because the curve
bends there: one row is a matrix-vector product, two rows take the matrix-matrix kernels,
and on a CPU without bf16 ones (AVX2, fp32) two rows cost 1.8 plain steps and nine 3.0, so
a line from T(1) to T(cap + 1) put T(2) 29% and T(3) 16% below what the runs learnt, and
short lookup drafts on long passages looked cheaper than they were (docs/benchmarks.md).
Costs an earlier process left on disk are checked, once per process: the timed rows, the
drafting and its read, and any row the runs kept that disagrees with the others by more
than timing noise (`DISTURBED`: dearer than a larger row, which no machine makes so). The
calibration is the runs' prior, worth a few of their steps (`assisted.policy.estimates`). A
sampled run's drafting through the assistant's generator is timed apart
(`calibrate_sampled`).

**The policy's life across runs**: a fresh policy for each run, seeded by what the pair
learnt (`new_policy`; `assisted.policy.learnt`), and what a run learnt kept for the next
ones (`keep_*`), in memory and in the pair's learnt file (`assisted.models.learnt_store`).
A run itself reads and writes none of this: its callers make the policy before it
(`assisted.engine.decoding`) and keep what it learnt after its clock stops. On ZeroGPU a
worker's memory ends with its call, so the file is where the next process finds it
(`refresh` reads it back in).

**The engine's boundary with text**: a prompt's text becomes token ids here
(`encode_prompt`), and nowhere else in the engine. Everything past it takes ids (a run,
its plan, its drafters); the way back, ids to text as they stream, is the
`assisted.engine.observe.Detokenizer`, which the run's observer applies to each step.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers import (
    Cache,
    GenerationConfig,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopPLogitsWarper,
)

from assisted.core import cost_curve
from assisted.core.record import RunRecord
from assisted.core.settings import (
    GREEDY,
    WARMUP_PROMPT,
    WARMUP_TOKENS,
    Band,
    DrafterKind,
    DraftSettings,
    RunSettings,
    validate_prompt,
)
from assisted.engine.drafters import draft_graphs
from assisted.engine.drafters.draft_graphs import BrokenContext, broken
from assisted.engine.observe import synchronize
from assisted.models import learnt_store, process_state
from assisted.models.loading import end_ids
from assisted.models.pairs import LoadedPair
from assisted.policy.choice import DraftPolicy
from assisted.policy.estimates import Answer, PlainSteps
from assisted.policy.learnt import LearntState

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from assisted.policy.learnt import ProcessTiming


def encode_prompt(pair: LoadedPair, prompt: str, chat_template: bool = True) -> list[int]:
    """Token ids of `prompt`, wrapped in the target's chat template where it has one."""
    validate_prompt(prompt)
    tokenizer = pair.tokenizer
    if chat_template and tokenizer.chat_template:
        return chat_ids(tokenizer, prompt)
    return list(tokenizer(prompt)["input_ids"])


def chat_ids(tokenizer: PreTrainedTokenizerBase, content: str) -> list[int]:
    """The ids of `content` as a user message in the tokenizer's chat template, followed by
    the assistant's role tokens."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def template_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The chat template's ids around an empty user message (none without a template)."""
    return chat_ids(tokenizer, "") if tokenizer.chat_template else []


# One preparation at a time: two would time each other.
_preparing = process_state.register(process_state.State("preparations"))


@dataclass(frozen=True)
class Prepared:
    """What runs drafting with `draft` on one pair receive, built by `Engine.prepare`."""

    draft: DraftSettings  # validated for the pair's drafter
    precision: str  # the assistant's precision key: "none" (the pair's dtype), "int8", ...
    assistant: PreTrainedModel | None  # the model that drafts; None: no model of its own
    assistant_precision: str | None  # what it computes in, for the record ("int8", "float32")
    template_ids: tuple[int, ...]  # the chat template around an empty user message
    never_drafted: frozenset[int]  # ids a lookup never drafts
    learnt: LearntState  # the state the calibration filled, which runs read and refine


class Engine:
    """The engine's side of one loaded pair (`LoadedPair`: its models, tokenizer and learnt
    state): its preparations, by process and draft settings, and the paths the
    comparison's warm-up ran on it (`assisted.engine.decoding.Warmed`). One per pair object
    (`of`), kept on the pair and gone with it; the benchmark's drafter variants
    (`dataclasses.replace` copies of a pair, sharing its models) each have their own."""

    def __init__(self, pair: LoadedPair) -> None:
        self.pair = pair
        self.prepared: dict[tuple[int, DraftSettings], Prepared] = {}
        self.warmed: set[Hashable] = set()

    @staticmethod
    def of(pair: LoadedPair) -> Engine:
        """`pair`'s engine, made on first use and kept with the pair
        (`LoadedPair.keep_engine`)."""
        if not isinstance(pair.engine, Engine):
            pair.keep_engine(Engine(pair))
        assert isinstance(pair.engine, Engine)
        return pair.engine

    def prepare(
        self, draft: DraftSettings | None = None, settings: RunSettings | None = None
    ) -> Prepared:
        """Everything runs drafting with `draft` (default: the pair's) need, once per
        process: cheap when this process prepared it already. Under `auto`, where
        `settings` sample, the sampled drafting cost too; else (greedy, or None) the
        assistant's graphs on CUDA. Call it before any clock starts. Raises `BrokenContext`
        in a process whose CUDA context broke."""
        if (words := broken()) is not None:
            raise BrokenContext(words)
        pair = self.pair
        draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
        key = (os.getpid(), draft)
        found = self.prepared.get(key)
        if found is None or found.learnt is not pair.learnt:
            with _preparing.lock:
                found = self.prepared.get(key)
                if found is None or found.learnt is not pair.learnt:
                    if not any(pid == key[0] for pid, _ in self.prepared):
                        # The first preparation in this process: what another one (the
                        # process this one was forked from) prepared is not this process's.
                        self.prepared.clear()
                        refresh(pair)
                    found = self.prepared[key] = self._prepare(draft)
        if draft.schedule != "auto" or found.assistant is None:
            return found
        if settings is not None and settings.sample:
            if found.precision not in pair.learnt.timed_here().sampled_drafting:
                with _preparing.lock:
                    prefix = _warmup_prefix(pair)
                    calibrate_sampled(pair, prefix, found.assistant, found.precision, settings)
        else:
            # Greedy `auto` runs draft with the lean loop: on CUDA, captured graphs of it,
            # whose time per token then prices the policy's drafting (`new_policy`). Only
            # they replay the graphs, so a sampled run captures none, and a greedy run after
            # it on the same preparation captures them here.
            cap = draft.length_for(pair.spec.drafter)
            if draft_graphs.pending(found.assistant, cap):
                with _preparing.lock:
                    draft_graphs.capture(found.assistant, cap, _warmup_prefix(pair))
        return found

    def calibrate_rows(self, rows: int) -> None:
        """Time the target's verification of `rows` rows, as the calibration times
        T(cap + 1), where this process has not (`time_verify_rows`). Call it off any
        clock."""
        with _preparing.lock:
            time_verify_rows(self.pair, _warmup_prefix(self.pair), rows)

    def _prepare(self, draft: DraftSettings) -> Prepared:
        pair = self.pair
        precision = pair.drafting_precision(draft.assistant_quant)
        assistant = pair.drafting_assistant(precision)
        if draft.schedule == "auto":
            cap = draft.length_for(pair.spec.drafter)
            calibrate(pair, _warmup_prefix(pair), assistant, precision, cap)
        computes_in = None
        if assistant is not None:
            computes_in = pair.dtype_name if precision == "none" else precision
        return Prepared(
            draft=draft,
            precision=precision,
            assistant=assistant,
            assistant_precision=computes_in,
            template_ids=tuple(template_ids(pair.tokenizer)),
            never_drafted=frozenset(never_drafted(pair)),
            learnt=pair.learnt,
        )


def captures_graphs(pair: LoadedPair, draft: DraftSettings, settings: RunSettings) -> bool:
    """Whether preparing runs with `draft` and `settings` may capture the assistant's drafts
    as graphs: greedy `auto` runs of an assistant model on CUDA, where this process has not
    captured them yet (`assisted.engine.drafters.draft_graphs`). Asks only the model that
    is loaded, and builds nothing."""
    if settings.sample or draft.schedule != "auto" or not pair.spec.drafter.has_model:
        return False
    model = pair.assistant
    return model is not None and draft_graphs.pending(model, draft.num_assistant_tokens)


def _warmup_prefix(pair: LoadedPair) -> torch.Tensor:
    """The warm-up prompt's ids, the context the calibration times its passes after."""
    return torch.tensor([chat_ids(pair.tokenizer, WARMUP_PROMPT)], device=input_device(pair))


def never_drafted(pair: LoadedPair) -> set[int]:
    """The ids a lookup never drafts: end of sequence and every special token, role markers
    such as Qwen's <|im_start|> included (added tokens that `all_special_ids` leaves out),
    even where a user typed one into the prompt."""
    tokenizer = pair.tokenizer
    special = set(tokenizer.all_special_ids) | set(end_ids(pair.target.generation_config))
    special |= {i for i, token in tokenizer.added_tokens_decoder.items() if token.special}
    return special - {None}


def input_device(pair: LoadedPair) -> torch.device:
    """Where a run's input ids go: with a device map the embeddings may sit anywhere."""
    return pair.target.get_input_embeddings().weight.device


_CALIBRATION_REPEATS = 3  # timings of each pass, on a cache holding the warm-up prompt
_CALIBRATION_ATTEMPTS = 3  # timings of a cost, while they look disturbed
_PREFILL_ROWS = 64  # the block whose time per token estimates an assistant's prefill
_SAMPLED_TOKENS = 4  # tokens beyond the first whose sampled drafting is timed
# A row dearer than the monotone fit of all rows by more than this share was disturbed, and
# is timed again: a plain step's time varies by about 15% around T(1) from the 10th to the
# 90th percentile (docs/benchmarks.md), a minimum of three timings by less.
DISTURBED = 0.25


def calibrate(
    pair: LoadedPair,
    prefix: torch.Tensor,
    assistant: PreTrainedModel | None,
    precision: str,
    cap: int,
) -> tuple[dict[int, float], float, float]:
    """T(k), the target's seconds to verify k rows for k = 1 … cap + 1; the assistant's
    seconds per drafted token; and its seconds per token of a prefill (both 0 without an
    assistant model). Timed on a cache holding `prefix`, each at most once per process.

    Only T(1), T(2) and T(cap + 1) are timed, and the rows between are fitted (the
    module's note). Runs then time each T(k) they verify, and keep the rows they measured
    for the pair's next runs (`keep_learnt`), as they do the read time.

    A pass disturbed by other work on the machine reads slow, and a slow row would keep
    the policy from drafting that long until its runs correct it; so a row dearer than
    the fit of all rows by more than `DISTURBED` is timed again, as is a first drafting
    time dearer than T(1) (`_time_drafting`).

    Costs an earlier process left on disk (`assisted.models.learnt_store`) are checked: the
    timed rows of T(k), any kept row that disagrees with the others (`DISTURBED`), the
    drafting time and the read time are timed again, once per process, and the smaller of
    the two times stands, as other work on the machine only ever adds time. A slow value
    on disk is corrected; a slow timing in this process leaves a good one on disk as it
    is. What this process timed, and how long it took, is in the pair's
    `LearntState.timed_here`, for the report. `assisted.engine.engine` calls it, before
    any run."""
    timing = pair.learnt.timed_here()
    started = time.perf_counter()
    # Rows a disturbance left on disk are timed once more: the monotone fit already keeps
    # them from any decision, and a machine still busy would time them dear again.
    disturbed = cost_curve.dearer_than_fit(pair.learnt.verify_s, DISTURBED)
    timed = _time_target(pair, prefix, sorted({1, 2, cap + 1}), timing)
    timed |= _time_target(pair, prefix, disturbed, timing, attempts=1)
    if assistant is not None and precision not in timing.drafting:
        _time_drafting(pair, prefix, assistant, precision, timing)
        timed = True
    if timed:
        timing.seconds += time.perf_counter() - started
    return calibrated(pair, precision, cap, model=assistant is not None)


def time_verify_rows(pair: LoadedPair, prefix: torch.Tensor, rows: int) -> None:
    """Time T(`rows`) too, where this process has not, by `calibrate`'s rules, on a cache
    holding `prefix`: for a run that verified more rows than its cap + 1, once its clock
    has stopped (Transformers' heuristic schedule grows a fully accepted draft by two,
    without a bound). `calibrated` then fits the rows between."""
    timing = pair.learnt.timed_here()
    started = time.perf_counter()
    if _time_target(pair, prefix, [rows], timing):
        timing.seconds += time.perf_counter() - started


def _time_target(
    pair: LoadedPair,
    prefix: torch.Tensor,
    wanted: list[int],
    timing: ProcessTiming,
    attempts: int = _CALIBRATION_ATTEMPTS,
) -> bool:
    """Time T(k) for each k in `wanted` where this process has not (`calibrate`), up to
    `attempts` times while a row disagrees with the others; whether it timed any."""
    learnt = pair.learnt
    verify_s = learnt.verify_s
    rows = [k for k in wanted if k not in timing.rows]
    before = {k: verify_s[k] for k in rows if k in verify_s}  # from disk, or a run's
    pending = rows
    for _ in range(attempts if rows else 0):
        for k, seconds in _time_forwards(pair.target, prefix, pending, pair.device).items():
            learnt.keep_verify(k, min(seconds, verify_s.get(k, seconds)), _CALIBRATION_REPEATS)
        disturbed = cost_curve.dearer_than_fit(verify_s, DISTURBED)
        pending = [k for k in rows if k in disturbed]
        if not pending:
            break
    timing.rows.update(rows)
    timing.fresh |= len(before) < len(rows)
    timing.checked += [f"T({k})" for k in before]
    timing.corrected += [f"T({k})" for k, seconds in before.items() if verify_s[k] < seconds]
    return bool(rows)


def _time_drafting(
    pair: LoadedPair,
    prefix: torch.Tensor,
    assistant: PreTrainedModel,
    precision: str,
    timing: ProcessTiming,
) -> None:
    """Time the assistant's seconds per drafted token in `precision`, and its read's per
    token of context (`calibrate`)."""
    drafting = pair.learnt.precision(precision)
    timing.drafting.add(precision)
    kept, kept_read = drafting.draft_s, drafting.prefill_s
    # A first timing of a drafted token dearer than the target's one-row step is taken as
    # disturbed: the assistant is the smaller model, and a policy priced so would never
    # draft, so never learn otherwise (on a GPU at batch 1 both passes are launch-bound,
    # so nearly as dear, still no dearer). A learnt time needs no such check: the smaller
    # of it and the new one stands.
    ceiling = pair.learnt.verify_s.get(1, math.inf) if kept is None else math.inf
    # One row, as the assistant drafts one token per forward pass, and a block of rows for
    # the read of the context, whose time per token is flatter than a single row's. The
    # read is timed whenever drafting is: a read priced 3× too dear on disk kept the
    # assistant from starting, and only a first draft, which it then never made, would have
    # corrected it (docs/lab-notes.md).
    # The read is priced at the level of the drafting time kept beside it: a neighbour that
    # slows this moment's passes slows the one-row pass timed with the block alike, so the
    # block's time over that pass's is what this moment says of the read. Taken as timed,
    # a read retimed beside a busy neighbour (0.017 s a token, 3.5x a quiet one) met a
    # drafting time and a T(1) kept on quiet moments, and held the assistant back all run.
    for _ in range(_CALIBRATION_ATTEMPTS):
        timed = _time_forwards(assistant, prefix, [1, _PREFILL_ROWS], pair.device)
        drafting.draft_s = min(timed[1], drafting.draft_s or timed[1])
        read_s = timed[_PREFILL_ROWS] / _PREFILL_ROWS * drafting.draft_s / timed[1]
        drafting.prefill_s = min(read_s, drafting.prefill_s or read_s)
        if timed[1] <= ceiling:
            break
    if kept is None:
        timing.fresh = True
        return
    for name, was, now in (
        (f"drafting {precision}", kept, drafting.draft_s),
        (f"read {precision}", kept_read, drafting.prefill_s),
    ):
        timing.checked.append(name)
        if was is not None and now < was:
            timing.corrected.append(name)


def calibrated(
    pair: LoadedPair, precision: str, cap: int, model: bool, sampled: bool = False
) -> tuple[dict[int, float], float, float]:
    """What `calibrate` returns, read from the pair's learnt state without timing anything:
    T(k) for k = 1 … cap + 1, and where a `model` drafts, its seconds per drafted token
    (where the run is `sampled`, through its sampling generator: `calibrate_sampled`) and
    per token of a prefill (else 0). Refused where they were never timed."""
    verify_s = pair.learnt.verify_s
    drafting = pair.learnt.precision(precision)
    draft_s = drafting.sampled_draft_s if sampled else drafting.draft_s
    if 1 not in verify_s or cap + 1 not in verify_s or (model and draft_s is None):
        kind = "sampled " if sampled and model else ""
        raise RuntimeError(
            f"{pair.spec.name} has no {kind}calibration for {precision!r} and a cap of {cap}: "
            "prepare the pair first (assisted.engine.engine)"
        )
    counts = {k: count for k, (count, _) in pair.learnt.verify_timed.items()}
    curve = cost_curve.fit({k: [t] for k, t in verify_s.items()}, range(1, cap + 2), counts=counts)
    if not model:
        return curve, 0.0, 0.0
    return curve, draft_s, drafting.prefill_s


def calibrate_sampled(
    pair: LoadedPair,
    prefix: torch.Tensor,
    assistant: PreTrainedModel,
    precision: str,
    settings: RunSettings,
) -> None:
    """Time the assistant's seconds per drafted token where a run samples under `settings`,
    on a cache holding `prefix`, at most once per process and precision (`calibrate`'s
    rules: a time from disk is checked, and the smaller stands). `assisted.engine.engine` calls
    it before a sampled `auto` run.

    A sampled run's assistant drafts through its own `generate()`, not the lean loop:
    per token it warps its logits with the run's temperature and top-p (the target's
    warpers too, in Transformers 5.2x) and samples, where `calibrate`'s one-row pass
    only runs the model. Timed as the candidate generator drafts, drafting
    1 + `_SAMPLED_TOKENS` tokens against 1: the difference, per token, leaves out the
    call's own overhead, which the cost model keeps apart (`assisted.policy.estimates`). Timed with
    the first sampled run's top-p, whose sort over the vocabulary is most of the extra:
    one time per precision, whatever later runs' settings."""
    timing = pair.learnt.timed_here()
    if precision in timing.sampled_drafting:
        return
    started = time.perf_counter()
    timing.sampled_drafting.add(precision)
    seconds = _time_sampled_drafting(assistant, prefix, settings, pair.device)
    drafting, name = pair.learnt.precision(precision), f"sampled drafting {precision}"
    kept = drafting.sampled_draft_s
    if kept is None:
        drafting.sampled_draft_s = seconds
        timing.fresh = True
    else:
        drafting.sampled_draft_s = min(kept, seconds)
        timing.checked.append(name)
        if seconds < kept:
            timing.corrected.append(name)
    timing.seconds += time.perf_counter() - started


def _time_sampled_drafting(
    assistant: PreTrainedModel, prefix: torch.Tensor, settings: RunSettings, device: torch.device
) -> float:
    """Seconds per token the assistant's sampling `generate()` adds, drafting on a cache
    holding `prefix` (`calibrate_sampled`): the fastest of a few calls each way, after
    one untimed call. The cache is cropped back after each call. Called as the candidate
    generator calls it, the target's warpers passed on top of the config's, so it warps
    as a run's drafting does (temperature and top-p twice; seen on Transformers 5.23)."""
    warpers = [TemperatureLogitsWarper(settings.temperature)]
    if settings.top_p < 1.0:
        warpers.append(TopPLogitsWarper(settings.top_p))
    config = GenerationConfig(
        do_sample=True,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=0,
        output_scores=True,  # the candidate generator returns the scores, as q
        return_dict_in_generate=True,
        eos_token_id=None,  # no early end: every call drafts as many tokens as asked
        pad_token_id=0,
    )
    held = prefix.shape[1] - 1  # the generator feeds the last id, as after a step

    def draft(cache: Cache, tokens: int) -> float:
        synchronize(device)
        start = time.perf_counter()
        assistant.generate(
            input_ids=prefix,
            attention_mask=torch.ones_like(prefix),
            past_key_values=cache,
            generation_config=config,
            logits_processor=LogitsProcessorList(warpers),
            max_new_tokens=tokens,
        )
        synchronize(device)
        seconds = time.perf_counter() - start
        cache.crop(held - cache.get_seq_length())  # 5.23: a negative count removes that many
        return seconds

    with torch.inference_mode():
        cache = assistant(input_ids=prefix[:, :-1], use_cache=True).past_key_values
        draft(cache, 1)  # untimed: the first sampled call pays one-off costs
        one, more = (
            min(draft(cache, tokens) for _ in range(_CALIBRATION_REPEATS))
            for tokens in (1, 1 + _SAMPLED_TOKENS)
        )
    return max(more - one, 0.0) / _SAMPLED_TOKENS


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
                synchronize(device)
                start = time.perf_counter()
                model(input_ids=block, past_key_values=cache, use_cache=True)
                synchronize(device)
                times.append(time.perf_counter() - start)
                cache.crop(-k)
            timings[k] = min(times)
    return timings


def new_policy(
    pair: LoadedPair,
    draft: DraftSettings,
    precision: str,
    band: Band,
    assistant: PreTrainedModel | None = None,
    max_length: int | None = None,
    prompt_ids: Sequence[int] = (),
) -> DraftPolicy:
    """A fresh policy for one `auto` run in temperature `band` (`assisted.core.settings`), seeded by
    the pair's costs (calibrated when the pair was prepared, `assisted.engine.engine`, and refined
    by its runs since) and by the acceptance its earlier runs in `precision` and `band` saw.
    A sampled run's assistant is priced at its sampled drafting time; a greedy run's of at
    most `max_length` tokens (prompt and answer), where the `assistant` drafts through
    captured CUDA graphs in a run that long, each draft length at its own replay's time
    (`assisted.engine.drafters.draft_graphs.draft_costs`), or on the loop on a
    DynamicCache after their self-check failed, at that loop's; else at its eager time
    per token. Times nothing.

    The answers it expects are the pair's, less one to this very prompt that a run just
    before it left (a comparison's plain run, a shoot-out's other lanes): a run never knows
    its own answer's length in advance.

    A pair with an assistant drafts from two sources: the assistant, and prompt-lookup
    matches, which cost no drafting. A prompt-lookup pair drafts from matches only."""
    cap = draft.length_for(pair.spec.drafter)
    sampled = band != GREEDY
    shape = None  # the assistant's time per token by draft length, where timed by length
    if pair.spec.drafter is DrafterKind.PROMPT_LOOKUP:
        verify_s, _, _ = calibrated(pair, precision, cap, model=False)
        drafter_s, model, prefill_s = {DrafterKind.PROMPT_LOOKUP: 0.0}, None, 0.0
    else:
        verify_s, per_token_s, prefill_s = calibrated(pair, precision, cap, True, sampled)
        timed = None
        if assistant is not None and max_length is not None and not sampled:
            timed = draft_graphs.draft_costs(assistant, max_length, cap)
        if timed is not None:
            # Priced per token at the longest draft, each length shaped to its own time.
            per_token_s = timed[cap] / cap
            shape = {gamma: seconds / (gamma * per_token_s) for gamma, seconds in timed.items()}
        model = DrafterKind.ASSISTANT
        drafter_s = {model: per_token_s, DrafterKind.PROMPT_LOOKUP: 0.0}
    history = pair.learnt.precision(precision).acceptance_in(band)
    learnt = pair.learnt
    # Never this very prompt's answer, left by a run just before (the note above).
    just_answered = learnt.answered == hash(tuple(prompt_ids))
    answers = learnt.answers[:-1] if just_answered else learnt.answers
    return DraftPolicy(cap, verify_s, drafter_s, model, prefill_s, history, answers, shape)


def keep_learnt(pair: LoadedPair, precision: str, policy: DraftPolicy, band: Band) -> None:
    """What an `auto` run in temperature `band` learnt, for the pair's next runs: acceptance
    per source (for runs in the same band), T(k) for the rows it verified (each the median
    of its timings, never a row fitted between them), and the assistant's time per token of
    the reads it timed (the price of the next reads: the median of the latest, each at its
    run's T(1), `PrecisionLearnt.keep_read`). Kept in memory; `keep_on_disk` writes it."""
    learnt = pair.learnt
    drafting = learnt.precision(precision)
    drafting.keep_acceptance(band, policy.acceptance.counts())
    for rows, (seconds, timings) in policy.costs.measured_verify().items():
        learnt.keep_verify(rows, seconds, timings)
    read_s = policy.costs.measured_read_s()
    if policy.model_source is not None and read_s is not None:
        drafting.keep_read(read_s, policy.costs.verify_s[1])


def keep_answer(
    pair: LoadedPair, prompt_ids: Sequence[int], record: RunRecord, settings: RunSettings
) -> bool:
    """The length of any run's answer (`record`, under `settings`), plain or drafted by any
    schedule, for the pair's record of answers (`assisted.policy.learnt`): one per prompt
    in a row, so a comparison's two runs and a shoot-out's lanes count once. Not a stopped
    run's, nor a warm-up's, cut short by design. Whether it kept one."""
    tokens = len(record.token_ids)
    if record.stopped or not tokens or settings.max_new_tokens <= WARMUP_TOKENS:
        return False
    answer = Answer(tokens, ended=tokens < settings.max_new_tokens)
    pair.learnt.keep_answer(answer, prompt=hash(tuple(prompt_ids)))
    return True


def keep_on_disk(pair: LoadedPair) -> None:
    """What the pair's runs kept, into its learnt file for the next process: a small write,
    made once a run's clock has stopped (on ZeroGPU a worker's memory ends with its call)."""
    learnt_store.save(pair.learnt_file, pair.learnt)


def keep_plain_steps(pair: LoadedPair, steps: PlainSteps | None) -> bool:
    """A plain run's T(1), the median of its timed passes (`assisted.engine.observe`), kept for
    the pair's runs, once the run's clock has stopped; nothing for other runs (`steps`
    None). Whether it kept it. Plain steps are T(1)'s only direct timings, and
    an `auto` run seldom takes one; T(1) prices every plain step the policy and the oracle
    weigh (`assisted.policy.estimates`)."""
    t1_s = steps.t1_s() if steps is not None else None
    if t1_s is None:
        return False
    pair.learnt.keep_verify(1, t1_s, len(steps.seconds))
    return True


def refresh(pair: LoadedPair) -> None:
    """Bring in what other processes kept in the pair's learnt file since it loaded: a
    ZeroGPU worker is forked from a main process that read the file once, at load, and
    earlier workers have written to it since (`learnt_store.refresh` merges, keeping what
    this process holds and has not written)."""
    learnt_store.refresh(pair.learnt_file, pair.learnt)
