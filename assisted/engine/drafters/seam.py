"""The seam into Transformers' `generate()`: a policy chooses each step's draft.

The target's `_get_candidate_generator` is overridden on the instance for the run, wrapping
the candidate generator Transformers built so that `assisted.policy.choice` chooses, before
each step, the source of the candidates (the assistant, or a prompt-lookup match) and their
number (0: a plain target step). Transformers still verifies and accepts. The matches come
from `assisted.engine.drafters.lookup` (or Transformers' own search, `lookup:
"transformers"`); under greedy decoding the assistant drafts with the lean loop
(`assisted.engine.drafters.lean`), else with its own generator, and either way from a cache
that holds committed ids only. The generators that draft are in
`assisted.engine.drafters.candidates`; this module installs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from transformers.generation.candidate_generator import (
    AssistedCandidateGenerator,
    CandidateGenerator,
    PromptLookupCandidateGenerator,
)

from assisted.core.settings import DraftSettings
from assisted.engine.drafters import draft_graphs
from assisted.engine.drafters.candidates import (
    LookupDrafter,
    PolicyDrafter,
    SuffixSource,
    TransformersLookup,
)
from assisted.engine.drafters.lean import LeanDrafter
from assisted.engine.drafters.lookup import SuffixLookup
from assisted.engine.drafters.static_draft import StaticDrafter
from assisted.models.loading import end_ids
from assisted.policy.choice import DraftPolicy

if TYPE_CHECKING:
    from transformers import PreTrainedModel

# A lean drafting loop the seam builds for a greedy run: on a DynamicCache, or on a static
# one (graphed where captured). A run's record reads the path it took.
DraftLoop = LeanDrafter | StaticDrafter


@contextmanager
def drafting_policy(
    target: PreTrainedModel,
    policy: DraftPolicy | None,
    draft: DraftSettings | None = None,
    lookup: SuffixLookup | None = None,
    lean: bool = True,
    built: list[DraftLoop] | None = None,
) -> Iterator[None]:
    """Within the block, `target.generate()` drafts as `policy` chooses, and prompt lookup
    matches with `lookup` (`assisted.engine.drafters.lookup`; None: Transformers' own search). Under
    a policy and greedy decoding the assistant drafts with the lean loop where `lean`
    (`assisted.engine.drafters.static_draft`: on a static cache, graphed where captured), else with
    its generator's `generate()`. Each lean drafter built is appended to `built`, where
    given, for the run's report of the path it took.

    Overrides the private `GenerationMixin._get_candidate_generator` on this instance only
    (tests/engine/test_transformers_facts.py pins it), wrapping the generator Transformers builds.
    Under a policy, where it builds an assistant's generator, prompt lookup joins it as a second
    source. Without a policy only a prompt-lookup generator is replaced, by `lookup`."""
    build = type(target)._get_candidate_generator
    draft = draft or DraftSettings()

    def get_candidate_generator(*args, **kwargs) -> CandidateGenerator:
        generator = build(target, *args, **kwargs)
        config = kwargs["generation_config"]
        prompt_lookup = type(generator) is PromptLookupCandidateGenerator
        if policy is None:
            if prompt_lookup and lookup is not None:
                return LookupDrafter(lookup, generator.num_output_tokens, config.max_length)
            return generator
        if not prompt_lookup and type(generator) is not AssistedCandidateGenerator:
            # Subclasses (universal, early exit, MTP) draft and read their length elsewhere.
            raise TypeError(f"the auto schedule cannot drive {type(generator).__name__}")
        if lookup is not None:
            source = SuffixSource(lookup)
        elif prompt_lookup:
            source = TransformersLookup(generator)
        else:
            search = PromptLookupCandidateGenerator(
                eos_token_id=config._eos_token_tensor,
                max_matching_ngram_size=draft.max_matching_ngram_size,
                max_length=config.max_length,
                logits_processor=kwargs["logits_processor"],
                vocab_size=target.config.get_text_config().vocab_size,
            )
            source = TransformersLookup(search)
        if prompt_lookup:
            return PolicyDrafter(None, source, policy, config.max_length)
        # Greedy: the target needs the candidates' ids only (`assisted.engine.drafters.lean`).
        sampled = config.do_sample
        loop = _lean_drafter(generator, config, draft) if lean and not sampled else None
        if loop is not None and built is not None:
            built.append(loop)
        return PolicyDrafter(generator, source, policy, config.max_length, loop)

    target._get_candidate_generator = get_candidate_generator
    try:
        yield
    finally:
        del target._get_candidate_generator


def _lean_drafter(generator: AssistedCandidateGenerator, config, draft: DraftSettings) -> DraftLoop:
    """A lean loop drafting for `generator`'s assistant under `config`'s end of sequence,
    for a run of at most `config.max_length` tokens drafting at most `draft`'s cap a step
    (`assisted.engine.drafters.draft_graphs.drafter_for_run`: graphed where captured). The
    policy prices where each draft ends (`Choice.floors`), so the assistant's fixed
    confidence threshold, Transformers' rule for its own drafting, does not apply; a
    cumulative threshold the caller set stands beside the policy's floors."""
    eos_ids = end_ids(config)
    model, cap = generator.assistant_model, draft.num_assistant_tokens
    return draft_graphs.drafter_for_run(
        model, 0.0, eos_ids, draft.cumulative_threshold, config.max_length, cap
    )
