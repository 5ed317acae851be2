"""A real run through the path the product takes: the GPU check's end-to-end check.

It runs `decoding.run`, plain and then assisted, on the Space's default GPU pair's shapes
with random weights and a word tokenizer as wide as its vocabulary (no Hub here), the
assistant drafting its cap at every step: random weights would talk the policy out of
drafting, and the check is of the path, not of the policy. The assistant is peaked
(`models.peaked`): random weights' near-uniform logits would leave the graphs' self-check
nothing to judge, inconclusive, and drafting on the DynamicCache loop. Greedy output must be
identical, or in bf16 part where rounding explains it (`assisted.analysis.divergence`: the
target verifies nine rows in one pass and plain decoding one, and random weights leave many
near-ties); and on CUDA the drafts must have been replayed graphs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from assisted.analysis import divergence
from assisted.core.record import CUDA_GRAPHS, EAGER
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import drain
from assisted.engine.drafters import draft_graphs
from assisted.engine.engine import Engine, encode_prompt
from assisted.models.pairs import LoadedPair
from assisted.models.registry import PAIRS, PairSpec
from assisted.models.vocab import fit_vocabulary
from assisted.policy.choice import Choice
from lab.gpu_check.architectures import ARCHITECTURES
from lab.gpu_check.models import build, free, peaked, toy

PAIR = "qwen2.5-coder-7b"  # the Space's default GPU pair
MARKERS = 3  # the word tokenizer's last ids: markers and end of sequence, never the output
SEED = 0  # the peaked models' cycles (`models.peaked`)
PROMPT = " ".join(f"t{i}" for i in range(100, 160))  # 60 words, 60 ids
TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


def word_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A tokenizer of `vocab_size` words ("t0", "t1", …), its last three ids the chat
    template's markers and end of sequence: every id a random model emits decodes."""
    vocab = {f"t{i}": i for i in range(vocab_size - 3)}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab.update({token: vocab_size - 3 + i for i, token in enumerate(specials)})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    wrapped.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    wrapped.chat_template = TEMPLATE
    return wrapped


@contextmanager
def drafting_every_step() -> Iterator[None]:
    """Within the block, `auto` runs draft the cap with the assistant at every step (the
    module's note): the policy as built, its choice fixed."""
    built = decoding.auto_policy

    def every_step(pair, prepared, band, max_length, prompt_ids=()):
        policy = built(pair, prepared, band, max_length, prompt_ids)
        if policy is None:
            return None

        def choose(offers, tokens_left, context, match_length=0):
            gamma = min(policy.cap, offers.get(DrafterKind.ASSISTANT, 0))
            policy.choice = Choice(DrafterKind.ASSISTANT, gamma) if gamma else Choice(None, 0)
            return policy.choice

        policy.choose = choose
        return policy

    decoding.auto_policy = every_step
    try:
        yield
    finally:
        decoding.auto_policy = built


def random_pair(
    spec: PairSpec, target, assistant, device: torch.device, dtype: torch.dtype
) -> tuple[LoadedPair, DraftSettings]:
    """`spec` loaded as `target` and `assistant` (random weights) with a word tokenizer as
    wide as the target's vocabulary; and its draft settings with no stopping rule but the
    end of sequence, the assistant unquantized: each draft runs to the length asked."""
    vocab_size = target.config.get_text_config().vocab_size
    fit_vocabulary(assistant, vocab_size)
    tokenizer = word_tokenizer(vocab_size)
    for model in (target, assistant):
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    pair = LoadedPair(
        spec, target, tokenizer, assistant, tokenizer, device, dtype, assistant_source="random"
    )
    draft = replace(
        spec.draft, assistant_quant="none", confidence_threshold=0.0, cumulative_threshold=0.0
    )
    return pair, draft


def run(
    spec: PairSpec, target, assistant, device: torch.device, dtype: torch.dtype, tokens: int
) -> dict:
    """Plain then assisted `decoding.run` of `tokens` new tokens on `spec`'s shapes built as
    `target` and `assistant` (random weights), the assistant drafting at every step; what
    ran, and whether it held (the module's note)."""
    pair, draft = random_pair(spec, target, assistant, device, dtype)
    settings = RunSettings(max_new_tokens=tokens)
    started = time.perf_counter()
    prepared = Engine.of(pair).prepare(draft)
    prepare_s = time.perf_counter() - started
    ids = encode_prompt(pair, PROMPT)
    replays = []
    module = draft_graphs.replay_module(prepared.assistant)
    handle = module.register_forward_hook(lambda *_: replays.append(1)) if module else None
    try:
        with drafting_every_step():
            decoding.warm_up(pair, ("plain", "assisted"), draft)
            replays.clear()
            plain = drain(decoding.run(pair, ids, "plain", settings))
            assisted = drain(decoding.run(pair, ids, "assisted", settings, draft))
    finally:
        if handle is not None:
            handle.remove()
    summary = decoding.report(pair, plain, assisted, steps=False)
    output = divergence.outcome(divergence.explain(plain, assisted))
    path = assisted.drafting_path
    expected = expected_path(device)
    drafted = summary["assisted"]["drafted"]
    return {
        "pair": spec.name,
        "new_tokens": len(plain.token_ids),
        "identical": plain.token_ids == assisted.token_ids,
        "output": output,  # identical, near-tie (rounding), not judged or unexplained
        "drafting_path": path.path if path else None,
        "drafting_path_reason": path.reason if path else None,
        "self_check": path.check if path else None,
        "self_check_judged": path.judged if path else None,
        "expected_path": expected,
        "graph_replays": len(replays),
        "drafted": drafted,
        "accepted": summary["assisted"]["accepted"],
        "drafting_s_per_token": summary["assisted"].get("drafting_s_per_token"),
        "plain_tokens_per_s": summary["plain"]["tokens_per_s"],
        "assisted_tokens_per_s": summary["assisted"]["tokens_per_s"],
        "prepare_s": round(prepare_s, 2),
        "held": (
            output in (divergence.IDENTICAL, divergence.NEAR_TIE)
            and path is not None
            and path.path == expected
            and drafted > 0
            and (expected != CUDA_GRAPHS or len(replays) > 0)
        ),
    }


def expected_path(device: torch.device) -> str:
    """The drafting path a greedy run drafting with an assistant must take on `device`: its
    graphs on CUDA with graphs on, else the eager loop."""
    return CUDA_GRAPHS if device.type == "cuda" and draft_graphs.enabled() else EAGER


def check(device: torch.device, dtype: torch.dtype, tiny: bool, tokens: int) -> dict:
    """`run` on `PAIR`'s shapes (toy widths under `tiny`), the assistant peaked."""
    spec = PAIRS[PAIR]
    built = built_pair(spec, device, dtype, tiny)
    try:
        peaked(built[1], MARKERS, SEED)
        return run(spec, *built, device, dtype, tokens)
    finally:
        del built
        free(device)


def built_pair(spec: PairSpec, device: torch.device, dtype: torch.dtype, tiny: bool) -> list:
    """`spec`'s target and assistant built from their architectures (toy widths under
    `tiny`), random weights."""
    built = []
    for ref in (spec.target, spec.assistant):
        architecture = ARCHITECTURES[ref]
        built.append(build(toy(architecture) if tiny else architecture, device, dtype))
    return built
