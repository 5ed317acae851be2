"""Samples of a prompt's first tokens, drawn as the product draws them, for the sampling
check (`assisted.bench.sampling_check`), and the biased verifier that is its negative control.

- Plain samples take the product's plain path (`assisted.engine.plan`: the same
  generation config, logits processors and seeding), n rows in one `generate()` call:
  rows of a batch sample independently, so this is the distribution of n runs of one row,
  up to the rounding of a batched matrix product. The prompt's prefill is computed once
  and its cache repeated for every row, since n prefills would cost as much as the
  assisted samples themselves.
- Assisted samples are runs of `running.run`, one by one (Transformers drafts for a batch
  of one only), each with its own seed, each starting from the same learnt state.
- A sample is the first tokens a run committed, cut after the first end of sequence.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import running
from assisted.engine.events import drain
from assisted.engine.plan import make_plan
from assisted.models.loading import end_ids
from assisted.models.pairs import LoadedPair

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
        record = drain(running.run(pair, prompt_ids, "assisted", seeded, draft, stop))
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
