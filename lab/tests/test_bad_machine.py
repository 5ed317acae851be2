"""The bad machine reproduced (`lab.bad_machine`): a learnt file of another machine
carried over to the pair at hand, and a busy neighbour on one core."""

from __future__ import annotations

import json
import time
from collections import OrderedDict

import psutil

from assisted.models import learnt_store, pairs
from lab import bad_machine

DISTURBED = {1: 0.187, 2: 0.18, 3: 0.45, 9: 0.205}


def test_a_learnt_file_of_another_machine_is_what_the_pair_first_reads(
    tiny_dirs, tmp_path, monkeypatch
):
    monkeypatch.setenv("ASSISTED_LEARNT_DIR", str(tmp_path / "learnt"))
    monkeypatch.setattr(pairs._loaded, "entries", OrderedDict())  # as a new process: nothing loaded
    spec = pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    elsewhere = {
        "version": 4,
        "key": {"pair": spec.name, "machine": "cpu another machine"},
        "verify_s": [[k, s] for k, s in DISTURBED.items()],
        "precisions": {"none": {"draft_s": 0.02, "prefill_s": 0.02, "acceptance": []}},
    }
    fixture = tmp_path / "elsewhere.json"
    fixture.write_text(json.dumps(elsewhere), encoding="utf-8")
    with bad_machine.carried_over(fixture):
        pair = pairs.load_pair(spec, device="cpu", dtype="float32")
    assert pair.learnt.verify_s == DISTURBED
    assert pair.learnt.precision("none").prefill_s == 0.02
    # Written under this machine's key, as a process finds it on disk.
    on_disk = json.loads(pair.learnt_file.path.read_text(encoding="utf-8"))
    assert on_disk["key"] == pair.learnt_file.key != elsewhere["key"]
    assert learnt_store.load.__name__ == "load"  # the seam is back as it was


def test_a_busy_neighbour_spins_for_the_block_and_ends_with_it():
    with bad_machine.busy_neighbour() as pid:
        neighbour = psutil.Process(pid)
        time.sleep(0.5)
        assert neighbour.cpu_percent(interval=0.5) > 50  # spinning
    assert not neighbour.is_running() or neighbour.status() == psutil.STATUS_ZOMBIE
