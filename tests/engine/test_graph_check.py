"""The graphs' self-check tells a wrong replay from a last bit
(`assisted.engine.drafters.static_draft`): replays equal to eager passes on their cache
pass; replays within the dtype's bound pass as "last-bit", with the largest gap and where,
and keep drafting through the graphs; a replay beyond it, a candidate changed where the
eager draft had no near-tie, two replays that differ, a fault near the cache's end, NaN
against a number: each fails, and the run falls back. On the CPU's stand-in for captured
graphs: each replay runs the passes a capture records, then the fault under test."""

from __future__ import annotations

import os

import pytest
import torch

from assisted.core.record import CUDA_GRAPHS, FAILED, LAST_BIT, PASSED
from assisted.engine.drafters import draft_graphs, static_draft
from assisted.engine.drafters.static_draft import (
    DraftGraphs,
    StaticDrafter,
    draft_on_device,
    self_check,
    tolerance,
)
from tests.engine.graph_stand_in import StandInGraphs
from tests.engine.test_static_draft import CAP, CAPACITY, checked_graphs, near_pair, prompt_ids

__all__ = ["near_pair"]  # the fixture, shared with the static cache's tests


def faulty(graphs: DraftGraphs, fault) -> DraftGraphs:
    """`graphs` whose every replay runs its passes, then `fault(state, gamma)`."""
    for gamma in list(graphs.replays):

        def replay(gamma: int = gamma) -> None:
            draft_on_device(graphs.state, gamma)
            fault(graphs.state, gamma)

        graphs.replays[gamma] = replay
    return graphs


def checked(pair, fault) -> static_draft.Verdict:
    prompt = prompt_ids(pair)
    return self_check([faulty(checked_graphs(pair.assistant, prompt), fault)], prompt)


def one_ulp_up(state, gamma: int) -> None:
    """The draft's last probability one float32 step up: another kernel's rounding."""
    out = state.out
    out[1, gamma - 1] = torch.nextafter(out[1, gamma - 1].float(), torch.tensor(2.0)).double()


def test_a_replay_within_the_last_bit_passes_as_last_bit_and_keeps_its_graphs(
    near_pair, monkeypatch
):
    """Through the product's capture (`draft_graphs._captured`, the capture itself the
    stand-in graphs): the verdict, the gap and where it was reach the run's drafting path,
    and the graphs draft. Mutation caught: any difference failing the check, as the
    bit-for-bit check of before did (then the run falls back)."""
    verdict = checked(near_pair, one_ulp_up)
    assert verdict.check == LAST_BIT, verdict.detail
    assert 0 < verdict.gap <= tolerance(near_pair.assistant)
    assert verdict.gap_at.startswith("a draft of ") and "candidate" in verdict.gap_at

    def captured(model, cap, probe):
        return (faulty(checked_graphs(model, probe, cap), one_ulp_up),)

    monkeypatch.setattr(draft_graphs, "_capture", captured)
    monkeypatch.setattr(draft_graphs, "GRAPHS", StandInGraphs())  # its waits for the device
    outcome = draft_graphs._captured(near_pair.assistant, CAP, prompt_ids(near_pair))
    assert outcome.graphs is not None, outcome.reason
    assert "within the last bits" in outcome.reason
    monkeypatch.setattr(near_pair.assistant, draft_graphs.OUTCOME, outcome, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    drafter = draft_graphs.drafter_for_run(near_pair.assistant, 0.0, (), 0.0, CAPACITY, CAP)
    assert isinstance(drafter, StaticDrafter)
    path = drafter.path
    assert (path.path, path.check, path.gap) == (CUDA_GRAPHS, LAST_BIT, verdict.gap)
    assert path.gap_at == verdict.gap_at


def skewed(state, gamma: int) -> None:
    state.out[1, 0] += 0.01  # ten times the fp32 bound (1e-3)


def changed(state, gamma: int) -> None:
    state.out[0, 0] += 1  # another candidate, where the eager draft had no near-tie


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (skewed, "a draft of 1 differed by 0.01 (bound 0.001) at candidate 1"),
        (changed, "a draft of 1 changed candidate 1"),
    ],
    ids=["probability", "candidate"],
)
def test_a_wrong_replay_fails(near_pair, fault, said):
    verdict = checked(near_pair, fault)
    assert verdict.check == FAILED
    assert said in verdict.detail and "against eager passes on the same cache" in verdict.detail


def test_two_replays_that_differ_fail(near_pair):
    """Every other replay one ulp up: each within the bound of the eager passes, yet two
    replays of fixed kernels on fixed inputs cannot differ. Mutation caught: one replay."""
    replays = iter(range(10_000))

    def alternating(state, gamma):
        if next(replays) % 2:
            one_ulp_up(state, gamma)

    verdict = checked(near_pair, alternating)
    assert verdict.check == FAILED
    assert "two replays of a draft of 1 differed at candidate 1" in verdict.detail


def test_a_replay_wrong_only_near_the_cache_s_end_fails(near_pair):
    """A replay that goes wrong once the cache is nearly full (a length baked in at
    capture): the probe's contexts are short, so only the draft near the end finds it.
    Mutation caught: no check near the end."""

    def wrong_when_full(state, gamma):
        if int(state.cache.layers[0].cumulative_length) >= CAPACITY - 1:
            state.out[1, 0] += 0.25

    verdict = checked(near_pair, wrong_when_full)
    assert verdict.check == FAILED
    assert f"near the cache's end (after {CAPACITY - CAP - 1} positions)" in verdict.detail


def nan_first(state, gamma):
    state.out[1, 0] = float("nan")


def test_nan_in_both_the_replay_and_the_eager_passes_passes(near_pair, monkeypatch):
    """The same NaN in the eager passes and the replays is no difference (`torch.equal`
    says it is). Mutation caught: NaN compared as a number."""

    def eager_with_nan(state, gamma):
        draft_on_device(state, gamma)
        nan_first(state, gamma)

    monkeypatch.setattr(static_draft, "draft_on_device", eager_with_nan)
    verdict = checked(near_pair, nan_first)
    assert verdict.check == PASSED, verdict.detail
    assert verdict.gap == 0.0


def test_nan_against_a_number_fails(near_pair):
    verdict = checked(near_pair, nan_first)
    assert verdict.check == FAILED
    assert "gave NaN against a number at candidate 1" in verdict.detail


def test_the_verdicts_reach_the_json(near_pair):
    """The gap and where it was, beside the verdict, in a run's JSON summary."""
    from assisted.analysis import stats
    from assisted.core.record import DraftingPath, RunRecord

    path = DraftingPath(CUDA_GRAPHS, "captured", 1.0, LAST_BIT, 9, 2.4e-7, "a draft of 3")
    record = RunRecord("assisted", None, 5, drafting_path=path)
    summary = stats.summarize(record)
    assert summary["drafting_self_check"] == LAST_BIT
    assert summary["drafting_self_check_gap"] == 2.4e-7
    assert summary["drafting_self_check_gap_at"] == "a draft of 3"
    assert os.getpid()  # nothing captured here stays: the stand-in graphs are the test's own
