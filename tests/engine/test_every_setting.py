"""Every setting a visitor can pick finishes: a property test over the input space that the
page, the CLI and the API offer, on tiny pairs of every drafter kind.

Each example runs the comparison as the CLI and the API do (`decoding.compare`, then
`decoding.report`, the JSON and the CLI's table) and must end in one of two ways: a
complete report whose analyses all succeeded, or the worded refusal that bad input gets
(`SettingsError`, `PairError`). Any other exception, or a report with a failed analysis,
is a failure. The examples are drawn from a fixed seed, so every run tries the same ones.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections import Counter
from contextlib import contextmanager, nullcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assisted.cli import format_table
from assisted.core.record import RunRecord
from assisted.core.settings import (
    ASSISTANT_QUANTS,
    LOOKUPS,
    MAX_DRAFT_TOKENS,
    MAX_NEW_TOKENS_CAP,
    MAX_PROMPT_CHARS,
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    SCHEDULES,
    DraftSettings,
    RunSettings,
    SettingsError,
)
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import LoadedPair, PairError, custom_pair, load_pair
from tests.searched import fixed
from tests.tiny import CORPUS, build_model

EXAMPLES = 240  # at least 200 must run (asserted); each takes a fraction of a second
CONTEXT = 256  # the tiny models' max_position_embeddings (tests/tiny.py)
# The CLI offers these pairs of every drafter kind: an assistant model (a different random
# one, in fp32 and in bf16, and the target itself as a self-draft), universal assisted
# generation, prompt lookup and early exit. The padded vocabulary's pair is left out: its
# 152k-row heads make each run of it cost several of the others (tests/models/test_pairs.py).
PAIRS = (
    "assistant",
    "assistant-bf16",
    "self",
    "universal",
    "prompt-lookup",
    "early-exit",
)
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
SAMPLING = ("temperature", "top_p", "seed")


@pytest.fixture(scope="module")
def every_pair(tiny_dirs, tmp_path_factory) -> dict[str, LoadedPair]:
    """The pairs of `PAIRS`, loaded from copies of the tiny models: the precisions and the
    learning these runs go through stay with these pairs, never with the other tests'."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("every-setting")
    folders = {}
    for name, folder in tiny_dirs.items():
        folders[name] = str(shutil.copytree(folder, root / name))
    # Early exit drafts with the target's first 4 layers (`custom_pair`): a deeper target.
    folders["deep"] = str(root / "deep")
    build_model(root / "deep", AutoTokenizer.from_pretrained(folders["target"]), seed=6, layers=6)
    specs = {
        "assistant": (custom_pair(folders["target"], folders["other"]), "float32"),
        "assistant-bf16": (custom_pair(folders["target"], folders["other"]), "bfloat16"),
        "self": (custom_pair(folders["target"], folders["target"]), "float32"),
        "universal": (
            custom_pair(folders["target"], folders["other_tokenizer"], "universal"),
            "float32",
        ),
        "prompt-lookup": (custom_pair(folders["target"], None), "float32"),
        "early-exit": (custom_pair(folders["deep"], None, "early-exit"), "float32"),
    }
    # Held here, so the cache's limit on loaded pairs evicts none of them mid-test.
    return {name: load_pair(spec, "cpu", dtype) for name, (spec, dtype) in specs.items()}


# -- the input space ------------------------------------------------------------------------

