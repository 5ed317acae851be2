"""The race over the example kinds (`lab.race`): geomeans over the kinds, the
rounds' range, `auto` over each lane, and ties where the ranges overlap."""

from __future__ import annotations

import pytest

from lab import race


def shootout(lanes: dict[str, list[float]]) -> dict:
    """A shoot-out's ranking, each lane with its rounds' speedups (its speedup their median)."""
    return {
        "lanes": [
            {"lane": name, "speedup": sorted(rounds)[len(rounds) // 2], "speedup_rounds": rounds}
            for name, rounds in lanes.items()
        ]
    }


def test_each_lane_gets_its_geomean_its_rounds_range_and_auto_over_it():
    results = {
        "chat": shootout({"auto": [2.0, 2.0, 2.0], "γ = 8": [1.0, 1.0, 1.0]}),
        "math": shootout({"auto": [2.0, 2.0, 2.0], "γ = 8": [4.0, 4.0, 4.0]}),
    }
    summary = race.summarize(results, ["auto", "γ = 8"])
    assert summary["kinds"] == ["chat", "math"]
    lane = summary["lanes"]["γ = 8"]
    assert lane["speedup_geomean"] == pytest.approx(2.0)
    assert lane["range"] == pytest.approx([2.0, 2.0])
    assert lane["auto_over"] == pytest.approx(1.0) and lane["tied"]


def test_a_lane_apart_from_auto_in_every_round_is_not_tied():
    results = {
        "chat": shootout({"auto": [2.0, 2.2, 2.1], "heuristic": [1.0, 1.1, 0.9]}),
        "math": shootout({"auto": [1.8, 2.0, 1.9], "heuristic": [1.2, 1.0, 1.1]}),
    }
    summary = race.summarize(results, ["auto", "heuristic"])
    lane = summary["lanes"]["heuristic"]
    low, high = lane["auto_over_range"]
    assert 1.6 < low <= lane["auto_over"] <= high < 2.1
    assert lane["tied"] is False
    assert "heuristic" in race.render(summary) and "tied" not in race.render(summary)
