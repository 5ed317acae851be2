"""Nothing in drafting fails a request (`assisted.engine.drafters.draft_graphs`): on the CPU's
stand-in for CUDA graphs (`tests.engine.graph_stand_in`), as if on CUDA, with a fault in
the capture, the self-check, the timing of the replays, or a replay in a run, each
comparison answers, lossless, drafting with the lean loop on a DynamicCache priced at its
own cost and saying why; the next one captures nothing again. A sticky CUDA error ends the
request in words, and no later request in the process meets the broken context."""

from __future__ import annotations

import os
import types
from dataclasses import dataclass

import gradio as gr
import pytest
import torch

from assisted.core.record import CUDA_GRAPHS, EAGER, FAILED
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.drafters import draft_graphs, seam
from assisted.engine.engine import Engine, encode_prompt
from assisted.ui import gpu_calls
from assisted.ui.requests import PairPlace
from tests.engine.graph_stand_in import StandInGraphs
from tests.engine.runs import PROMPT, load, records
from tests.scripted import Scripted

CAP = 4
AUTO = DraftSettings(
    num_assistant_tokens=CAP, schedule="auto", confidence_threshold=0.0, assistant_quant="none"
)
GREEDY = RunSettings(max_new_tokens=24)
# What a sticky CUDA error looks like to torch: every later call in the process fails too.
ILLEGAL_ADDRESS = "CUDA error: an illegal memory access was encountered"


class FaultyGraphs(StandInGraphs):
    """The stand-in, with faults on demand: a capture or a replay that raises, replays that
    leave their first probability `skew` off (a wrong replay); raising a
    `torch.AcceleratorError` breaks the device, whose every later call then fails, a
    synchronisation's too (as a sticky CUDA error does)."""

    def __init__(self) -> None:
        super().__init__()
        self.captures = 0
        self.capture_fault: Exception | None = None
        self.replay_fault: Exception | None = None
        self.skew = 0.0
        self.broken = False

    def record(self, region, pool=None):
        self._raise(self.capture_fault)
        self.captures += 1
        replay = super().record(region, pool)

        def faulty() -> None:
            self._raise(self.replay_fault)
            replay()
            region.args[0].out[1, 0] += self.skew  # `draft_on_device`'s state

        return faulty

    def synchronize(self, device: torch.device) -> None:
        self._raise(None)

    def _raise(self, fault: Exception | None) -> None:
        if self.broken:
            raise torch.AcceleratorError(ILLEGAL_ADDRESS)
        if fault is not None:
            self.broken = isinstance(fault, torch.AcceleratorError)
            raise fault


@pytest.fixture
def on_cuda(monkeypatch) -> FaultyGraphs:
    """Graphs captured and replayed through `FaultyGraphs`, the assistant taken to be on
    CUDA; the process's broken context forgotten afterwards."""
    graphs = FaultyGraphs()
    monkeypatch.setattr(draft_graphs, "GRAPHS", graphs)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    yield graphs
    draft_graphs._broken.pop(os.getpid(), None)


@pytest.fixture
def pair(tiny_dirs):
    """The tiny pair, its assistant with nothing captured: what a capture gave is kept on
    the assistant for the process."""
    pair = load(tiny_dirs)
    assistant = Engine.of(pair).prepare(AUTO).assistant
    vars(assistant).pop(draft_graphs.OUTCOME, None)
    yield pair
    vars(assistant).pop(draft_graphs.OUTCOME, None)


def failing(*args, **kwargs):
    raise RuntimeError("cudaErrorLaunchTimeout: the kernel ran too long")


@dataclass(frozen=True)
class Fault:
    """Where a fault is injected, and what the run's drafting path then says."""

    name: str
    said: str


FAULTS = [
    Fault("capture", "the capture failed (RuntimeError: operation not permitted"),
    Fault("check", "self-check failed: a draft of 1 differed by 0.25 (bound 0.001) at candidate 1"),
    Fault("timing", "timing the replays failed (RuntimeError: cudaErrorLaunchTimeout"),
    Fault("replay", "a replay failed in a run (RuntimeError: graph exec invalidated"),
]


