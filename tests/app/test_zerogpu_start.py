"""A Space's start-up on ZeroGPU: the pairs other than the default are fetched ahead,
behind the start. The start on `spaces`' real patching, preload and pack included, is
`tests/app/test_zerogpu_real.py`'s."""

from __future__ import annotations

import dataclasses

import pytest

import app
from assisted.models import pairs


@pytest.fixture
def start_up(tiny_dirs, monkeypatch):
    """The offered pairs, and the loaded-pair cache emptied before and after."""
    target, other = str(tiny_dirs["target"]), str(tiny_dirs["other"])
    registry = {"tiny": pairs.custom_pair(target, other)}
    config = app.AppConfig(registry=registry, default_pair="tiny", allow_local=True, zerogpu=True)
    pairs._loaded.entries.clear()
    yield config
    pairs._loaded.entries.clear()
    pairs._loaded.pinned.clear()
    app._preloaded.clear()


def test_zerogpu_a_pair_that_fails_or_overfills_the_disk_is_not_fetched_ahead(
    start_up, monkeypatch, capsys
):
    """The pairs other than the default are fetched behind the start, each while the disk
    keeps room for a visitor's pair; one that fails or would not leave it is said and
    left to the first request."""
    broken = dataclasses.replace(start_up.registry["tiny"], name="broken")
    large = dataclasses.replace(start_up.registry["tiny"], name="large")
    fine = dataclasses.replace(start_up.registry["tiny"], name="fine")
    offered = {**start_up.registry, "broken": broken, "large": large, "fine": fine}
    fetch = pairs.fetch_pair
    fetched = []

    def fetching(spec, *args, **kwargs):
        if spec.name == "broken":
            raise pairs.PairError("the Hub is down")
        fetched.append(spec.name)
        return fetch(spec, *args, **kwargs)

    def too_full(spec, allow_local=True):
        return "its 90.0 GB would leave less than …" if spec.name == "large" else None

    monkeypatch.setattr(pairs, "fetch_pair", fetching)
    monkeypatch.setattr(pairs, "disk_too_full_for", too_full)
    app.preload(dataclasses.replace(start_up, registry=offered, device="cpu", dtype="float32"))
    app._fetching_ahead.join(60)
    printed = capsys.readouterr().out
    assert "broken: not fetched ahead (the Hub is down)" in printed
    assert "large: not fetched ahead: its 90.0 GB would leave less than" in printed
    assert "fine: loads inside each GPU call" in printed
    default = start_up.registry["tiny"].name
    assert fetched == [default, "fine"]  # the default pair loaded, then one fetched
    assert app._preloaded == {start_up.registry["tiny"].name}


def test_a_pair_is_fetched_ahead_only_with_room_left_for_a_visitors_pair(start_up, monkeypatch):
    spec = pairs.custom_pair("owner/hub-model", None)
    monkeypatch.setattr(pairs, "weight_files_bytes", lambda ref: 10 * 10**9)
    monkeypatch.setattr(pairs, "MAX_MODEL_GB", 40.0)
    monkeypatch.setattr(pairs.fetch, "free_bytes", lambda: 60 * 10**9)
    assert pairs.disk_too_full_for(spec) is None  # 60 - 10 leaves the 40 kept
    monkeypatch.setattr(pairs.fetch, "free_bytes", lambda: 45 * 10**9)
    assert "its 10.0 GB would leave less than the 40 GB" in pairs.disk_too_full_for(spec)
