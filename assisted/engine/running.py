"""A run's life around its clock: prepared and planned before it, what it learnt kept after.

`assisted.engine.decoding` only runs a ready plan. Everything else a run needs happens
here, outside its timing: the prompt encoded and its length checked; the pair prepared to
draft (`assisted.engine.prepare`, cached once per process); the plan built
(`assisted.engine.plan`); and once the run's clock has stopped, its hindsight for the
oracle (`assisted.engine.hindsight`) and, under `auto`, its final costs and what it learnt,
kept for the pair's next runs (`assisted.engine.learning`; a plain run's T(1) too). Every
caller passes through here: the comparison and its warm-up, the CLI, the benchmark, the
sampling draws. On ZeroGPU the worker's memory ends with the call, so what is kept goes to
the pair's learnt file as well.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from assisted.analysis import faults
from assisted.core.record import Mode, RunRecord
from assisted.core.settings import DraftSettings, RunSettings, SettingsError, validate_prompt
from assisted.engine import decoding, hindsight, learning
from assisted.engine.decoding import RunDone, StepEvent
from assisted.engine.plan import Plan, plan_run
from assisted.engine.prepare import chat_ids, prepare
from assisted.models.pairs import LoadedPair


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


def checked(
    pair: LoadedPair, prompt_ids: list[int], settings: RunSettings, draft: DraftSettings | None
) -> DraftSettings:
    """Refuse settings, a draft or a length the pair cannot run; the draft to run with."""
    settings.validate()
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    check_length(pair, prompt_ids, settings)
    return draft


def plan(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
) -> Plan:
    """The plan of one run, the pair prepared first where it drafts (cheap where it was)."""
    prepared = prepare(pair, draft, settings) if mode == "assisted" else None
    return plan_run(pair, prompt_ids, mode, settings, prepared)


def run(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
    stop: threading.Event | None = None,
) -> Iterator[StepEvent | RunDone]:
    """Run one prompt in one mode, yielding a StepEvent per target step, then RunDone: the
    settings checked, the pair prepared to draft with `draft` (default: the pair's) and the
    run planned before its clock starts; what it learnt kept before its RunDone."""
    draft = checked(pair, prompt_ids, settings, draft)
    yield from run_checked(pair, prompt_ids, mode, settings, draft, stop)


def run_checked(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings,
    stop: threading.Event | None = None,
) -> Iterator[StepEvent | RunDone]:
    """`run` on settings its caller checked (`checked`)."""
    ready = plan(pair, prompt_ids, mode, settings, draft)
    events = decoding.run(ready, stop)
    try:
        for event in events:
            if isinstance(event, RunDone):
                keep(ready, event.record)
            yield event
    finally:
        events.close()


def keep(plan: Plan, record: RunRecord) -> None:
    """Off the run's clock: an assisted run's hindsight for the oracle, and under `auto`
    its final costs and what it learnt, kept for the pair's next runs in its temperature
    band; a plain run's T(1), where its passes were timed."""
    pair, prepared, policy = plan.pair, plan.prepared, plan.policy
    if prepared is not None:
        record.hindsight = faults.attempt(
            faults.HINDSIGHT,
            lambda: hindsight.find(pair, prepared, plan.prompt_ids, record, policy, plan.lookup),
            lambda _: None,
            record.analysis_errors,
        )
        if policy is not None:
            record.verify_cost_s = policy.costs.verify_curve()
            learning.keep_learnt(pair, prepared.precision, policy, plan.band)
    learning.keep_plain_steps(pair, plan.plain_steps)


def generate_bare(
    pair: LoadedPair,
    prompt_ids: list[int],
    mode: Mode,
    settings: RunSettings,
    draft: DraftSettings | None = None,
) -> tuple[list[int], float]:
    """`decoding.generate_bare` of one run, planned as `run` plans it: the overhead
    baseline, which keeps nothing it learnt."""
    return decoding.generate_bare(plan(pair, prompt_ids, mode, settings, draft))
