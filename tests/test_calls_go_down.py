"""A request's calls go down the layers, as its imports do: traced with `sys.setprofile` in
every thread (as tests/engine/test_run_only_runs.py traces a run), no call leaves a module
for one of a layer its own may not import. A callback handed down (an analysis passed to
a guard in `assisted.analysis`, say) would be such a call: the low module runs the high
one's code, and the layers hold on paper only."""

from __future__ import annotations

import collections
from collections.abc import Callable

import pytest

from assisted.analysis import oracle
from assisted.bench import shootout
from assisted.core.settings import RunSettings
from assisted.engine import decoding, engine
from assisted.models.pairs import LoadedPair, custom_pair, load_pair
from lab.walk import profiled
from tests.engine.test_run_only_runs import module_of
from tests.test_layers import ALLOWED, layer

SETTINGS = RunSettings(max_new_tokens=8)
PROMPT = "Write a palindrome check."


def climbs(request: Callable[[], object]) -> collections.Counter[tuple[str, str]]:
    """Each (caller, callee) pair of project modules, with its count, where `request` calls
    up the layers: the caller is the nearest project frame below the call (a library's
    frames in between, Transformers' loop calling the drafter, say, are passed over)."""
    found: collections.Counter[tuple[str, str]] = collections.Counter()

    def profile(frame, event, arg):
        if event != "call" or (callee := module_of(frame.f_code.co_filename)) is None:
            return
        caller = frame.f_back
        while caller is not None and module_of(caller.f_code.co_filename) is None:
            caller = caller.f_back
        if caller is None or (below := module_of(caller.f_code.co_filename)) == callee:
            return
        if layer(callee) not in ALLOWED[layer(below)] | {layer(below)}:
            found[(below, callee)] += 1

    with profiled(profile):
        request()
    return found


@pytest.fixture(scope="module")
def pair(tiny_dirs) -> LoadedPair:
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return load_pair(spec, device="cpu", dtype="float32")


def compare(pair: LoadedPair) -> None:
    for _ in decoding.compare(pair, PROMPT, SETTINGS):
        pass


def race(pair: LoadedPair) -> None:
    """A shoot-out of four lanes (`auto` among them) and two rounds."""
    for _ in shootout.shootout(pair, PROMPT, SETTINGS, shootout.lanes(pair)[:4], repeats=2):
        pass


@pytest.mark.parametrize("request_", [compare, race], ids=["comparison", "shoot-out"])
def test_a_request_never_calls_back_up_a_layer(pair, request_):
    assert climbs(lambda: request_(pair)) == {}


def test_the_check_finds_a_planted_call_back_up(pair, monkeypatch):
    """The check itself: an analysis that calls into the engine (the oracle's report swapped
    for an engine function; it raises there, and the oracle is marked failed) is caught."""
    monkeypatch.setattr(oracle, "report", engine.encode_prompt)
    found = climbs(lambda: race(pair))
    assert ("assisted.analysis.stats", "assisted.engine.engine") in found
