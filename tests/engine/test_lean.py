"""The lean drafting loop (`assisted.engine.drafters.static_draft`): it drafts what the assistant's
`generate()` would, with the same argmax, end-of-sequence and confidence rules, on sliding-window
assistants too, and only where the target needs ids alone (greedy decoding)."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
import torch
from transformers import AutoTokenizer, GenerationConfig
from transformers.generation.candidate_generator import AssistedCandidateGenerator

from assisted.core.settings import DraftSettings
from assisted.engine.drafters import seam
from assisted.engine.drafters.static_draft import LeanDrafter, StaticDrafter
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import custom_pair, load_pair
from tests.scripted import Scripted
from tests.tiny import build_model

PROMPT = "def add(a, b):"
WINDOW = 8  # the sliding-window assistant's window: a third of the prompt


def load(target, assistant):
    return load_pair(custom_pair(str(target), str(assistant)), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return load(tiny_dirs["target"], tiny_dirs["other"])


@pytest.fixture(scope="module")
def sliding_pair(tiny_dirs):
    """The tiny target with a Mistral-shaped assistant whose every layer attends to the
    last `WINDOW` positions only: its cache holds sliding-window layers."""
    folder = tiny_dirs["target"].parent / "sliding"
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs["target"])
    build_model(folder, tokenizer, seed=6, model_type="mistral", sliding_window=WINDOW)
    return load(tiny_dirs["target"], folder)


@pytest.fixture
def drafts(monkeypatch):
    """Every lean draft of the test, on a dynamic or a static cache, as (committed ids,
    drafted ids)."""
    seen: list[tuple[list[int], list[int]]] = []
    for kind in (LeanDrafter, StaticDrafter):

        def recording(self, input_ids, gamma, ids=None, floors=(), draft=kind.draft):
            drafted = draft(self, input_ids, gamma, ids, floors)
            seen.append((input_ids[0].tolist(), drafted))
            return drafted

        monkeypatch.setattr(kind, "draft", recording)
    return seen


def prompt_ids(pair) -> torch.Tensor:
    return torch.tensor([encode_prompt(pair, PROMPT)])


def constant(assistant, threshold=0.0) -> None:
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    assistant.generation_config.assistant_confidence_threshold = threshold


def generate(pair, policy, max_new_tokens=24, **kwargs) -> list[int]:
    """The new ids of one `generate()` drafting under `policy` through the `auto` seam."""
    ids = prompt_ids(pair)
    with seam.drafting_policy(pair.target, policy):
        out = pair.target.generate(
            ids, max_new_tokens=max_new_tokens, assistant_model=pair.assistant, **kwargs
        )
    return out[0, ids.shape[1] :].tolist()


def plain(pair, max_new_tokens=24) -> list[int]:
    ids = prompt_ids(pair)
    out = pair.target.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
    return out[0, ids.shape[1] :].tolist()


def fresh_draft(assistant, ids: list[int], gamma: int) -> list[int]:
    """A fresh assistant's greedy continuation of `ids`, without a cache."""
    out = assistant.generate(
        torch.tensor([ids]), max_new_tokens=gamma, do_sample=False, use_cache=False
    )
    return out[0, len(ids) :].tolist()


def test_a_sliding_window_assistant_drafts_past_its_window(sliding_pair, drafts):
    """Its cache is cropped past the window after rejected drafts (Transformers turns on
    past recording for every assistant's cache; without it the crop raises mid-run), the
    output is plain decoding's, and every draft is a fresh assistant's from the committed
    ids, so the window's states survive the crops."""
    constant(sliding_pair.assistant)
    policy = Scripted([3, 2, 0, 4])
    assert generate(sliding_pair, policy, do_sample=False) == plain(sliding_pair)
    assert len(prompt_ids(sliding_pair)[0]) > 2 * WINDOW
    assert len(drafts) >= 5  # the lean loop drafted, from the first step to the last
    # Rejected candidates past the window: crops of a sliding cache, which must not raise.
    assert sum(accepted < drafted for drafted, accepted in policy.seen if drafted) >= 3
    for ids, drafted in drafts:
        assert fresh_draft(sliding_pair.assistant, ids, len(drafted)) == drafted


def test_a_sliding_window_assistant_drafts_through_its_own_generator_too(sliding_pair):
    """The path sampling takes: Transformers' assistant generator, which crops the cache
    to the committed ids less one before it drafts. Cropped first to what the committed ids
    confirm and then again, a sliding-window layer would lose a state inside its window
    (the attention then saw 8 states where its mask wanted 9)."""
    constant(sliding_pair.assistant)
    policy = Scripted([3, 2, 0, 4])
    ids = prompt_ids(sliding_pair)
    with seam.drafting_policy(sliding_pair.target, policy, lean=False):
        out = sliding_pair.target.generate(
            ids, max_new_tokens=24, assistant_model=sliding_pair.assistant, do_sample=False
        )
    assert out[0, ids.shape[1] :].tolist() == plain(sliding_pair)
    assert sum(accepted < drafted for drafted, accepted in policy.seen if drafted) >= 3


GAMMA = 5


def continuation(assistant, ids: torch.Tensor, count: int) -> tuple[list[int], list[float]]:
    """The assistant's greedy `count` tokens after `ids`, no end of sequence, and the
    probability it gave each."""
    seq = ids[0].tolist()
    probs = []
    with torch.inference_mode():
        for _ in range(count):
            logits = assistant(input_ids=torch.tensor([seq])).logits[0, -1].float()
            seq.append(int(logits.argmax()))
            probs.append(logits.softmax(-1).max().item())
    return seq[ids.shape[1] :], probs


