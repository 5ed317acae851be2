"""What drafting costs on this device by path, and a real run through the graphed path:
`python -m assisted.lab.gpu_check`'s drafting table and its end-to-end check.

Drafting per token, the assistant drafting `gamma` tokens a draft after a context of
`context` tokens (no stopping rule, so every draft runs to its length), medians of
`repeats` drafts after warm-up ones, the device synchronised around each:
- the lean loop on a DynamicCache (`assisted.engine.drafters.lean`), a pass and a read a token;
- the same loop on a static cache (`assisted.engine.drafters.static_draft`), eager;
- the draft replayed as CUDA graphs (`assisted.engine.drafters.draft_graphs`), read back once, where
  they were captured (CUDA, and graphs on); with the capture's seconds.
Host synchronisations per draft are counted with CUDA's sync debug mode (none to count on a
CPU), the committed ids given as a run's lookup read them.

The end-to-end check runs `running.run`, plain and then assisted, on the Space's default
GPU pair's shapes with random weights and a word tokenizer as wide as its vocabulary (no Hub
here), the assistant drafting its cap at every step: random weights would talk the policy
out of drafting, and the check is of the path, not of the policy. Greedy output must be
identical, or in bf16 part where rounding explains it (`assisted.analysis.divergence`: the
target verifies nine rows in one pass and plain decoding one, and random weights leave many
near-ties); and on CUDA the drafts must have been replayed graphs.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from assisted.analysis import divergence
from assisted.core.drafters import DrafterKind
from assisted.core.record import CUDA_GRAPHS, EAGER
from assisted.core.settings import RunSettings
from assisted.engine import comparison, decoding, plan, running
from assisted.engine.drafters import draft_graphs
from assisted.engine.drafters.lean import LeanDrafter
from assisted.engine.drafters.static_draft import StaticDrafter, StaticState
from assisted.engine.prepare import prepare
from assisted.models.pairs import LoadedPair
from assisted.models.registry import PairSpec
from assisted.models.vocab import fit_vocabulary
from assisted.policy.choice import Choice

GAMMA = 8  # the drafts timed: the registry's cap under `auto`
WARMUP_DRAFTS = 2  # untimed drafts after the one that prefills the context
PROBE_TOKENS = 32  # the context the graphs' self-check drafts after
PROMPT = " ".join(f"t{i}" for i in range(100, 160))  # 60 words, 60 ids
TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


@dataclass(frozen=True)
class Drafting:
    """An assistant's seconds per drafted token by path on this device (the module's note);
    the graphs' capture seconds and why the graphed path did or did not run; host
    synchronisations per draft (None where they cannot be counted: a CPU)."""

    loop_s: float
    static_s: float
    graphed_s: float | None
    capture_s: float | None
    reason: str
    loop_syncs: int | None
    graphed_syncs: int | None

    def to_dict(self) -> dict:
        return asdict(self)


SYNC_WARNING = "called a synchronizing CUDA operation"  # what the debug mode warns per read


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_drafting(model, device: torch.device, context: int, gamma: int, repeats: int) -> Drafting:
    """`model`'s drafting by path (the module's note)."""
    prefix = torch.randint(0, model.config.vocab_size, (1, context), device=device)
    ids = prefix[0].tolist()
    length = context + gamma + 1
    loop = LeanDrafter(model, 0.0, ())
    static = StaticDrafter(StaticState(model, length, gamma), 0.0, ())
    loop_s = _seconds_per_token(loop, prefix, ids, gamma, repeats)
    static_s = _seconds_per_token(static, prefix, ids, gamma, repeats)
    draft_graphs.prepare(model, gamma, prefix[:, :PROBE_TOKENS])
    graphs, reason = draft_graphs.for_run(model, length, gamma)
    graphed_s = graphed_syncs = capture_s = None
    if graphs is not None:
        graphed = StaticDrafter(graphs.state, 0.0, (), 0.0, graphs, reason)
        graphed_s = _seconds_per_token(graphed, prefix, ids, gamma, repeats)
        graphed_syncs = _syncs(graphed, prefix, ids, gamma)
        capture_s = graphs.capture_s
    return Drafting(
        loop_s,
        static_s,
        graphed_s,
        capture_s,
        reason,
        _syncs(loop, prefix, ids, gamma),
        graphed_syncs,
    )


def _seconds_per_token(drafter, prefix: torch.Tensor, ids: list[int], gamma: int, repeats: int):
    """The median seconds of a draft of `gamma` after `prefix`, per token; the first
    draft prefills the cache, the next ones each read the last id again and draft."""
    device = prefix.device
    for _ in range(1 + WARMUP_DRAFTS):
        drafter.draft(prefix, gamma, ids)
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        drafted = drafter.draft(prefix, gamma, ids)
        synchronize(device)
        seconds.append(time.perf_counter() - started)
        if len(drafted) != gamma:
            raise RuntimeError(f"a draft of {len(drafted)}, not {gamma}: a rule cut it")
    return statistics.median(seconds) / gamma


def _syncs(drafter, prefix: torch.Tensor, ids: list[int], gamma: int) -> int | None:
    """Host synchronisations in one draft, as CUDA's sync debug mode warns of them."""
    if prefix.device.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            drafter.draft(prefix, gamma, ids)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # Only the operations: turning the mode on first warns that it is a prototype feature,
    # which counted as a second read of the first assistant timed in a process.
    return sum(SYNC_WARNING in str(warning.message) for warning in caught)


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
    built = plan._auto_policy

    def every_step(pair, prepared, band):
        policy = built(pair, prepared, band)
        if policy is None:
            return None

        def choose(offers, tokens_left, context, match_length=0):
            gamma = min(policy.cap, offers.get(DrafterKind.ASSISTANT, 0))
            policy.choice = Choice(DrafterKind.ASSISTANT, gamma) if gamma else Choice(None, 0)
            return policy.choice

        policy.choose = choose
        return policy

    plan._auto_policy = every_step
    try:
        yield
    finally:
        plan._auto_policy = built


