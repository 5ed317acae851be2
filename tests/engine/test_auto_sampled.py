"""`auto` under sampling: acceptance is learnt per temperature band, apart from greedy's; the
sampled drafting cost is timed once per process and prices sampled runs; and the warm-up
warms the path the timed run will take."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from assisted.analysis import stats
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings, band_of
from assisted.engine import decoding, engine
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models import learnt_store
from assisted.models.learnt_store import LearntFile
from assisted.models.pairs import custom_pair, load_pair
from assisted.policy.learnt import LearntState
from tests.engine.runs import priced

AUTO = DraftSettings(num_assistant_tokens=4, schedule="auto", confidence_threshold=0.0)
GREEDY = RunSettings(max_new_tokens=12)
SAMPLED = RunSettings(max_new_tokens=12, sample=True, temperature=0.7, top_p=0.9, seed=1)
A = DrafterKind.ASSISTANT
SAMPLED_DRAFT_S = 0.123  # what the sampled drafting "takes" where its timing is faked


@pytest.fixture(scope="module")
def loaded(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return load_pair(spec, device="cpu", dtype="float32")


@pytest.fixture
def pair(loaded, tmp_path):
    """The pair as a new process holds it: nothing learnt, timed or warmed, and a learnt
    file of the test's own."""
    file = LearntFile(tmp_path / "p.json", {"pair": "p"})
    return dataclasses.replace(loaded, learnt=LearntState(), learnt_file=file)


@pytest.fixture
def sampled_timings(monkeypatch) -> list:
    """The sampled drafting's timings, faked: each call is one entry."""
    calls = []

    def timing(assistant, prefix, settings, device):
        calls.append(settings)
        return SAMPLED_DRAFT_S

    monkeypatch.setattr(engine, "_time_sampled_drafting", timing)
    return calls


@pytest.fixture
def free_run(pair, monkeypatch, trusted_prices):
    """An `auto` run of `pair` whose assistant is priced nearly free, greedy and sampled, so
    that it drafts and leaves counts in every run (a pair carries the assistant's
    acceptance, not a lookup's); priced again before each run, whose first read teaches
    the pair the tiny assistant's real read time."""
    monkeypatch.setattr(engine, "_time_sampled_drafting", lambda *args: 1e-7)

    def run(settings: RunSettings):
        priced(pair, prefill_s=0.0, draft_s=1e-7, draft=AUTO, verify_s=1e-3)
        return auto_run(pair, settings)

    return run


def auto_run(pair, settings: RunSettings):
    ids = encode_prompt(pair, "def add(a, b):")
    events = decoding.run(pair, ids, "assisted", settings, AUTO)
    return next(event.record for event in events if isinstance(event, RunDone))


def test_a_runs_band_is_greedy_or_its_temperatures():
    assert band_of(RunSettings(temperature=2.0)) == "greedy"  # not sampling
    for temperature, band in [(0.2, "t<=0.5"), (0.5, "t<=0.5"), (0.7, "t<=1"), (1.0, "t<=1")]:
        assert band_of(RunSettings(sample=True, temperature=temperature)) == band
    assert band_of(RunSettings(sample=True, temperature=1.5)) == "t>1"


def test_a_sampled_run_leaves_greedys_history_as_it_was_and_keeps_its_own(pair, free_run):
    greedy = free_run(GREEDY)
    learnt = pair.learnt.precision("none")
    assert learnt.acceptance and not learnt.sampled
    before = pair.learnt.copy().precision("none").acceptance
    sampled = free_run(SAMPLED)
    assert learnt.acceptance == before
    assert set(learnt.sampled) == {"t<=1"} and learnt.sampled["t<=1"]
    assert (greedy.acceptance_band, sampled.acceptance_band) == ("greedy", "t<=1")
    assert stats.summarize(sampled)["acceptance_band"] == "t<=1"
    assert stats.summarize(greedy)["acceptance_band"] == "greedy"
    assert learnt_store.load(pair.learnt_file).precision("none").sampled == learnt.sampled


def test_a_greedy_run_leaves_the_sampled_bands_as_they_were(pair, free_run):
    free_run(SAMPLED)
    kept = pair.learnt.copy().precision("none").sampled
    assert kept["t<=1"]
    free_run(GREEDY)
    assert pair.learnt.precision("none").sampled == kept


