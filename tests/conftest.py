"""Shared fixtures: tiny models built once per test session, nothing downloaded."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import ast
import functools
import importlib.util
from pathlib import Path

import pytest

from tests.imports import ROOT, libraries_reached, project

# Where torch is not installed, as under the Space card's Python here (`make
# test-space-python`), only the test modules that reach none of the model libraries run.
_WITHOUT_TORCH = importlib.util.find_spec("torch") is None
MODEL_LIBRARIES = {
    "torch",
    "transformers",
    "gradio",
    "gradio_client",
    "tokenizers",
    "accelerate",
    "gguf",
    "safetensors",
    "huggingface_hub",
    "spaces",
    "matplotlib",
    "pandas",
    "playwright",
}


def _reaches_models(path: Path, modules: dict) -> bool:
    """Whether the test file at `path`, or a test helper or project module it imports
    (through any import, at any depth), imports one of the model libraries."""
    reached = libraries_reached(path, modules)
    helpers = {
        node.module
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.")
    }
    return bool(reached & MODEL_LIBRARIES) or any(
        _reaches_models(ROOT / f"{helper.replace('.', '/')}.py", modules) for helper in helpers
    )


@functools.cache
def _project() -> dict:
    return project()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Without torch, leave out the test modules that need the model libraries."""
    if not _WITHOUT_TORCH or not collection_path.name.startswith("test_"):
        return None
    return True if _reaches_models(collection_path, _project()) else None


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
    from tests.tiny import build_model, build_tokenizer

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

    from tests.tiny import build_model

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

    from assisted.engine.observe import StepObserver

    put = StepObserver.put

    def slow_put(self, value):
        put(self, value)
        time.sleep(0.03)

    monkeypatch.setattr(StepObserver, "put", slow_put)


@pytest.fixture
def trusted_prices(monkeypatch):
    """The costs a test prices the pair at hold through its runs: the policy's priors
    outweigh the run's own observations (`assisted.policy.estimates.PRIOR_WEIGHT`, one
    weight for the costs' priors and the acceptance's alike). A run otherwise
    learns what it pays, and the tiny pairs' assistants are their targets' size: drafting
    a token costs a target step, so a run priced to draft would stop within three steps."""
    from assisted.policy import estimates

    monkeypatch.setattr(estimates, "PRIOR_WEIGHT", 1000)
