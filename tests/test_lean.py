"""The lean drafting loop (`assisted.lean`): it drafts what the assistant's `generate()`
would, with the same argmax, end-of-sequence and confidence rules, on sliding-window
assistants too, and only where the target needs ids alone (greedy decoding)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from assisted import auto, decoding
from assisted.lean import LeanDrafter
from assisted.pairs import custom_pair, load_pair
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
    """Every lean draft of the test, as (committed ids, drafted ids)."""
    seen: list[tuple[list[int], list[int]]] = []
    draft = LeanDrafter.draft

    def recording(self, input_ids, gamma):
        drafted = draft(self, input_ids, gamma)
        seen.append((input_ids[0].tolist(), drafted))
        return drafted

    monkeypatch.setattr(LeanDrafter, "draft", recording)
    return seen


def prompt_ids(pair) -> torch.Tensor:
    return torch.tensor([decoding.encode_prompt(pair, PROMPT)])


def constant(assistant, threshold=0.0) -> None:
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    assistant.generation_config.assistant_confidence_threshold = threshold


def generate(pair, policy, max_new_tokens=24, **kwargs) -> list[int]:
    """The new ids of one `generate()` drafting under `policy` through the `auto` seam."""
    ids = prompt_ids(pair)
    with auto.drafting_policy(pair.target, policy):
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
    # Rejected candidates past the window: the crops that used to raise.
    assert sum(accepted < drafted for drafted, accepted in policy.seen if drafted) >= 3
    for ids, drafted in drafts:
        assert fresh_draft(sliding_pair.assistant, ids, len(drafted)) == drafted