def end_to_end(
    spec: PairSpec, target, assistant, device: torch.device, dtype: torch.dtype, tokens: int
) -> dict:
    """Plain then assisted `running.run` of `tokens` new tokens on `spec`'s shapes built as
    `target` and `assistant` (random weights), the assistant drafting at every step; what
    ran, and whether it held (the module's note)."""
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
    settings = RunSettings(max_new_tokens=tokens)
    started = time.perf_counter()
    prepared = prepare(pair, draft)
    prepare_s = time.perf_counter() - started
    ids = running.encode_prompt(pair, PROMPT)
    replays = []
    module = draft_graphs.replay_module(prepared.assistant)
    handle = module.register_forward_hook(lambda *_: replays.append(1)) if module else None
    try:
        with drafting_every_step():
            comparison.warm_up(pair, ("plain", "assisted"), draft)
            replays.clear()
            plain = decoding.drain(running.run(pair, ids, "plain", settings))
            assisted = decoding.drain(running.run(pair, ids, "assisted", settings, draft))
    finally:
        if handle is not None:
            handle.remove()
    summary = comparison.report(pair, plain, assisted, steps=False)
    output = divergence.outcome(divergence.explain(plain, assisted))
    path = assisted.drafting_path
    expected = CUDA_GRAPHS if device.type == "cuda" and draft_graphs.enabled() else EAGER
    drafted = summary["assisted"]["drafted"]
    return {
        "pair": spec.name,
        "new_tokens": len(plain.token_ids),
        "identical": plain.token_ids == assisted.token_ids,
        "output": output,  # identical, near-tie (rounding), not judged or unexplained
        "drafting_path": path.path if path else None,
        "drafting_path_reason": path.reason if path else None,
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