def reference_draft(assistant, ids: list[int], eos: int) -> list[int]:
    """The candidates Transformers' assistant generator drafts after `ids` (a fresh one: the
    assistant's `generate()` with the target's end of sequence and the assistant's
    confidence threshold, as it calls it)."""
    config = GenerationConfig(do_sample=False, eos_token_id=eos, max_length=1000, min_length=0)
    input_ids = torch.tensor([ids])
    generator = AssistedCandidateGenerator(
        input_ids, assistant, config, {"attention_mask": torch.ones_like(input_ids)}
    )
    candidates, _ = generator.get_candidates(input_ids)
    return candidates[0, len(ids) :].tolist()


def lean_for(assistant, eos: int, cumulative: float = 0.0) -> LeanDrafter:
    """The lean loop as the `auto` seam builds it, from the generator Transformers built."""
    config = GenerationConfig(do_sample=False, eos_token_id=eos, max_length=1000, min_length=0)
    ids = torch.tensor([[eos]])
    generator = AssistedCandidateGenerator(ids, assistant, config, {})
    return seam._lean_drafter(generator, config, DraftSettings(cumulative_threshold=cumulative))


def test_the_lean_loop_drafts_what_the_assistants_generate_would(pair):
    """With a confidence threshold and an end-of-sequence token that both cut drafts, the
    lean loop (one drafter, its cache cropped between calls) drafts after each prefix what
    Transformers' generator would: the argmax, up to and including the first token below
    the threshold or at the end of sequence."""
    assistant = pair.assistant
    ids = prompt_ids(pair)
    tokens, probs = continuation(assistant, ids, 24)
    # A threshold half-way in the widest gap between the probabilities, away from every
    # one of them, so that float rounding cannot move a token across it.
    ordered = sorted(probs)
    gaps = [(b - a, (a + b) / 2) for a, b in pairwise(ordered[3:-3])]
    _, threshold = max(gaps)
    # The end of sequence: a confident token after the first few, absent before it.
    eos = next(
        t for i, t in enumerate(tokens[6:], 6) if probs[i] > threshold and t not in tokens[:i]
    )
    constant(assistant, threshold)
    assistant.generation_config.num_assistant_tokens = GAMMA
    # Under `auto` the policy prices where a draft ends: the seam's loop leaves the
    # assistant's own threshold to Transformers' drafting, and the loop keeps its rule.
    assert lean_for(assistant, eos).threshold == 0.0
    lean = LeanDrafter(assistant, threshold, {eos})
    assert lean.eos_ids == {eos}
    ends = []
    for length in range(len(tokens) - GAMMA):
        prefix = ids[0].tolist() + tokens[:length]
        expected = reference_draft(assistant, prefix, eos)
        drafted = lean.draft(torch.tensor([prefix]), GAMMA)
        assert drafted == expected, length
        ends.append("full" if len(drafted) == GAMMA else "eos" if drafted[-1] == eos else "unsure")
    # Every rule ended some drafts: the length, the end of sequence, the threshold.
    assert {"full", "eos", "unsure"} <= set(ends), ends


def test_the_cumulative_threshold_ends_a_draft_once_its_reach_falls_below_it(pair):
    """With a cumulative threshold, the lean loop stops after the first token at which the
    product of the draft's probabilities falls below it: after each prefix it drafts the
    assistant's own continuation up to and including that token."""
    assistant = pair.assistant
    ids = prompt_ids(pair)
    tokens, probs = continuation(assistant, ids, 24)
    starts = range(len(tokens) - GAMMA)
    reaches = sorted(math.prod(probs[s : s + j + 1]) for s in starts for j in range(GAMMA))
    whole = [math.prod(probs[s : s + GAMMA]) for s in starts]
    # Half-way in the widest gap between the products, away from every one of them so that
    # float rounding cannot move a draft's end across it, and between the whole drafts'
    # lowest and highest, so that it cuts one draft and spares another.
    inside = [r for r in reaches if min(whole) <= r <= max(whole)]
    _, cumulative = max((b - a, (a + b) / 2) for a, b in pairwise(inside))
    constant(assistant)
    eos = next(t for t in range(len(tokens) + 1) if t not in tokens)
    lean = lean_for(assistant, eos, cumulative)
    lengths = []
    for start in starts:
        reach, length = 1.0, GAMMA
        for j in range(GAMMA):
            reach *= probs[start + j]
            if reach < cumulative:
                length = j + 1
                break
        prefix = ids[0].tolist() + tokens[:start]
        assert lean.draft(torch.tensor([prefix]), GAMMA) == tokens[start : start + length]
        lengths.append(length)
    assert min(lengths) < GAMMA and GAMMA in lengths, lengths  # it cut some drafts, not all


def test_sampling_drafts_with_the_generator_and_greedy_with_the_lean_loop(
    pair, drafts, monkeypatch
):
    """Speculative sampling needs the assistant's scores, which only its `generate()` gives:
    under sampling the lean loop never drafts, under greedy decoding it drafts every time."""
    calls = []
    get_candidates = AssistedCandidateGenerator.get_candidates

    def recording(self, input_ids, **kwargs):
        calls.append(input_ids.shape[1])
        return get_candidates(self, input_ids, **kwargs)

    monkeypatch.setattr(AssistedCandidateGenerator, "get_candidates", recording)
    constant(pair.assistant)
    torch.manual_seed(0)
    generate(pair, Scripted([3]), do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    assert len(calls) >= 3 and drafts == []
    calls.clear()
    generate(pair, Scripted([3]), do_sample=False)
    assert len(drafts) >= 3 and calls == []
