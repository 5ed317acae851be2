"""`python -m lab.memory` on a tiny pair: a row per stage, read from /proc."""

from __future__ import annotations

import json
import sys

import pytest

from assisted.models import pairs
from lab import memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_each_stage_reports_resident_memory_its_peak_and_the_weights_held(tiny_dirs):
    pairs._loaded.entries.clear()
    spec = pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    rows = memory.measure(spec, "cpu", "float32", max_new_tokens=4)
    assert [row["stage"] for row in rows][:2] == ["imports", "load the pair"]
    assert all(row["peak"] >= row["resident"] > 0 for row in rows)
    loaded = pairs.loaded(spec, "cpu", "float32")
    assert rows[0]["weights"] == 0 and rows[-1]["weights"] == loaded.memory_bytes() > 0
    text = memory.render(rows)
    assert "peak / weights kept" in text and len(text.splitlines()) == len(rows) + 2


def test_the_command_ends_with_one_line_of_json(monkeypatch, capsys):
    rows = [{"stage": "imports", "resident": 2**30, "peak": 2**31, "weights": 2**30}]
    monkeypatch.setattr(memory, "measure", lambda *args: rows)
    assert memory.main(["--pair", "embedded"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last) == {"pair": "embedded", "beside": None, "stages": rows}


def test_a_pair_beside_one_with_its_target_adds_no_weights(tiny_dirs):
    pairs._loaded.entries.clear()
    spec = pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    lookup = pairs.custom_pair(str(tiny_dirs["target"]), None)  # the same target alone
    rows = memory.measure(spec, "cpu", "float32", max_new_tokens=4, beside=lookup)
    assert rows[-1]["stage"] == f"load {lookup.name} beside it"
    assert len(pairs.loaded_pairs()) == 2
    assert rows[-1]["weights"] == rows[-2]["weights"] == pairs.memory_in_use() > 0
    pairs._loaded.entries.clear()
