"""The shoot-out on tiny pairs: every lane that applies, one plain baseline, ranked; each
greedy lane identical to plain in fp32; the budget's refusals; Stop keeps what finished;
the CLI's card and JSON."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
import threading

import pytest

from assisted import cli
from assisted.bench import shootout
from assisted.bench.measuring import Progress, Streamed
from assisted.core.settings import DrafterKind, RunSettings, SettingsError
from assisted.models.pairs import custom_pair, load_pair
from tests.engine.runs import fresh_copy

PROMPT = "def add(a, b):"
SHORT = RunSettings(max_new_tokens=10)


@pytest.fixture(scope="module")
def self_pair(tiny_dirs):
    """The tiny target as its own assistant: every draft is accepted."""
    target = str(tiny_dirs["target"])
    return load_pair(custom_pair(target, target), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def result(self_pair):
    """A shoot-out of every lane, 2 rounds, and the steps it streamed, by lane."""
    streamed: dict[str | None, int] = {}
    found = None
    for item in shootout.shootout(self_pair, PROMPT, SHORT, repeats=2):
        if isinstance(item, Streamed):
            streamed[item.drafter] = streamed.get(item.drafter, 0) + 1
        elif isinstance(item, dict):
            found = item
    return found, streamed


def test_the_lanes_follow_the_pair_and_the_device(self_pair):
    names = [lane.name for lane in shootout.lanes(self_pair)]
    assert names[:4] == ["auto", "Transformers' defaults", "heuristic", "γ = 5"]
    # On a CPU the assistant's other precisions race too (this pair's own is its fp32).
    assert {"auto (int8)", "auto (int4-wo)"} <= set(names)
    assert "prompt lookup" in names and len(names) <= shootout.MAX_LANES
    lookup_only = load_pair(custom_pair(str(self_pair.spec.target), None), "cpu", "float32")
    assert [lane.drafter for lane in shootout.lanes(lookup_only)] == [DrafterKind.PROMPT_LOOKUP]


def test_every_lane_is_ranked_against_one_plain_baseline_and_matches_it(result):
    found, streamed = result
    lanes = found["lanes"]
    assert len(lanes) >= 5
    speedups = [lane["speedup"] for lane in lanes]
    assert speedups == sorted(speedups, reverse=True)
    assert found["winner"] == lanes[0]["lane"] and lanes[0]["lane"] in found["why"]
    assert found["plain"]["runs"] == 2  # one plain run a round, whatever the lanes
    for lane in lanes:
        comparison = lane["comparison"]
        assert lane["outcome"] == "identical" and comparison["identical"] is True
        assert comparison["assisted"]["text"] == comparison["plain"]["text"]
        assert comparison["analysis_errors"] == {}
    # The self-draft's drafts are all accepted wherever it drafted.
    drafted = [lane for lane in lanes if lane["acceptance_rate"] is not None]
    assert drafted and all(lane["acceptance_rate"] == 1.0 for lane in drafted)
    # Each lane and the baseline streamed their steps as they ran; the race has them all.
    assert set(streamed) == {None} | {lane["lane"] for lane in lanes}
    assert set(found["race"]) == {"plain"} | {lane["lane"] for lane in lanes}
    assert all(points[-1][1] == 10 for points in found["race"].values())
    assert found["sweep"]["basis"].startswith("replayed") and found["sweep"]["curves"]
    json.dumps(found)  # the endpoint's and the CLI's JSON


def test_each_lane_has_its_rounds_range_and_lanes_the_rounds_cannot_rank_are_tied(result):
    found, _ = result
    for lane in found["lanes"]:
        low, high = lane["speedup_range"]
        assert low <= lane["speedup"] <= high or lane["repeats"] != 2
    assert found["lanes"][0]["tied"] is False
    card = shootout.render(found)
    assert "rounds" in card.splitlines()[1]


def test_a_lane_is_tied_where_its_rounds_reach_the_winners():
    ranked = [
        {"lane": "auto", "speedup": 1.9, "speedup_range": [1.7, 2.1]},
        {"lane": "γ = 8", "speedup": 1.8, "speedup_range": [1.6, 1.75]},  # reaches 1.7
        {"lane": "lookup", "speedup": 1.2, "speedup_range": [1.1, 1.3]},  # below it
        {"lane": "heuristic", "speedup": None, "speedup_range": None},  # no round whole
    ]
    shootout.mark_ties(ranked)
    assert [lane["tied"] for lane in ranked] == [False, True, False, False]
    assert shootout.range_text(ranked[1]) == "= 1.60–1.75x"
    lanes = [
        dict(lane, acceptance_rate=0.5, drafting_cost_ratio=0.1, drafting_s_per_token=0.01)
        for lane in ranked[:3]
    ]
    assert "Tied with it within the rounds' ranges: γ = 8." in shootout.why(lanes)


def test_the_sweep_is_priced_by_what_the_steps_measured_not_by_the_hindsights_costs(self_pair):
    """The γ sweep replays a lane at the T(k) its steps measured (`measured_costs.priced`):
    the hindsight's own curve (the policy's, or the calibration's bare passes) only shapes
    the rows no step verified, at the level of those measured, so a curve a thousand times
    dearer moves it little; replayed at the hindsight's curve, every γ would read about a
    thousandth of its speed."""
    pair = fresh_copy(self_pair)
    lanes = {lane.name: lane for lane in shootout.lanes(pair)}
    runs, found = [], None
    for item in shootout.shootout(pair, PROMPT, SHORT, [lanes["auto"], lanes["γ = 5"]], 1):
        if isinstance(item, Progress) and item.run is not None:
            runs.append(item.run)
        elif isinstance(item, dict):
            found = item
    assert found["sweep"]["curves"]
    for run in runs:
        h = run.record.hindsight
        if h is not None:
            dearer = tuple((k, 1000 * seconds) for k, seconds in h.verify_s)
            run.record.hindsight = dataclasses.replace(h, verify_s=dearer)
    dearer = shootout.sweep(found["lanes"], runs)["curves"]
    for lane, curve in found["sweep"]["curves"].items():
        for gamma, speedup in curve.items():
            assert 1 / 3 < dearer[lane][gamma] / speedup < 3, (lane, gamma)


def test_a_lane_measured_above_its_oracle_is_ranked_as_above_it(result):
    found, _ = result
    lanes = [dict(found["lanes"][0], measured_share=1.28), *found["lanes"][1:]]
    card = shootout.render(found | {"lanes": lanes})
    assert "above the oracle (×1.28)" in card and "128%" not in card


@pytest.mark.parametrize(
    ("settings", "repeats", "message"),
    [
        (RunSettings(max_new_tokens=shootout.MAX_NEW_TOKENS + 1), 1, "at most 128 new tokens"),
        (RunSettings(max_new_tokens=8, sample=True), 1, "greedy"),
        (SHORT, shootout.MAX_REPEATS + 1, "1 to 5 rounds"),
    ],
)
def test_a_shootout_past_its_budget_is_refused(self_pair, settings, repeats, message):
    with pytest.raises(SettingsError, match=message):
        next(shootout.shootout(self_pair, PROMPT, settings, repeats=repeats))


def test_more_lanes_than_the_budget_are_refused(self_pair):
    lanes = shootout.lanes(self_pair)
    with pytest.raises(SettingsError, match="at most 7 lanes"):
        next(shootout.shootout(self_pair, PROMPT, SHORT, lanes + lanes[:1]))


def test_stop_ends_the_shootout_and_ranks_the_rounds_that_finished(self_pair):
    stop = threading.Event()
    chosen = shootout.lanes(self_pair)[:2]
    timed = 0
    found = None
    for item in shootout.shootout(self_pair, PROMPT, SHORT, chosen, repeats=3, stop=stop):
        if isinstance(item, Progress) and item.run is not None:
            timed += 1
            if timed == 4:  # the first round (plain and two lanes) and one run more
                stop.set()
        elif isinstance(item, dict):
            found = item
    assert found["stopped"] is True
    assert [lane["repeats"] for lane in found["lanes"]] == [1, 1]
    assert found["plain"]["runs"] >= 1


def per_step_kept(found: dict) -> list[bool]:
    """Whether each lane's comparison keeps its runs' steps."""
    return [
        "per_step" in lane["comparison"][run]
        for lane in found["lanes"]
        for run in ("plain", "assisted")
    ]


def test_each_lane_keeps_its_runs_steps_only_where_asked(self_pair, result):
    found, _ = result
    assert per_step_kept(found) == [False] * 2 * len(found["lanes"])
    lane = shootout.lanes(self_pair)[:1]
    races = shootout.shootout(self_pair, PROMPT, SHORT, lane, repeats=1, per_step=True)
    asked = [item for item in races if isinstance(item, dict)][-1]
    assert per_step_kept(asked) == [True, True]
    assert len(asked["lanes"][0]["comparison"]["assisted"]["per_step"]) >= 1


def test_the_cli_ranks_the_lanes_and_ends_with_their_json(tiny_dirs, capsys):
    target = str(tiny_dirs["target"])
    argv = [PROMPT, "--target", target, "--assistant", target, "--dtype", "float32"]
    argv += ["--shootout", "--repeats", "1", "--max-new-tokens", "8", "--json"]
    out = io.StringIO()
    assert cli.main([*argv, "--lanes", "auto,prompt lookup"], out=out) == 0
    lines = out.getvalue().strip().splitlines()
    found = json.loads(lines[-1])
    assert "Shoot-out on" in lines[0] and found["why"] in out.getvalue()
    assert {lane["lane"] for lane in found["lanes"]} == {"auto", "prompt lookup"}
    assert not any(per_step_kept(found))
    out = io.StringIO()
    assert cli.main([*argv, "--lanes", "auto", "--steps"], out=out) == 0
    assert all(per_step_kept(json.loads(out.getvalue().strip().splitlines()[-1])))
    assert cli.main([*argv, "--lanes", "auto,no such lane"], out=io.StringIO()) == 2
    assert "no lane 'no such lane' here; the lanes: auto, " in capsys.readouterr().err


def test_the_cli_refuses_a_shootout_past_its_budget_before_loading(tiny_dirs, capsys):
    target = str(tiny_dirs["target"])
    argv = [PROMPT, "--target", target, "--assistant", target, "--shootout"]
    assert cli.main([*argv, "--max-new-tokens", "200"], out=io.StringIO()) == 2
    assert "at most 128 new tokens" in capsys.readouterr().err


def test_each_lane_is_prepared_once(self_pair):
    """A lane's runs (its warm-ups and every round) are handed the preparation made for it
    before any run, instead of each asking `prepare` again."""
    from assisted.engine.engine import Engine

    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is Engine.prepare.__code__:
            calls.append(frame.f_locals["draft"])

    chosen = shootout.lanes(self_pair)[:3]
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        for _ in shootout.shootout(self_pair, PROMPT, SHORT, chosen, repeats=2):
            pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert sorted(map(repr, calls)) == sorted(repr(lane.draft) for lane in chosen)
