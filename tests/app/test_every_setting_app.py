"""Every setting a visitor can pick on the page finishes, through the app's API: a shorter
sample of tests/engine/test_every_setting.py's input space, sent to /compare with
gradio_client. Each call ends with the JSON result or with a refusal the app logged as
one (`assisted.ui.errors`): a fault ("Generation failed: ...") is a failure."""

from __future__ import annotations

import math
import shutil
from collections import Counter

import gradio_client
import pytest
from hypothesis import given
from hypothesis import strategies as st

import app
from assisted.core.settings import ASSISTANT_QUANTS, MAX_DRAFT_TOKENS, SCHEDULES
from assisted.models import pairs
from assisted.ui import errors
from tests.searched import fixed
from tests.serve import launch
from tests.tiny import CORPUS

EXAMPLES = 20
SAMPLING = ("temperature", "top_p", "seed")


@pytest.fixture(scope="module")
def folders(tiny_dirs, tmp_path_factory) -> dict[str, str]:
    """Copies of the tiny models: what these calls learn stays with their own pairs."""
    root = tmp_path_factory.mktemp("every-setting-app")
    return {name: str(shutil.copytree(path, root / name)) for name, path in tiny_dirs.items()}


@pytest.fixture(scope="module")
def client(folders):
    target = folders["target"]
    registry = {
        "tiny": pairs.custom_pair(target, folders["other"]),
        "tiny-self": pairs.custom_pair(target, target),
        "tiny-lookup": pairs.custom_pair(target, None),
        "tiny-universal": pairs.custom_pair(target, folders["other_tokenizer"], "universal"),
    }
    config = app.AppConfig(
        registry=registry, default_pair="tiny", dtype="float32", allow_local=True
    )
    demo, url = launch(config)
    yield gradio_client.Client(url, verbose=False)
    demo.close()


# The page's inputs: each slider's bounds and values between.
CUSTOM = {  # the custom pair's fields: the assistant folder's name, or none
    "with an assistant": "other",
    "prompt lookup": "",
}
pages = st.fixed_dictionaries(
    {
        "prompt": st.one_of(
            st.sampled_from(["a", "def add(a, b):", "<|im_end|>"]),
            st.lists(st.sampled_from(CORPUS), min_size=1, max_size=12).map(" ".join),
            st.text(min_size=1, max_size=20).filter(str.strip),
        ),
        "pair": st.sampled_from(["tiny", "tiny-self", "tiny-lookup", "tiny-universal", "custom"]),
        "custom": st.sampled_from(list(CUSTOM)),
        "max_new_tokens": st.one_of(st.just(1), st.integers(2, 24)),
        "decoding_mode": st.sampled_from(["greedy", "sampling"]),
        "temperature": st.one_of(st.sampled_from([0.05, 2.0]), st.floats(0.05, 2.0)),
        "top_p": st.one_of(st.sampled_from([0.05, 1.0]), st.floats(0.05, 1.0)),
        "seed": st.sampled_from([0, 7, 2**64 - 1]),
        "draft_length": st.one_of(st.sampled_from([1, MAX_DRAFT_TOKENS]), st.integers(1, 8)),
        "schedule": st.sampled_from(SCHEDULES),
        "confidence_threshold": st.sampled_from([0.0, 0.4, 0.95]),
        "chat_template": st.booleans(),
        "assistant_quant": st.sampled_from(ASSISTANT_QUANTS),
    }
)
# One input past what the page offers, as the API can send it: refused.
PAST_BOUNDS = [
    ("prompt", "   "),
    ("max_new_tokens", 0),
    ("max_new_tokens", 1024),  # past the tiny models' context
    ("temperature", 0.0),
    ("top_p", 0.0),
    ("seed", 2**64),
    ("draft_length", MAX_DRAFT_TOKENS + 1),
    ("confidence_threshold", 1.0),
    ("custom", "another tokenizer"),  # pick the universal drafter
]


def inputs(page: dict, past: tuple | None, folders: dict[str, str]) -> dict:
    """The /compare endpoint's inputs for `page`, with the input `past` names set to its
    value."""
    page = dict(page)
    if past is not None:
        name, value = past
        page[name] = value
        page["decoding_mode"] = "sampling" if name in SAMPLING else page["decoding_mode"]
        page["pair"] = "custom" if name == "custom" else page["pair"]
    custom = {**CUSTOM, "another tokenizer": "other_tokenizer"}[page.pop("custom")]
    custom_pair = page["pair"] == "custom"
    return {
        **page,
        "custom_target": folders["target"] if custom_pair else "",
        "custom_assistant": folders[custom] if custom_pair and custom else "",
    }


def test_every_setting_on_the_page_ends_in_a_result_or_a_refusal(client, folders, monkeypatch):
    refused: list[str] = []
    log = errors.log_refused

    def noted(title: str, message: str) -> None:
        refused.append(" ".join(str(message).split()))
        log(title, message)

    monkeypatch.setattr(errors, "log_refused", noted)
    outcomes: Counter[str] = Counter()

    @fixed(EXAMPLES)
    @given(page=pages, past=st.one_of(st.none(), st.none(), st.sampled_from(PAST_BOUNDS)))
    def finishes(page: dict, past: tuple | None) -> None:
        try:
            values = client.predict(**inputs(page, past, folders), api_name="/compare")
        except gradio_client.exceptions.AppError as error:
            said = " ".join(str(error).split())
            assert any(message in said for message in refused), f"a fault: {said}"
            outcomes["refused"] += 1
            return
        assert past is None, f"{past} ran instead of being refused"
        result = values[-1]
        assert result["analysis_errors"] == {}
        for run in ("plain", "assisted"):
            assert isinstance(result[run]["text"], str) and result[run]["new_tokens"] >= 1
        assert not math.isnan(result["speedup"])
        outcomes["reported"] += 1

    finishes()
    tried = sum(outcomes.values())
    reported, refused_count = outcomes["reported"], outcomes["refused"]
    print(f"\n{tried} settings of the page: {reported} results, {refused_count} refused")
    assert tried >= EXAMPLES and reported >= 5
