"""One request per GPU call: the app's GPU entry points and their ZeroGPU duration
functions each take one request object, which pickles across the process boundary."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

import app
from assisted.analysis.sampling import CheckSettings
from assisted.bench import plan_variants
from assisted.core.settings import DraftSettings, Example, RunSettings
from assisted.models.registry import DEFAULT_PAIR, PAIRS
from assisted.policy.learnt import LearntSnapshot
from assisted.ui import gpu_time
from assisted.ui.benchmark.format import BenchmarkRequest
from assisted.ui.compare.format import ComparisonRequest
from assisted.ui.requests import PairPlace, StopFlags

ROOT = Path(app.__file__).resolve().parent
SPEC = PAIRS[DEFAULT_PAIR]
PLACE = PairPlace(SPEC, "cpu", "float32", allow_local=False)
STOPS = StopFlags()  # their folder lives as long as they do


def requests() -> tuple[ComparisonRequest, BenchmarkRequest]:
    stop = STOPS.open("a request")
    comparison = ComparisonRequest(
        PLACE, "Hi.", RunSettings(max_new_tokens=8), DraftSettings(), stop
    )
    variants = tuple(plan_variants(SPEC, [SPEC.drafter.value], {}))
    benchmark = BenchmarkRequest(
        PLACE,
        (Example("q0", "chat", "Hi."),),
        variants,
        RunSettings(max_new_tokens=8),
        2,
        stop,
        LearntSnapshot({}),
        CheckSettings(samples=4),
    )
    return comparison, benchmark


def test_each_tab_has_a_gpu_entry_point_that_streams_and_takes_one_request():
    assert list(app.GPU_CALLS) == [tab.name for tab in app.TABS]
    for function in (*app.GPU_CALLS.values(), app._gpu_duration):
        assert list(inspect.signature(function).parameters) == ["request"], function
    for function in app.GPU_CALLS.values():
        # `spaces.GPU` streams a call's yields only from a generator function; any other
        # function's return value crosses the process boundary whole, pickled.
        assert inspect.isgeneratorfunction(function), function


def test_a_request_pickles_whole_with_its_stop_flag():
    for request in requests():
        copy = pickle.loads(pickle.dumps(request))
        assert copy == request
        request.stop.set()
        assert copy.stop.is_set()  # the flag is a file every process sees
        request.stop.clear()


def test_the_durations_read_the_request_as_the_estimates_do():
    comparison, benchmark = requests()
    preloaded = SPEC.name in app._preloaded
    # The capture priced at the request's own cap, as every request's is.
    asked = app._gpu_times.runs(SPEC.name, 8, 8, preloaded, comparison.drafting_cap()).seconds
    assert app._gpu_duration(comparison) == asked
    # 1 prompt × 2 repeats × 8 tokens, plain and per variant; the check's samples assisted.
    checking = benchmark.check.draws() * gpu_time.CHECK_SAMPLE_TOKENS
    plain, assisted = 16, 16 * len(benchmark.variants) + checking
    cap = benchmark.drafting_cap()
    asked = app._gpu_times.runs(SPEC.name, plain, assisted, preloaded, cap).seconds
    assert app._gpu_duration(benchmark) == asked


def test_app_py_is_a_composition_root_of_at_most_300_lines():
    assert len((ROOT / "app.py").read_text().splitlines()) <= 300
