"""The `auto` policy's calibration: the target's verification times T(k) and the
assistant's drafting and prefill times, timed once per pair, machine and dtype, before any
run's clock starts (`assisted.engine.prepare` calls it), and read back without timing
(`calibrated`).

The calibration times T(1), T(2) and T(cap + 1) and fits the rows between them
(`assisted.core.cost_curve`: monotone, never above a larger row), plus the assistant's
row and its read of a block of context, in a fraction of the time every row of the cap
would take
(docs/lab-notes.md says how long, and on what). T(2) because the curve bends there: one
row is a matrix-vector product, two rows take the matrix-matrix kernels, and on a CPU
without bf16 ones (AVX2, fp32) two rows cost 1.8 plain steps and nine 3.0, so a line from
T(1) to T(cap + 1) put T(2) 29% and T(3) 16% below what the runs learnt, and short lookup
drafts on long passages looked cheaper than they were (docs/benchmarks.md). Costs an
earlier process left on disk are checked, once per process: the timed rows, the
drafting and its read, and any row the runs kept that disagrees with the others by more
than timing noise (`DISTURBED`: dearer than a larger row, which no machine makes so).
The calibration is the runs' prior, worth a few of their steps (`assisted.policy.costs`).
A sampled run's drafting through the assistant's generator is timed apart
(`calibrate_sampled`).
"""

from __future__ import annotations

import math
import time
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
from assisted.core.settings import RunSettings
from assisted.engine.clock import synchronize

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from assisted.models.pairs import LoadedPair
    from assisted.policy.learnt import ProcessTiming

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
    `LearntState.timed_here`, for the report. `assisted.engine.prepare` calls it, before
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
            "prepare the pair first (assisted.engine.prepare)"
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
    rules: a time from disk is checked, and the smaller stands). `assisted.engine.prepare` calls
    it before a sampled `auto` run.

    A sampled run's assistant drafts through its own `generate()`, not the lean loop:
    per token it warps its logits with the run's temperature and top-p (the target's
    warpers too, in Transformers 5.2x) and samples, where `calibrate`'s one-row pass
    only runs the model. Timed as the candidate generator drafts, drafting
    1 + `_SAMPLED_TOKENS` tokens against 1: the difference, per token, leaves out the
    call's own overhead, which the cost model keeps apart (`assisted.policy.costs`). Timed with
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
