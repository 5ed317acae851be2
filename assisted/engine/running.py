"""A run's life around its clock: checked, prepared and planned before it, what it learnt
kept after.

`assisted.engine.decoding` only runs a ready plan (the watched `generate()`). Everything
else a run needs happens here, outside its timing: its settings and length checked at the
door (`check`); the pair prepared to draft (`assisted.engine.prepare`, cached once per
process); the plan built (`assisted.engine.plan`); and once the run's clock has stopped,
its hindsight for the oracle (`assisted.engine.hindsight`) and, under `auto`, its final
costs and what it learnt, kept for the pair's next runs (`assisted.engine.learning`; a
plain run's T(1) too). Every caller passes through here: the comparison and its warm-up,
the CLI, the benchmark, the sampling draws. On ZeroGPU the worker's memory ends with the
call, so what is kept goes to the pair's learnt file as well.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from assisted.analysis import faults
from assisted.core.record import Mode, RunRecord
from assisted.core.settings import DraftSettings, RunSettings, SettingsError
from assisted.engine import decoding, hindsight, learning
from assisted.engine.events import RunDone, StepEvent
from assisted.engine.plan import Plan, make_plan
from assisted.engine.prepare import Prepared, prepare
from assisted.models.pairs import LoadedPair


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
    and `assisted.engine.comparison.compare` call it before anything runs."""
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
    events = decoding.generate_watched(ready, stop)
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
        prepared = prepare(pair, draft, settings)
    elif prepared.draft != draft or prepared.learnt is not pair.learnt:
        raise ValueError("the preparation handed to the run is for another draft or pair")
    return make_plan(pair, prompt_ids, mode, settings, prepared)


def keep(ready: Plan, record: RunRecord) -> None:
    """Off the run's clock: an assisted run's hindsight for the oracle, and under `auto`
    its final costs and what it learnt, kept for the pair's next runs in its temperature
    band; a plain run's T(1), where its passes were timed; every run's answer length."""
    pair, prepared, policy = ready.pair, ready.prepared, ready.policy
    kept = learning.keep_answer(pair, ready.prompt_ids, record, ready.settings)
    if prepared is not None:
        record.hindsight = None
        with faults.attempted(faults.HINDSIGHT, record.analysis_errors):
            record.hindsight = hindsight.find(
                pair, prepared, ready.prompt_ids, record, policy, ready.lookup
            )
        if policy is not None:
            record.verify_cost_s = policy.costs.verify_curve()
            learning.keep_learnt(pair, prepared.precision, policy, ready.band)
            kept = True
    if learning.keep_plain_steps(pair, ready.plain_steps) or kept:
        learning.keep_on_disk(pair)


def run_bare(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
) -> tuple[list[int], float]:
    """`decoding.generate_bare` of one run, checked and planned as `run` plans it: the
    overhead baseline, which keeps nothing it learnt."""
    draft = check(pair, prompt_ids, settings, draft)
    return decoding.generate_bare(_planned(pair, prompt_ids, mode, settings, draft))