# Each bound the settings validate, and values between.
BELOW_ONE = math.nextafter(1.0, 0.0)
thresholds = st.one_of(
    st.sampled_from([0.0, 5e-324, 0.5, 0.95, BELOW_ONE]),
    st.floats(0.0, 1.0, exclude_max=True),
)
temperatures = st.one_of(
    st.sampled_from([MIN_TEMPERATURE, 0.05, 1.0, 2.0, MAX_TEMPERATURE]),
    st.floats(MIN_TEMPERATURE, MAX_TEMPERATURE),
)
top_ps = st.one_of(
    st.sampled_from([5e-324, 0.05, 0.5, BELOW_ONE, 1.0]),
    st.floats(0.0, 1.0, exclude_min=True),
)
draft_lengths = st.one_of(
    st.sampled_from([1, 2, MAX_DRAFT_TOKENS]), st.integers(1, MAX_DRAFT_TOKENS)
)
seeds = st.one_of(st.sampled_from([0, 2**32 - 1, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))
# Mostly short runs, for the budget: the longest (which fits a prompt of 2 tokens or fewer)
# is drawn in about one example in twelve.
new_tokens = st.one_of(
    st.integers(1, 24), st.integers(25, 64), st.sampled_from([1, 1, 1, CONTEXT - 2])
)
texts = st.lists(
    st.one_of(st.text(min_size=1, max_size=12), st.sampled_from([*SPECIAL, *CORPUS, " ", "\n"])),
    min_size=1,
    max_size=6,
).map("".join)
# A prompt's shape: ("tokens", n), n prompt tokens (as near as the chat template allows);
# ("fits", None), the longest prompt that leaves room for the run's new tokens; ("text",
# s), text as typed; ("chars", n), n characters.
prompts = st.one_of(
    st.tuples(st.just("tokens"), st.sampled_from([1, 2, 40])),
    st.tuples(st.just("tokens"), st.integers(1, CONTEXT - 64)),
    st.tuples(st.just("fits"), st.none()),
    st.tuples(st.just("text"), texts),
)
# One input just past its bound, where a visitor can type it (the API, the CLI): refused.
PAST_BOUNDS = [
    *(("max_new_tokens", n) for n in (0, CONTEXT, MAX_NEW_TOKENS_CAP, MAX_NEW_TOKENS_CAP + 1)),
    *(("temperature", t) for t in (0.0, 5e-324, 1e-6, math.nextafter(MIN_TEMPERATURE, 0.0))),
    *(("temperature", t) for t in (math.nextafter(MAX_TEMPERATURE, 6.0), math.nan, -math.inf)),
    *(("top_p", p) for p in (0.0, math.nextafter(1.0, 2.0), math.nan)),
    *(("seed", seed) for seed in (-1, 2**64, 10**30)),
    *(
        (length, n)
        for length in ("num_assistant_tokens", "prompt_lookup_num_tokens")
        for n in (0, 33)
    ),
    *(
        (threshold, value)
        for threshold in ("confidence_threshold", "cumulative_threshold")
        for value in (1.0, -1e-9, math.nan, math.inf)
    ),
    *(("prompt", shape) for shape in [("tokens", CONTEXT + 1), ("text", " \n\t")]),
    *(("prompt", ("chars", n)) for n in (MAX_PROMPT_CHARS, MAX_PROMPT_CHARS + 1)),
]
RUN_FIELDS = {field.name for field in dataclasses.fields(RunSettings)}


@st.composite
def visits(draw) -> dict:
    """One comparison's inputs: the pair, the prompt's shape, the run and the draft, how
    many tokens the target emits before its EOS (None: as it would), the modes run, and
    in about one example in four, one input past its bound (`past`)."""
    sample = draw(st.booleans())
    run = RunSettings(
        max_new_tokens=draw(new_tokens),
        sample=sample,
        temperature=draw(temperatures) if sample else 0.7,
        top_p=draw(top_ps) if sample else 0.9,
        seed=draw(seeds),
        chat_template=draw(st.booleans()),
    )
    draft = DraftSettings(
        num_assistant_tokens=draw(draft_lengths),
        schedule=draw(st.sampled_from(SCHEDULES)),
        confidence_threshold=draw(thresholds),
        cumulative_threshold=draw(thresholds),
        prompt_lookup_num_tokens=draw(draft_lengths),
        max_matching_ngram_size=draw(st.integers(1, 8)),
        assistant_quant=draw(st.sampled_from(ASSISTANT_QUANTS)),
        lookup=draw(st.sampled_from(LOOKUPS)),
    )
    past = draw(st.one_of(st.none(), st.none(), st.none(), st.sampled_from(PAST_BOUNDS)))
    return {
        "pair": draw(st.sampled_from(PAIRS)),
        **past_bound({"prompt": draw(prompts), "run": run, "draft": draft}, past),
        "eos_after": draw(st.one_of(st.none(), st.integers(0, 3), st.integers(4, 30))),
        "modes": draw(st.sampled_from([("plain", "assisted")] * 4 + [("assisted",), ("plain",)])),
        "past": past,
    }


def past_bound(inputs: dict, past: tuple | None) -> dict:
    """`inputs` (the prompt's shape, the run, the draft) with the input `past` names set
    to its value."""
    if past is None:
        return inputs
    name, value = past
    run, draft = inputs["run"], inputs["draft"]
    if name == "prompt":
        return {**inputs, "prompt": value}
    if name in RUN_FIELDS:
        # The sampling settings are read, and checked, only where the run samples.
        sample = run.sample or name in SAMPLING
        return {**inputs, "run": dataclasses.replace(run, **{name: value}, sample=sample)}
    return {**inputs, "draft": dataclasses.replace(draft, **{name: value})}


def prompt_text(pair: LoadedPair, shape: tuple, run: RunSettings) -> str:
    kind, value = shape
    if kind == "text":
        return value
    if kind == "chars":
        return "x" * value
    tokens = CONTEXT - run.max_new_tokens if kind == "fits" else value
    return prompt_of(pair, tokens, run.chat_template)


def prompt_of(pair: LoadedPair, tokens: int, chat_template: bool) -> str:
    """Text from the tiny corpus whose prompt (template included) holds `tokens` tokens, or
    the fewest above that it can hold: one token of text."""
    ids = pair.tokenizer(" ".join(CORPUS * 20))["input_ids"]
    template = len(encode_prompt(pair, "x", chat_template)) - 1
    kept = max(1, tokens - template)
    while True:
        text = pair.tokenizer.decode(ids[:kept])
        if kept == 1 or len(encode_prompt(pair, text, chat_template)) <= tokens:
            return text
        kept -= 1


@contextmanager
def eos_after(pair: LoadedPair, prompt_tokens: int, emitted: int):
    """The target emits its EOS right after `emitted` tokens of its own: a hook on its head
    makes EOS the choice of every row at or past that position."""
    target, eos = pair.target, pair.tokenizer.eos_token_id
    end = {}

    def before(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs["inputs_embeds"]
        past = kwargs.get("past_key_values")
        end["position"] = (past.get_seq_length() if past is not None else 0) + ids.shape[1]

    def force(module, args, logits):
        # Row i predicts the token at position first + i + 1 of the sequence.
        first = end["position"] - logits.shape[1]
        rows = [i for i in range(logits.shape[1]) if first + i + 1 >= prompt_tokens + emitted]
        if rows:
            logits = logits.clone()
            logits[:, rows] = -1e4
            logits[:, rows, eos] = 1e4
        return logits

    hooks = [
        target.register_forward_pre_hook(before, with_kwargs=True),
        target.get_output_embeddings().register_forward_hook(force),
    ]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def compared(pair: LoadedPair, prompt: str, visit: dict) -> dict:
    """The comparison's report, as the CLI and the API make it, through JSON and back."""
    records: dict[str, RunRecord] = {}
    run, draft, modes = visit["run"], visit["draft"], visit["modes"]
    prompt_tokens = len(encode_prompt(pair, prompt, run.chat_template))
    forced = visit["eos_after"]
    with nullcontext() if forced is None else eos_after(pair, prompt_tokens, forced):
        for event in decoding.compare(pair, prompt, run, draft, modes):
            if isinstance(event, RunDone):
                records[event.record.mode] = event.record
    result = decoding.report(pair, records.get("plain"), records.get("assisted"))
    format_table(result)  # the CLI prints it before the JSON line
    return json.loads(json.dumps(result, ensure_ascii=False, allow_nan=False))


def check_report(result: dict, visit: dict) -> None:
    run, forced = visit["run"], visit["eos_after"]
    assert result["analysis_errors"] == {}
    for mode in ("plain", "assisted"):
        summary = result[mode]
        if mode not in visit["modes"]:
            assert summary is None
            continue
        assert isinstance(summary["text"], str)
        assert 1 <= summary["new_tokens"] <= run.max_new_tokens
        if forced is not None:
            assert summary["new_tokens"] <= forced + 1
    if visit["modes"] == ("plain", "assisted") and visit["pair"] != "assistant-bf16":
        # The target verifies every token: greedy in fp32, assisted output is plain output.
        assert result["identical"] is True or run.sample


def test_every_setting_ends_in_a_report_or_a_worded_refusal(every_pair):
    outcomes: Counter[str] = Counter()

    @fixed(EXAMPLES)
    @given(visit=visits())
    def finishes(visit: dict) -> None:
        pair = every_pair[visit["pair"]]
        prompt = prompt_text(pair, visit["prompt"], visit["run"])
        try:
            result = compared(pair, prompt, visit)
        except (SettingsError, PairError) as refusal:
            assert str(refusal).strip()
            outcomes["refused"] += 1
            return
        assert visit["past"] is None, f"{visit['past']} ran instead of being refused"
        check_report(result, visit)
        outcomes["reported"] += 1

    finishes()
    tried = sum(outcomes.values())
    print(f"\n{tried} combinations: {outcomes['reported']} reports, {outcomes['refused']} refused")
    assert tried >= 200 and outcomes["reported"] >= tried // 3


@pytest.mark.parametrize("past", PAST_BOUNDS, ids=repr)
def test_every_input_past_its_bound_is_refused(every_pair, past):
    inputs = {
        "prompt": ("tokens", 8),
        "run": RunSettings(max_new_tokens=4),
        "draft": DraftSettings(),
    }
    visit = {"pair": "assistant", "eos_after": None, "modes": ("plain", "assisted")}
    visit |= past_bound(inputs, past)
    pair = every_pair["assistant"]
    with pytest.raises((SettingsError, PairError)):
        compared(pair, prompt_text(pair, visit["prompt"], visit["run"]), visit)