def test_a_run_starts_from_its_own_bands_history(pair, sampled_timings):
    auto_run(pair, GREEDY)  # calibrates
    auto_run(pair, SAMPLED)  # and times the sampled drafting
    learnt = pair.learnt.precision("none")
    learnt.acceptance = {(A, False, 0): ([1.0], [9.0])}
    learnt.sampled["t<=1"] = {(A, False, 0): ([8.0], [9.0])}
    for band, history in [("greedy", learnt.acceptance), ("t<=1", learnt.sampled["t<=1"])]:
        policy = engine.new_policy(pair, AUTO, "none", band)
        assert policy.acceptance.counts() == history
    assert engine.new_policy(pair, AUTO, "none", "t>1").acceptance.counts() == {}


def test_the_sampled_drafting_cost_is_timed_once_and_prices_sampled_runs(pair, sampled_timings):
    auto_run(pair, GREEDY)
    assert sampled_timings == []  # greedy runs never pay for it
    auto_run(pair, SAMPLED)
    auto_run(pair, SAMPLED.with_(temperature=1.5))  # another band, the same cost
    assert sampled_timings == [SAMPLED]  # timed with the first sampled run's settings
    prefix = torch.tensor([[1, 2, 3]])
    engine.calibrate_sampled(pair, prefix, pair.assistant, "none", SAMPLED)  # a racing thread's
    assert sampled_timings == [SAMPLED]
    learnt = pair.learnt.precision("none")
    assert learnt.sampled_draft_s == SAMPLED_DRAFT_S != learnt.draft_s
    assert engine.new_policy(pair, AUTO, "none", "t<=1").costs.drafter_s[A] == SAMPLED_DRAFT_S
    assert engine.new_policy(pair, AUTO, "none", "greedy").costs.drafter_s[A] == learnt.draft_s
    assert learnt_store.load(pair.learnt_file).precision("none").sampled_draft_s == (
        SAMPLED_DRAFT_S
    )
    assert pair.learnt.timed_here().sampled_drafting == {"none"}


def test_a_sampled_drafting_time_from_disk_is_checked_and_the_smaller_stands(pair, sampled_timings):
    pair.learnt.precision("none").sampled_draft_s = 0.5  # a busy earlier process's
    auto_run(pair, SAMPLED)
    assert pair.learnt.precision("none").sampled_draft_s == SAMPLED_DRAFT_S
    record = auto_run(pair, SAMPLED)
    assert "sampled drafting none" in record.calibration.checked
    assert "sampled drafting none" in record.calibration.corrected


def test_the_sampled_drafting_time_is_a_time_per_token(loaded):
    prefix = torch.tensor([encode_prompt(loaded, "def add(a, b):")])
    seconds = engine._time_sampled_drafting(loaded.assistant, prefix, SAMPLED, loaded.device)
    assert 0 <= seconds < 1 and math.isfinite(seconds)


@pytest.fixture
def warm_runs(monkeypatch) -> list:
    """The warm-up's runs, as (mode, settings), run for nothing."""
    runs = []

    def fake_run(pair, ids, mode, settings, draft=None, stop=None, prepared=None):
        runs.append((mode, settings))
        return iter(())

    monkeypatch.setattr(decoding, "run", fake_run)
    return runs


def test_the_warm_up_warms_the_sampled_path_once_with_the_runs_settings(
    pair, warm_runs, sampled_timings
):
    decoding.warm_up(pair, ("plain", "assisted"), AUTO, SAMPLED)
    assert [mode for mode, _ in warm_runs] == ["plain", "assisted"]
    for _, settings in warm_runs:
        assert settings.sample and (settings.temperature, settings.top_p) == (0.7, 0.9)
    assert sampled_timings == [SAMPLED]  # prepared for a sampled run, before it
    warm_runs.clear()
    decoding.warm_up(pair, ("plain", "assisted"), AUTO, SAMPLED.with_(temperature=1.5))
    assert warm_runs == []  # the sampled path is warm, at any temperature
    decoding.warm_up(pair, ("plain", "assisted"), AUTO, GREEDY)
    assert [(mode, settings.sample) for mode, settings in warm_runs] == [
        ("plain", False),
        ("assisted", False),
    ]
    warm_runs.clear()
    decoding.warm_up(pair, ("plain", "assisted"), AUTO)  # greedy, as before settings
    assert warm_runs == []
