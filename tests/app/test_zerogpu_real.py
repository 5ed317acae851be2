"""A Space's start on ZeroGPU with `spaces`' real patching (`tests/zerogpu_real.py`, run as
a program: the patching holds for the whole process), over a Hugging Face cache laid out
as the Hub's, holding the tiny pair."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from tests.zerogpu_real import COMMIT, hub_cache

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_space_starts_on_the_real_patching_and_loads_a_model_its_start_pruned(
    tiny_dirs, tmp_path
):
    """The preload at the start (once), the launch's pack, which deletes the weight files
    it packed from the cache, then a visitor's request: its handler thread, where CUDA is
    not emulated, fetches a pair of the same two models again (their files are gone), and
    its GPU call forks a worker, which starts as on ZeroGPU and compares on that pair."""
    for repo_id, folder in (("tiny/target", "target"), ("tiny/assistant", "other")):
        shutil.copytree(tiny_dirs[folder], tmp_path / "origin" / repo_id)
        hub_cache(tmp_path / "hub", repo_id, tiny_dirs[folder])
    environment = {
        **os.environ,
        "SPACES_ZERO_GPU": "true",
        "SPACES_ZERO_DEVICE_API_URL": "http://127.0.0.1:9/",  # never reached: stubbed
        "SPACE_ID": "test/assisted-decoding",
        "ZEROGPU_OFFLOAD_DIR": str(tmp_path / "offload"),
        "ZEROGPU_MMAP_AUTOPRUNE_PATTERN": str(tmp_path / "hub" / "models--*" / "blobs" / "*"),
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_OFFLINE": "1",
        # fp32, as saved: the loaded weights are the mapped files, which the pack prunes.
        "ASSISTED_DTYPE": "float32",
        "GRADIO_SERVER_PORT": str(free_port()),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.zerogpu_real", str(tmp_path)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["zero_gpu"] and seen["packs"] == 1
    assert seen["printed"].count("Preloading tiny") == 1  # `python app.py`: once
    assert "Loaded tiny" in seen["printed"] and "after packing" in seen["printed"]
    assert seen["preloaded_on"] == "cuda torch.float32"
    assert seen["pruned"] == [
        f"models--tiny--assistant/snapshots/{COMMIT}/model.safetensors",
        f"models--tiny--target/snapshots/{COMMIT}/model.safetensors",
    ]
    handler = seen["handler"]
    assert isinstance(handler, dict), handler  # else the request's error
    assert "CUDA" in handler["cuda_here"]  # the guard on every thread but the importing one
    assert handler["identical"] is True and handler["new_tokens"] == 6
    # Fetched again once their files had gone (two files each: the config, then the rest).
    assert seen["downloads"][-4:] == ["tiny/target"] * 2 + ["tiny/assistant"] * 2
    assert len(seen["requests_s"]) == 1  # the GPU call, scheduled once
