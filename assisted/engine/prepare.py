"""Preparing a pair to draft: the one-time work, done before any run's clock starts.

Done inside a run, this work would fall in the middle of its timing: resolving the
assistant's precision, building the int8 copy (evicting other pairs to make room), timing
the `auto` policy's calibration, rendering the chat template for its ids and collecting the
ids never drafted. Here it is one stage, whose result a run receives (`Prepared`):

- the assistant's precision, and the model that drafts in it (`LoadedPair.drafting_assistant`:
  an int8 copy is made once, and may evict other pairs);
- under `auto`, the calibration of the costs (`assisted.engine.learning.calibrate`),
  timed once per pair, machine and dtype, on a cache holding the warm-up prompt; on CUDA,
  the capture of the assistant's drafts as graphs, checked against its eager passes
  (`assisted.engine.drafters.draft_graphs`), once per process and once a greedy run is
  prepared, as only greedy runs replay them; and once a run samples, the assistant's
  drafting through its sampling generator (`learning.calibrate_sampled`), which greedy
  runs never pay for;
- the template facts: the chat template's ids around an empty message, from which a run
  finds the user's message in its prompt (`assisted.engine.drafters.seam.user_span`), and the ids
  a lookup never drafts;
- the learnt state, read and merged where other processes kept more on disk.

Prepared once per process, pair and draft settings, and kept in the engine's own cache of
the pair (`PairCache`, beside the record of the paths warmed up): the comparison's warm-up,
the benchmark and a ZeroGPU worker each call `prepare` first, and a second call costs a
dictionary lookup. On ZeroGPU each GPU call runs in a process forked from the main
one; the cache is keyed by process, so a fresh fork prepares again on its own device (the
int8 copy and the costs it inherited are not built or timed again), while a reused worker
finds its own. Plain runs need nothing prepared.

A process whose CUDA context a failure in drafting broke (`BrokenContext`, a sticky CUDA
error: `assisted.engine.drafters.draft_graphs`) prepares nothing more: `broken` says why,
and callers ask it before they touch the device (`assisted.ui.gpu_calls`).

The engine's boundary with text: a prompt's text becomes token ids here, and nowhere
else in the engine. Everything past it takes ids (a run, its plan, its drafters); the way
back, ids to text as they stream, is the `assisted.engine.observe.Detokenizer`, which
the run's observer applies to each step.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from assisted.core.settings import WARMUP_PROMPT, DraftSettings, RunSettings, validate_prompt
from assisted.engine import learning
from assisted.engine.drafters import draft_graphs
from assisted.engine.drafters.draft_graphs import BrokenContext, broken
from assisted.models import process_state, quantize
from assisted.models.loading import end_ids
from assisted.models.pairs import LoadedPair
from assisted.policy.learnt import LearntState

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from assisted.models.pairs import LoadedPair


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
    """What runs drafting with `draft` on one pair receive, built by `prepare`."""

    draft: DraftSettings  # validated for the pair's drafter
    precision: str  # the assistant's precision key: "none" (the pair's dtype), "int8", ...
    assistant: PreTrainedModel | None  # the model that drafts; None: no model of its own
    assistant_precision: str | None  # what it computes in, for the record ("int8", "float32")
    template_ids: tuple[int, ...]  # the chat template around an empty user message
    never_drafted: frozenset[int]  # ids a lookup never drafts
    learnt: LearntState  # the state the calibration filled, which runs read and refine


@dataclass
class PairCache:
    """What the engine keeps of one loaded pair (`cache_of`): its preparations, by process
    and draft settings, and the paths the comparison's warm-up ran on it
    (`assisted.engine.decoding.Warmed`). Each pair object has its own, the benchmark's
    drafter variants (`dataclasses.replace` of a pair) included."""

    prepared: dict[tuple[int, DraftSettings], Prepared] = field(default_factory=dict)
    warmed: set[Hashable] = field(default_factory=set)


# The engine's cache of each pair in memory, by the pair's id; an entry goes with its pair.
_caches: dict[int, tuple[weakref.ref[LoadedPair], PairCache]] = {}


def cache_of(pair: LoadedPair) -> PairCache:
    """The engine's cache of `pair`, empty at first."""
    key = id(pair)
    entry = _caches.get(key)
    if entry is None or entry[0]() is not pair:
        ref = weakref.ref(pair, lambda _, key=key: _caches.pop(key, None))
        entry = _caches[key] = (ref, PairCache())
    return entry[1]


