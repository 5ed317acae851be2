"""What one `generate()` call is given: its arguments, the drafting seam, the stopper.

Plain decoding where nothing is prepared; otherwise drafting as `assisted.engine.prepare`
prepared it: Transformers' own assisted generation, its prompt lookup or early exit, and
under `auto` the policy's seam (`assisted.engine.auto`). Every generation path the product
has, the timed runs, the bare baseline and the sampling check's draws, builds its call
here, so none can differ from another in what shapes the output.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import torch
from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

from assisted.core.bands import Band
from assisted.core.drafters import DrafterKind
from assisted.core.record import GENERATE, DraftingPath
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import learning
from assisted.engine.drafters import seam
from assisted.engine.drafters.lookup import SuffixLookup, user_span
from assisted.engine.observe import StepObserver
from assisted.engine.prepare import Prepared, input_device
from assisted.models.loading import end_ids
from assisted.models.pairs import LoadedPair
from assisted.policy.choice import DraftPolicy

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def generate_kwargs(
    pair: LoadedPair,
    prompt_ids: list[int],
    settings: RunSettings,
    prepared: Prepared | None,
    observer: StepObserver | None,
    stopper: StopRequested | None,
) -> dict:
    """generate()'s arguments: plain decoding where nothing is `prepared`, else drafting as
    it says."""
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
    kwargs: dict = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "generation_config": config,
    }
    if observer is not None:
        kwargs["streamer"] = observer
    if stopper is not None:
        kwargs["stopping_criteria"] = StoppingCriteriaList([stopper])
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
    return kwargs


def lookup_for(
    prompt_ids: list[int], settings: RunSettings, prepared: Prepared | None
) -> SuffixLookup | None:
    """The run's suffix lookup where the draft settings choose it (None: Transformers' own
    search, or a plain run)."""
    if prepared is None or prepared.draft.lookup != "suffix":
        return None
    return suffix_lookup(prompt_ids, prepared, settings.chat_template)


def drafting_seam(
    pair: LoadedPair,
    prepared: Prepared | None,
    policy: DraftPolicy | None,
    lookup: SuffixLookup | None,
    built: list | None = None,
) -> AbstractContextManager:
    """The seam through which `policy` (under `auto`) chooses each step's draft and prompt
    lookup matches with `lookup` (None: Transformers' own search); nothing for plain runs.
    The lean drafters it builds are appended to `built`, where given (`drafting_path`)."""
    if prepared is None:
        return nullcontext()
    return seam.drafting_policy(pair.target, policy, prepared.draft, lookup, built=built)


def drafting_path(
    prepared: Prepared | None, settings: RunSettings, built: list
) -> DraftingPath | None:
    """How a run's assistant drafted: as the lean drafter its seam built says (`built`),
    else through the assistant's own `generate()`; None without an assistant model."""
    if prepared is None or prepared.assistant is None:
        return None
    if built:
        return built[-1].path
    if settings.sample:
        reason = "sampling reads the assistant's scores, which its generate() returns"
    else:
        reason = f"the {prepared.draft.schedule} schedule drafts through Transformers' generator"
    return DraftingPath(GENERATE, reason)


def suffix_lookup(prompt_ids: list[int], prepared: Prepared, chat_template: bool) -> SuffixLookup:
    """The suffix lookup of a run of `prompt_ids`. In the chat template the user's message
    is what the prompt does not share with the template; a prompt sent without it
    (`RunSettings.chat_template` off) is the user's text throughout, even where its ends
    happen to match the template's (a final newline, say)."""
    span = user_span(prompt_ids, prepared.template_ids) if chat_template else (0, len(prompt_ids))
    return SuffixLookup(len(prompt_ids), span, prepared.never_drafted)


def auto_policy(pair: LoadedPair, prepared: Prepared | None, band: Band) -> DraftPolicy | None:
    """A fresh policy for one `auto` run in temperature `band`, from the costs and
    acceptance the pair holds (timing nothing); None for plain runs and the other
    schedules."""
    if prepared is None or prepared.draft.schedule != "auto":
        return None
    return learning.new_policy(pair, prepared.draft, prepared.precision, band, prepared.assistant)


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


def _pad_token_id(pair: LoadedPair) -> int | None:
    config = pair.target.generation_config
    if config.pad_token_id is not None:
        return config.pad_token_id
    return next(iter(end_ids(config)), None)
