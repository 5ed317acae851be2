"""The Transformers behaviour the observer and the seam rely on, pinned: an upgrade that
changes it must fail here."""

from __future__ import annotations

import inspect

import torch
from transformers.generation.candidate_generator import (
    AssistedCandidateGenerator,
    PromptLookupCandidateGenerator,
)
from transformers.generation.streamers import BaseStreamer
from transformers.generation.utils import GenerationMixin

from assisted.engine.engine import encode_prompt
from tests.engine.runs import PROMPT


class RecordingStreamer(BaseStreamer):
    def __init__(self):
        self.puts = []

    def put(self, value):
        self.puts.append(tuple(value.shape))

    def end(self):
        pass


def test_generate_puts_the_prompt_then_one_put_per_step(pair):
    ids = encode_prompt(pair, PROMPT)
    model_inputs = torch.tensor([ids])
    plain = RecordingStreamer()
    pair.target.generate(model_inputs, max_new_tokens=6, do_sample=False, streamer=plain)
    assert plain.puts[0] == (1, len(ids))  # the prompt, once
    assert plain.puts[1:] == [(1,)] * 6  # then one token per step

    assisted = RecordingStreamer()
    pair.assistant.generation_config.num_assistant_tokens = 3
    pair.assistant.generation_config.assistant_confidence_threshold = 0.0
    pair.target.generate(
        model_inputs,
        max_new_tokens=12,
        do_sample=False,
        streamer=assisted,
        assistant_model=pair.assistant,
    )
    assert assisted.puts[0] == (1, len(ids))
    # afterwards one (1, accepted + 1) tensor per step
    assert all(shape[0] == 1 and 1 <= shape[1] <= 4 for shape in assisted.puts[1:])
    assert sum(shape[1] for shape in assisted.puts[1:]) == 12


def test_target_hook_sees_prompt_plus_drafts_then_drafts_plus_one(self_pair):
    seen = []

    def hook(module, args, kwargs):
        cache = kwargs.get("past_key_values")
        seen.append((kwargs["input_ids"].shape[1], cache.get_seq_length() if cache else 0))

    ids = encode_prompt(self_pair, PROMPT)
    self_pair.assistant.generation_config.num_assistant_tokens = 3
    self_pair.assistant.generation_config.assistant_confidence_threshold = 0.0
    handle = self_pair.target.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        self_pair.target.generate(
            torch.tensor([ids]),
            max_new_tokens=9,
            do_sample=False,
            assistant_model=self_pair.assistant,
        )
    finally:
        handle.remove()
    # First forward fuses prefill and the first verification: prompt + 3 drafted, no cache.
    assert seen[0] == (len(ids) + 3, 0)
    # With an identical assistant all 3 are accepted, so each later step feeds the last
    # committed token + 3 drafted on top of a cache holding everything before it.
    assert seen[1] == (4, len(ids) + 3)


def test_get_candidate_generator_is_the_seam_the_auto_schedule_overrides():
    """Pin: Transformers builds the candidate generator in this private method, calls it
    on the instance with these arguments, and reads the draft length from these
    attributes at every step. An upgrade that changes any of it must fail here."""
    seam = inspect.signature(GenerationMixin._get_candidate_generator)
    assert list(seam.parameters) == [
        "self",
        "generation_config",
        "input_ids",
        "inputs_tensor",
        "logits_processor",
        "model_kwargs",
        "assistant_model",
        "target_tokenizer",
        "assistant_tokenizer",
    ]
    assert "self._get_candidate_generator(" in inspect.getsource(GenerationMixin._assisted_decoding)
    assert "self.num_assistant_tokens" in inspect.getsource(
        AssistedCandidateGenerator._calculate_new_tokens
    )
    assert "self.num_output_tokens" in inspect.getsource(
        PromptLookupCandidateGenerator.get_candidates
    )


def test_the_shootouts_transformers_defaults_are_the_installed_ones():
    """The shoot-out's "Transformers' defaults" lane drafts as `generate(assistant_model=...)`
    does where nothing sets a draft: the defaults GenerationConfig applies."""
    from transformers import GenerationConfig

    from assisted.bench.shootout import TRANSFORMERS_DEFAULTS

    defaults = GenerationConfig._get_default_generation_params()
    assert defaults["num_assistant_tokens"] == TRANSFORMERS_DEFAULTS.num_assistant_tokens
    assert defaults["num_assistant_tokens_schedule"] == TRANSFORMERS_DEFAULTS.schedule
    assert defaults["assistant_confidence_threshold"] == TRANSFORMERS_DEFAULTS.confidence_threshold
    assert TRANSFORMERS_DEFAULTS.assistant_quant == "none"  # the pair's own dtype
    assert TRANSFORMERS_DEFAULTS.cumulative_threshold == 0.0  # no such setting there