def prepare(
    pair: LoadedPair, draft: DraftSettings | None = None, settings: RunSettings | None = None
) -> Prepared:
    """Everything runs drafting with `draft` (default: the pair's) need, once per process:
    cheap when this process prepared it already. Under `auto`, where `settings` sample, the
    sampled drafting cost too; else (greedy, or None) the assistant's graphs on CUDA. Call
    it before any clock starts. Raises `BrokenContext` in a process whose CUDA context
    broke."""
    if (words := broken()) is not None:
        raise BrokenContext(words)
    draft = (draft or pair.spec.draft).validate_for(pair.spec.drafter)
    key = (os.getpid(), draft)
    cache = cache_of(pair).prepared
    found = cache.get(key)
    if found is None or found.learnt is not pair.learnt:
        with _preparing.lock:
            found = cache.get(key)
            if found is None or found.learnt is not pair.learnt:
                if not any(pid == key[0] for pid, _ in cache):
                    # The first preparation in this process: what another one (the process
                    # this one was forked from) prepared is not this process's.
                    cache.clear()
                    learning.refresh(pair)
                found = cache[key] = _prepare(pair, draft)
    if draft.schedule != "auto" or found.assistant is None:
        return found
    if settings is not None and settings.sample:
        if found.precision not in pair.learnt.timed_here().sampled_drafting:
            with _preparing.lock:
                prefix = _warmup_prefix(pair)
                learning.calibrate_sampled(pair, prefix, found.assistant, found.precision, settings)
    else:
        # Greedy `auto` runs draft with the lean loop: on CUDA, captured graphs of it, whose
        # time per token then prices the policy's drafting (`learning.new_policy`). Only
        # they replay the graphs, so a sampled run captures none, and a greedy run after it
        # on the same preparation captures them here.
        cap = draft.length_for(pair.spec.drafter)
        if draft_graphs.pending(found.assistant, cap):
            with _preparing.lock:
                draft_graphs.capture(found.assistant, cap, _warmup_prefix(pair))
    return found


def captures_graphs(pair: LoadedPair, draft: DraftSettings, settings: RunSettings) -> bool:
    """Whether preparing runs with `draft` and `settings` may capture the assistant's drafts
    as graphs: greedy `auto` runs of an assistant model on CUDA, where this process has not
    captured them yet (`assisted.engine.drafters.draft_graphs`). Asks only the model that
    is loaded, and builds nothing."""
    if settings.sample or draft.schedule != "auto" or not pair.spec.drafter.has_model:
        return False
    model = pair.assistant
    return model is not None and draft_graphs.pending(model, draft.num_assistant_tokens)


def calibrate_rows(pair: LoadedPair, rows: int) -> None:
    """Time the target's verification of `rows` rows, as the calibration times T(cap + 1),
    where this process has not (`learning.time_verify_rows`). Call it off any clock."""
    with _preparing.lock:
        learning.time_verify_rows(pair, _warmup_prefix(pair), rows)


def _prepare(pair: LoadedPair, draft: DraftSettings) -> Prepared:
    precision = quantize.resolve(
        draft.assistant_quant, pair.spec.drafter, pair.device, pair.dtype_name
    )
    assistant = pair.drafting_assistant(precision)
    if draft.schedule == "auto":
        cap = draft.length_for(pair.spec.drafter)
        prefix = _warmup_prefix(pair)
        learning.calibrate(pair, prefix, assistant, precision, cap)
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
