"""The machines ZeroGPU runs calls on, as the installed `spaces` knows them
(`assisted.models.machines`), and the first estimates made on them
(`assisted.models.hardware`): no torch, no GPU."""

from __future__ import annotations

import json
from datetime import timedelta
from importlib.resources import files

import pytest
from spaces.zero import config

from assisted.models import hardware, machines
from assisted.models.registry import PAIRS, default_pair_for

BLACKWELL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def test_the_machines_are_those_of_the_installed_spaces():
    raw = json.loads(files("spaces.zero").joinpath(config.CONFIGS_FILENAME).read_text())
    known = machines.machines()
    assert [m.model for m in known] == [item["model"] for item in raw]
    # Each has a bandwidth with its source, so a first estimate can price it.
    assert {m.model for m in known} <= set(hardware.CARD_BYTES_PER_S)


def test_a_large_call_is_half_the_blackwell_and_the_h200s_mig_slice():
    by_model = {m.model: m for m in machines.machines()}
    blackwell, h200 = by_model[BLACKWELL], by_model["NVIDIA H200"]
    assert blackwell.large_bytes == pytest.approx(51e9, rel=0.01)  # hub-docs' "48 GB" (GiB)
    assert h200.large_bytes == h200.memory_bytes  # its config is the MIG slice already
    assert machines.smallest_large_bytes() == blackwell.large_bytes


def test_the_main_process_estimates_on_the_blackwell_half_a_worker_on_its_own_gpu():
    main = hardware.zerogpu_slice()
    assert main.bytes_per_s == pytest.approx(0.896e12)  # half of 1,792 GB/s
    h200 = hardware.zerogpu_slice("NVIDIA H200 MIG 3g.71gb")
    assert h200.bytes_per_s == pytest.approx(2.4e12)
    assert hardware.zerogpu_slice(BLACKWELL) == main
    assert hardware.zerogpu_slice("NVIDIA H100 80GB HBM3") == main  # unknown: the slowest


def test_the_preloaded_default_pair_keeps_every_call_large():
    """At the launch `spaces` packs what the start-up loaded, the default pair alone
    (`app.preload`), and makes every call `xlarge`, at twice the quota, past the
    threshold: the default pair's weights stay below the lowest one."""
    threshold = machines.lowest_xlarge_threshold()
    assert threshold is not None
    for device in ("cuda", "cpu"):
        weights = PAIRS[default_pair_for(device)].weight_bytes()
        assert weights is not None and weights < threshold, device


@pytest.mark.parametrize("model", [machine.model for machine in machines.machines()])
@pytest.mark.parametrize("size", [None, "large", "xlarge"])
def test_the_duration_factor_is_what_spaces_multiplies_a_call_by(model, size, monkeypatch):
    """On each machine of the installed `spaces`' real configs and at each default size its
    launch can leave (None off ZeroGPU, `xlarge` past the packed weights' threshold), the
    factor is the one `spaces`' own `get_duration_seconds` applies to a call that names no
    size, as the app's calls do: 1.0 at `xlarge` on the Blackwell, whose factor is 1.5."""
    import spaces.zero
    from spaces.zero import client

    raw = json.loads(files("spaces.zero").joinpath(config.CONFIGS_FILENAME).read_text())
    chosen = next(item for item in raw if item["model"] == model)
    monkeypatch.setattr(config, "get_config", lambda: chosen)
    monkeypatch.setattr(spaces.zero, "_default_gpu_size", size)
    applied = client.get_duration_seconds(timedelta(seconds=100), None) / 100
    assert machines.duration_factor() == applied
    if size == "xlarge":
        assert applied == 1.0
    else:
        assert applied == chosen["duration_factor"]
    assert {item["duration_factor"] for item in raw} == {1.0, 1.5}  # both cases are there