def comparison(pair) -> dict:
    """A comparison whose `auto` runs draft from the assistant at every step (`Scripted`),
    so that a faulty replay is met."""
    with pytest.MonkeyPatch.context() as scripted:
        scripted.setattr(decoding, "auto_policy", lambda *_args, **_kwargs: Scripted([3, 1, 4, 2]))
        done = records(pair, PROMPT, GREEDY, AUTO)
    assert done["assisted"].token_ids == done["plain"].token_ids  # lossless, and answered
    return done


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.name for fault in FAULTS])
def test_a_fault_in_drafting_falls_back_and_the_next_request_captures_nothing_again(
    pair, on_cuda, monkeypatch, fault
):
    """Mutations each case catches: the capture, the check, or the timing out of the `try`
    in `draft_graphs._captured` (the request fails); no loop timed after a capture's
    exception (priced at the calibration's bare pass); a replay's exception not caught in
    `StaticDrafter.draft` (the request fails); the outcome not kept (captured again)."""
    graphs = on_cuda
    with monkeypatch.context() as injected:
        if fault.name == "capture":
            graphs.capture_fault = RuntimeError("operation not permitted when stream is capturing")
        elif fault.name == "check":
            graphs.skew = 0.25
        elif fault.name == "timing":
            injected.setattr(draft_graphs, "_replay_s", failing)
        else:  # after a request that captured and replayed
            assert comparison(pair)["assisted"].drafting_path.path == CUDA_GRAPHS
            graphs.replay_fault = RuntimeError("graph exec invalidated")
        first = comparison(pair)
    graphs.capture_fault, graphs.skew = None, 0.0
    path = first["assisted"].drafting_path
    assert path.path == EAGER and fault.said in path.reason, path.reason
    assert path.reason.endswith("the lean loop on a DynamicCache")
    if fault.name == "check":
        assert path.check == FAILED
    captures = graphs.captures

    second = comparison(pair)  # a replay fault is not cleared: nothing replays again
    assert graphs.captures == captures, "captured again"
    assert second["assisted"].drafting_path.reason == path.reason
    outcome = draft_graphs.outcome_of(pair.assistant)
    assert outcome.graphs is None and not outcome.untimed
    # Priced at the loop's own cost, timed after the fault (a replay's: at the next request).
    assert outcome.loop_s > 0
    ids = encode_prompt(pair, PROMPT)
    ready = decoding.make_plan(pair, ids, "assisted", GREEDY, Engine.of(pair).prepare(AUTO))
    assert ready.policy.costs.drafter_s[seam.ASSISTANT] == outcome.loop_s


def test_a_fault_in_timing_the_fallback_loop_still_answers(pair, on_cuda, monkeypatch):
    """The self-check fails and timing the loop it falls back to raises too: the reason says
    both, and the run drafts with the loop, priced by its own timings as it goes."""
    monkeypatch.setattr(draft_graphs, "_loop_s", failing)
    on_cuda.skew = 0.25
    done = comparison(pair)
    reason = done["assisted"].drafting_path.reason
    assert reason.startswith("self-check failed: ")
    assert "; timing it failed (RuntimeError: cudaErrorLaunchTimeout" in reason
    assert draft_graphs.outcome_of(pair.assistant).loop_s is None


@pytest.mark.parametrize("where", ["capture", "replay"])
def test_a_sticky_cuda_error_ends_the_request_in_words_and_no_later_one_meets_it(
    pair, on_cuda, where
):
    """After a sticky error the device answers nothing, a synchronisation included: no
    fallback runs in that context (`check_context`). The request ends in words; every
    later GPU call in the process says so before it touches the pair. Mutations caught:
    no probe after a fault (the fallback meets the broken device: "Generation failed");
    no `broken()` check at the call's start (the next call runs in it)."""
    graphs = on_cuda
    sticky = torch.AcceleratorError(ILLEGAL_ADDRESS)
    if where == "capture":
        graphs.capture_fault = sticky
    else:
        comparison(pair)  # captured and drafting through the graphs
        graphs.replay_fault = sticky
    with pytest.raises(draft_graphs.BrokenContext) as raised:
        comparison(pair)
    words = str(raised.value)
    assert "CUDA context is broken" in words and ILLEGAL_ADDRESS in words
    assert draft_graphs.broken() == words

    ran = []
    request = types.SimpleNamespace(pair=PairPlace(pair.spec, "cuda", "float32", True))
    call = gpu_calls.gpu_call(request, lambda *args: iter(ran.append(args) or ()), "Compare")
    with pytest.raises(gr.Error) as said:
        list(call)
    assert words in str(said.value) and not ran
