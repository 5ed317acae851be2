"""Shared fixtures: tiny models built once per test session, nothing downloaded."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pytest

from tests.tiny import build_model, build_tokenizer


@pytest.fixture(scope="session", autouse=True)
def learnt_dir(tmp_path_factory) -> Path:
    """What the `auto` policy learns goes to a folder of the session's, never to the user's
    cache. ASSISTED_CACHE itself stays: the integration tests read the converted models
    there. Autouse and session-wide, it is set before any fixture loads a pair, and app
    servers started as subprocesses inherit it."""
    folder = tmp_path_factory.mktemp("learnt")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ASSISTED_LEARNT_DIR", str(folder))
        yield folder


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory) -> dict[str, Path]:
    """Folders of tiny models: `target`, `other` (a different random model with the same
    tokenizer) and `other_tokenizer` (its own tokenizer with a different vocabulary)."""
    root = tmp_path_factory.mktemp("tiny")
    tokenizer = build_tokenizer(root / "tokenizer")
    build_model(root / "target", tokenizer, seed=1)
    build_model(root / "other", tokenizer, seed=2)
    small_tokenizer = build_tokenizer(root / "tokenizer-small", vocab_size=300)
    build_model(root / "other_tokenizer", small_tokenizer, seed=3)
    return {name: root / name for name in ("target", "other", "other_tokenizer")}


@pytest.fixture(scope="session")
def padded_dirs(tiny_dirs) -> dict[str, Path]:
    """Folders of a padded-vocabulary pair, as Qwen2.5-7B ← 0.5B: one tokenizer (that of
    `tiny_dirs`), config vocab sizes 152064 (`target`) and 151936 (`assistant`)."""
    from transformers import AutoTokenizer

    root = tiny_dirs["target"].parent / "padded"
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs["target"])
    build_model(root / "target", tokenizer, seed=4, vocab_size=152064, tie=False)
    build_model(root / "assistant", tokenizer, seed=5, vocab_size=151936)
    return {name: root / name for name in ("target", "assistant")}


@pytest.fixture
def slow_steps(monkeypatch):
    """Every decoding step takes 30 ms longer. Tiny models otherwise finish 200 steps in about
    a second, and on a busy machine a Stop pressed mid-run could arrive after the run ended."""
    import time

    from assisted.observe import StepObserver

    put = StepObserver.put

    def slow_put(self, value):
        put(self, value)
        time.sleep(0.03)

    monkeypatch.setattr(StepObserver, "put", slow_put)
