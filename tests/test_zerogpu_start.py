"""A Space's start-up on ZeroGPU: the pairs preload at import, while CUDA is emulated only
in the thread that imported `spaces` (`tests.zerogpu.cuda_emulated_in_this_thread`).

Its own module: it loads pairs onto the emulated device, which no other test shares."""

from __future__ import annotations

import dataclasses
import threading

import pytest
import spaces.config
import torch

import app
from assisted.models import pairs
from tests.zerogpu import LOW_LEVEL_INIT, cuda_emulated_in_this_thread  # first: see its note


@pytest.fixture
def start_up(tiny_dirs, monkeypatch):
    """The offered pairs, and the loaded-pair cache emptied before and after."""
    target, other = str(tiny_dirs["target"]), str(tiny_dirs["other"])
    registry = {"tiny": pairs.custom_pair(target, other)}
    config = app.AppConfig(registry=registry, default_pair="tiny", allow_local=True, zerogpu=True)
    pairs._loaded.clear()
    yield config
    pairs._loaded.clear()
    pairs._pinned.clear()
    app._preloaded.clear()


def test_zerogpu_the_emulation_raises_for_a_copy_to_cuda_from_another_thread(monkeypatch):
    raised: list[BaseException] = []

    def copy() -> None:
        try:
            torch.zeros(2).to("cuda")
        except RuntimeError as error:
            raised.append(error)

    with cuda_emulated_in_this_thread(monkeypatch):
        assert torch.zeros(2).to("cuda").device.type == "cpu"  # kept aside, here
        thread = threading.Thread(target=copy)
        thread.start()
        thread.join()
    assert len(raised) == 1 and LOW_LEVEL_INIT in str(raised[0])


def test_zerogpu_the_pairs_preload_at_import_on_the_emulated_gpu(start_up, monkeypatch):
    """Transformers' loader threads never write to the device: the weights load on the
    CPU and move from the importing thread (`assisted.models.loading`)."""
    monkeypatch.setattr(spaces.config.Config, "zero_gpu", True)
    with cuda_emulated_in_this_thread(monkeypatch):
        app.preload(dataclasses.replace(start_up, device="auto", dtype="auto"))
        pair = pairs.loaded(start_up.registry["tiny"], "auto", "auto")
    assert app._preloaded == {start_up.registry["tiny"].name}
    assert pair is not None and pair.device.type == "cuda" and pair.dtype == torch.bfloat16


def test_zerogpu_a_pair_whose_files_fail_at_start_up_leaves_the_space_up(
    start_up, monkeypatch, capsys
):
    """A pair with no room to load is fetched at start-up; a failed fetch is said and
    skipped, for the first request to try again."""
    broken = dataclasses.replace(start_up.registry["tiny"], name="broken")
    config = dataclasses.replace(start_up, registry={**start_up.registry, "broken": broken})
    fetch = pairs.fetch_pair

    def failing(spec, *args, **kwargs):
        if spec.name == "broken":
            raise pairs.PairError("the Hub is down")
        return fetch(spec, *args, **kwargs)

    monkeypatch.setattr(pairs, "MAX_LOADED_PAIRS", 1)
    monkeypatch.setattr(pairs, "fetch_pair", failing)
    app.preload(dataclasses.replace(config, device="cpu", dtype="float32"))
    printed = capsys.readouterr().out
    assert "broken: not fetched at start-up (the Hub is down)" in printed
    assert "broken: loads inside each GPU call" in printed
    assert app._preloaded == {start_up.registry["tiny"].name}
