"""What a ZeroGPU call asks for before and after its pair was timed: pure arithmetic on
the registry's published sizes and the calls' own timings (`assisted.ui.gpu_time`)."""

from __future__ import annotations

import math

import pytest

from assisted.core.settings import RunSettings
from assisted.engine.drafters import draft_graphs
from assisted.models import machines
from assisted.models.hardware import CUDA_SETUP_S, zerogpu_slice
from assisted.models.registry import PAIRS
from assisted.ui import gpu_time
from assisted.ui.gpu_time import CallReport, GpuTimes, first_guess

DEFAULT_TOKENS = RunSettings().max_new_tokens
SPACE_MAX_S = 300  # the app's ASSISTED_GPU_CALL_MAX_S
SLICE = zerogpu_slice()  # the main process's: the slowest machine `spaces` knows


def test_a_step_costs_the_larger_of_its_bytes_over_the_bandwidth_and_its_launches():
    """The host launches while the device computes: a step pays the larger, not the sum
    (the 7B on half the Blackwell: 17 ms of bytes, not 27 ms with its launches added)."""
    coder = PAIRS["qwen2.5-coder-7b"]
    step = SLICE.step_s(coder.target_size)
    bytes_s = 7.62e9 * 2 / SLICE.bytes_per_s
    launches_s = 28 * SLICE.launch_s_per_layer
    assert launches_s < bytes_s
    assert step == pytest.approx(bytes_s) == pytest.approx(0.017, rel=0.01)
    assistant = SLICE.step_s(coder.assistant_size)  # 0.5B: 24 layers' launches, 1 GB
    assert assistant == pytest.approx(24 * SLICE.launch_s_per_layer)
    # The embedded target is as deep: with a fifth of the weights, its launches keep its
    # step at half the 7B's or more.
    small = SLICE.step_s(PAIRS["embedded"].target_size)
    assert 0.45 < small / step < 1


@pytest.mark.parametrize("preloaded", [True, False])
def test_a_never_timed_7b_pair_asks_at_most_120_s_at_the_defaults(preloaded):
    times = GpuTimes(SPACE_MAX_S)
    for name in ("qwen2.5-coder-7b", "qwen2.5-7b", "llama-3.1-8b"):
        estimate = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded)
        assert not estimate.measured
        assert gpu_time.FLOOR_S <= estimate.seconds <= 120, name


def test_a_timed_comparison_at_the_defaults_asks_at_most_60_s():
    times = GpuTimes(SPACE_MAX_S)
    name = "qwen2.5-coder-7b"
    guess = first_guess(PAIRS[name])
    # The first call measured what the guess said, with drafting at 1.6 times the pace.
    rate = guess.plain_s_per_token
    times.note(CallReport(name, None, guess.setup_s, rate, rate / 1.6))
    estimate = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True)
    assert estimate.measured and estimate.seconds <= 60
    expected = gpu_time.MARGIN * (DEFAULT_TOKENS * (rate + rate / 1.6) + guess.setup_s)
    assert estimate.seconds == max(gpu_time.FLOOR_S, math.ceil(expected))


def test_a_pair_of_unknown_size_is_priced_at_the_largest_its_checks_allow():
    times = GpuTimes(SPACE_MAX_S)
    unknown = times.runs(
        "owner/custom ← owner/small", DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=False
    )
    known = times.runs("qwen2.5-coder-7b", DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=False)
    assert known.seconds < unknown.seconds <= SPACE_MAX_S
    assert first_guess(None).load_s > first_guess(PAIRS["qwen2.5-coder-7b"]).load_s


def test_a_request_counts_a_fresh_workers_start_estimated_then_as_measured():
    """Every fresh worker moves the preloaded weights onto the GPU before its task: a never
    timed request counts CUDA's set-up and those bytes at the load bandwidth, labelled as an
    estimate, until a fresh worker has timed its start."""
    name = "qwen2.5-coder-7b"
    times = GpuTimes(SPACE_MAX_S)
    before = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True)
    times.preloaded(20 * 10**9)
    cold = CUDA_SETUP_S + 20e9 / SLICE.load_bytes_per_s
    estimated = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True)
    assert estimated.estimate_s == pytest.approx(before.estimate_s + cold)
    assert "cold start" in estimated.describe() and "20.0 GB moved" in estimated.describe()
    times.note(CallReport(name, None, None, cold_start_s=2.5))
    measured = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True)
    assert measured.estimate_s == pytest.approx(before.estimate_s + 2.5)
    assert "2 s as measured here" in measured.describe()
    # Off ZeroGPU nothing forks, and nothing preloaded is moved: no term.
    assert before.cold_start == ""


def test_after_an_abort_the_pairs_next_request_asks_more_up_to_the_cap_until_one_finishes():
    name = "qwen2.5-coder-7b"
    times = GpuTimes(SPACE_MAX_S)
    first = times.runs(name, 32, 32, preloaded=True)
    times.aborted(name)
    grown = times.runs(name, 32, 32, preloaded=True)
    assert grown.asked_s == pytest.approx(gpu_time.ABORT_GROWTH * first.asked_s)
    assert grown.seconds > first.seconds and "after 1 aborted call" in grown.describe()
    assert times.runs("qwen2.5-7b", 32, 32, preloaded=True).aborts == 0  # that pair only
    for _ in range(8):
        times.aborted(name)
    assert times.runs(name, 32, 32, preloaded=True).seconds == SPACE_MAX_S
    times.note(CallReport(name, None, None))  # a call on the pair finished
    assert times.runs(name, 32, 32, preloaded=True).seconds == first.seconds


