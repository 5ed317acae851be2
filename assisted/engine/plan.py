"""A run's plan: everything one `generate()` call is given, built before its clock starts.

Plain decoding where nothing is prepared; otherwise drafting as `assisted.engine.prepare`
prepared it: Transformers' own assisted generation, its prompt lookup or early exit, and
under `auto` the policy's seam (`assisted.engine.drafters.seam`). Every generation path the
product has, the timed runs, the bare baseline and the sampling check's draws, takes its
call from a `Plan`, so none can differ from another in what shapes the output.

Building a plan reads what the pair learnt (a fresh `auto` policy, the record's
calibration, whether a plain run's passes are timed) and builds everything the run uses,
the drafting seam and the record included; running it reads and writes none of the
learnt state (`assisted.engine.decoding`). A plan serves one run: its policy, timings and
record fill as the run goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from transformers import GenerationConfig
from transformers.generation.candidate_generator import AssistantVocabTranslatorCache

from assisted.core import bands
from assisted.core.bands import Band
from assisted.core.drafters import DrafterKind
from assisted.core.record import Mode, RunRecord
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import learning
from assisted.engine.drafters.lookup import SuffixLookup, user_span
from assisted.engine.drafters.seam import DraftLoop, drafting_policy
from assisted.engine.prepare import Prepared, input_device
from assisted.models import learnt_store
from assisted.models.loading import end_ids
from assisted.models.pairs import LoadedPair
from assisted.policy.choice import DraftPolicy
from assisted.policy.costs import PlainSteps

if TYPE_CHECKING:
    from transformers import PreTrainedModel


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
    (`assisted.engine.prepare`) says. Times nothing. A plan serves one run."""
    if mode == "assisted" and prepared is None:
        raise ValueError("an assisted run's plan needs the pair prepared to draft")
    prepared = prepared if mode == "assisted" else None
    band = bands.band(settings)
    # generate()'s `max_length`, which sizes the assistant's drafting (`draft_graphs.for_run`).
    max_length = len(prompt_ids) + settings.max_new_tokens
    policy = auto_policy(pair, prepared, band, max_length, prompt_ids)
    lookup = _lookup_for(prompt_ids, settings, prepared)
    # A plain run's passes set the pair's T(1), once something has timed its T(k)
    # (`learning.keep_plain_steps`).
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
    it says. A run adds its streamer and stopping criteria (`assisted.engine.decoding`)."""
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
    return learning.new_policy(
        pair, prepared.draft, prepared.precision, band, prepared.assistant, max_length, prompt_ids
    )


def _pad_token_id(pair: LoadedPair) -> int | None:
    config = pair.target.generation_config
    if config.pad_token_id is not None:
        return config.pad_token_id
    return next(iter(end_ids(config)), None)
