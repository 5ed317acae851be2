"""The engine's tests' shared pairs: tiny models built once per session (`tests/conftest.py`),
loaded once per test module. Imports stay inside the fixtures: without torch, this folder's
tests are left out, but its conftest is still read."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    """The tiny target with a different random model as its assistant."""
    from tests.engine.runs import load

    return load(tiny_dirs)


@pytest.fixture(scope="module")
def self_pair(tiny_dirs):
    """The tiny target as its own assistant: every draft is accepted."""
    from tests.engine.runs import load

    return load(tiny_dirs, assistant="target")


@pytest.fixture
def lookup_pair(tiny_dirs):
    """Prompt lookup on a target that always predicts one token, `repeat`: drafts copied
    from a prompt of that token repeated are all accepted."""
    import torch

    from assisted.core.settings import DrafterKind
    from tests.engine.runs import load

    lookup = load(tiny_dirs, assistant=None, drafter=DrafterKind.PROMPT_LOOKUP)
    repeat = lookup.tokenizer("a")["input_ids"][0]

    def always_repeat(module, args, logits):
        forced = torch.zeros_like(logits)
        forced[..., repeat] = 1.0
        return forced

    handle = lookup.target.lm_head.register_forward_hook(always_repeat)
    yield lookup, repeat
    handle.remove()