def test_a_request_counts_the_capture_a_fresh_worker_makes_at_the_call_s_cap():
    """A pair whose assistant drafts as captured graphs asks, before any call measured it,
    for the capture too: its recorded passes (1 + … + cap a cache) at the assistant's
    steps. Once a call measured a capture, every later request counts it, as the next call
    may get a fresh fork that captures again, scaled to the request's cap by the passes
    recorded: a longer cap's recapture costs more. Mutation caught: a capture priced at a
    fixed cap (the 664 passes of before)."""
    coder, lookup = PAIRS["qwen2.5-coder-7b"], PAIRS["qwen2.5-coder-7b-prompt-lookup"]
    assert len(draft_graphs.BUCKETS) == gpu_time.CAPTURED_CACHES
    assert coder.draft.num_assistant_tokens == 8
    step_s = SLICE.step_s(coder.assistant_size)
    capture = gpu_time.recorded_passes(8) * gpu_time.RECORDED_PASS_STEPS * step_s
    assert first_guess(lookup).capture_s is None
    assert first_guess(coder).capture_s == pytest.approx(capture)
    # The H200's measurement it stands on: 2.78 s a cache at cap 8, for four caches.
    assert 8 < capture < 16
    times = GpuTimes(SPACE_MAX_S)
    name = coder.name

    def estimate(cap: int) -> float:
        return times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, True, cap).estimate_s

    guessed = {cap: estimate(cap) for cap in (4, 8)}
    assert guessed[8] - guessed[4] == pytest.approx(capture * (1 - 10 / 36))
    times.note(CallReport(name, None, 12.0, 0.03, 0.02, capture_s=2.0, capture_cap=4))
    at_4, at_8 = estimate(4), estimate(8)
    assert at_8 - at_4 == pytest.approx(2.0 * 36 / 10 - 2.0)  # recorded: 10 passes, then 36
    times.note(CallReport(name, None, 4.0, 0.03, 0.02))  # warmed a mode, captured nothing
    assert estimate(4) == pytest.approx(at_4 - 10.0 + 4.0)  # the set-up, 10 s then 4: capture kept


@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_a_request_is_divided_by_the_factor_spaces_multiplies_it_by(factor, monkeypatch):
    """`spaces` multiplies a `large` call's duration by its machine's factor (1.5 on the
    RTX PRO 6000 Blackwell) in `get_duration_seconds`: what it then schedules, and charges
    the visitor, is the estimate times the margin, and never more than the most allowed."""
    from datetime import timedelta

    from spaces.zero import client, config

    blackwell = next(m for m in machines.machines() if m.duration_factor == factor)
    named = {"model": blackwell.model, "duration_factor": factor}
    monkeypatch.setattr(config, "get_config", lambda: named)
    times = GpuTimes(SPACE_MAX_S)
    name = "qwen2.5-coder-7b"
    estimate = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True)
    assert estimate.duration_factor == factor
    scheduled = client.get_duration_seconds(timedelta(seconds=estimate.seconds), "large")
    assert scheduled == estimate.scheduled_s
    assert estimate.asked_s <= scheduled < estimate.asked_s + factor
    assert ("on this GPU" in estimate.describe()) == (factor != 1.0)
    for _ in range(8):
        times.aborted(name)
    capped = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True)
    scheduled = client.get_duration_seconds(timedelta(seconds=capped.seconds), "large")
    assert SPACE_MAX_S - factor < scheduled <= SPACE_MAX_S


def test_a_first_guess_follows_the_gpu_a_worker_reports():
    """The main process, which has no GPU, guesses on the slowest machine `spaces` knows;
    once a worker names its GPU, a pair never timed is guessed on that one."""
    times = GpuTimes(SPACE_MAX_S)
    name = "qwen2.5-coder-7b"
    slowest = times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True).estimate_s
    times.note(CallReport("embedded", None, None, gpu="NVIDIA H200 MIG 3g.71gb"))
    assert times.device == zerogpu_slice("NVIDIA H200")
    assert times.runs(name, DEFAULT_TOKENS, DEFAULT_TOKENS, preloaded=True).estimate_s < slowest


def test_a_call_reports_the_capture_its_runs_drafted_through():
    from assisted.core.record import CUDA_GRAPHS, EAGER, DraftingPath, RunRecord
    from assisted.ui.gpu_time import runs_capture_s

    plain = RunRecord("plain", None, 5)
    eager = RunRecord("assisted", None, 5, drafting_path=DraftingPath(EAGER, "on a CPU"))
    graphed = RunRecord("assisted", None, 5, drafting_path=DraftingPath(CUDA_GRAPHS, "ok", 2.5))
    assert runs_capture_s([plain, eager]) is None
    assert runs_capture_s([plain, eager, graphed]) == 2.5
