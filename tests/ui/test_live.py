"""A comparison as it streams (`assisted.ui.compare.live`): each update renders only its new steps,
the whole-run outputs take a bounded share of the stream's time, and the last update is
the one a comparison rendered from its finished records would give."""

from __future__ import annotations

import itertools
import pickle
import threading
from dataclasses import replace
from types import SimpleNamespace

import gradio as gr
import pandas as pd
import pytest

from assisted.core.record import RunRecord, Step
from assisted.core.settings import DrafterKind, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone, StepEvent
from assisted.ui.compare import live as live_module
from assisted.ui.compare.format import UNCHANGED
from assisted.ui.compare.live import HELD, WHOLE_SHARE, Live
from assisted.ui.compare.tab import filled_in, skipping_unchanged

TOKENIZER = SimpleNamespace(decode=lambda ids, **kwargs: "".join(f"<{t}>" for t in ids))
PAIR = SimpleNamespace(
    spec=SimpleNamespace(name="p", drafter=DrafterKind.ASSISTANT),
    device="cpu",
    dtype_name="float32",
    tokenizer=TOKENIZER,
)


class Clock:
    """Seconds that move only when told, and by `per_read` at each reading: a build of the
    whole-run outputs, read before and after, then takes `per_read`."""

    def __init__(self, per_read: float = 0.0):
        self.now = 0.0
        self.per_read = per_read

    def __call__(self) -> float:
        self.now += self.per_read
        return self.now


def plain_steps(count: int) -> list[Step]:
    return [Step((t,), f"w{t} ", 0, 0, 0.05 * (t + 1)) for t in range(count)]


def assisted_steps(count: int, sampled: bool = False) -> list[Step]:
    steps = []
    for n in range(count):
        first = 3 * n
        draws = {"draft_p": (0.9, 0.4, 0.2), "draft_q": (0.8, 0.5, 0.9)} if sampled else {}
        steps.append(
            Step(
                (first, first + 1, first + 2),
                f"w{first} w{first + 1} w{first + 2} ",
                3,
                2,
                0.08 * (n + 1),
                (first, first + 1, 99),
                f"w{first} w{first + 1} ",
                "x ",
                draft_s=0.02,
                chosen=3,
                source=DrafterKind.ASSISTANT,
                **draws,
            )
        )
    return steps


def streamed(
    live: Live, plain: list[Step], assisted: list[Step], sampled: bool = False
) -> list[decoding.Event]:
    """The events of a comparison; each run's record ends with the text of its last step
    completed (a character held back while it streamed)."""
    events: list[decoding.Event] = [decoding.Phase("warmup"), decoding.Phase("plain")]
    for mode, steps in (("plain", plain), ("assisted", assisted)):
        if mode == "assisted":
            events.append(decoding.Phase("assisted"))
        events += [StepEvent(mode, 0, step) for step in steps]
        last = replace(steps[-1], text=steps[-1].text + "!")
        drafter = DrafterKind.ASSISTANT if mode == "assisted" else None
        record = RunRecord(mode, drafter, 7, [*steps[:-1], last], steps[-1].t_s, sampled=sampled)
        events.append(RunDone(record))
    return events


def same(first: object, second: object) -> bool:
    if isinstance(first, pd.DataFrame):
        return isinstance(second, pd.DataFrame) and first.equals(second)
    return first == second


@pytest.mark.parametrize("sample", [False, True])
def test_the_last_update_is_the_comparison_rendered_from_its_records(sample):
    settings = RunSettings(sample=sample)
    plain, assisted = plain_steps(40), assisted_steps(15, sampled=sample)
    live = Live(PAIR, 7, settings, threading.Event())
    for event in streamed(live, plain, assisted, sample):
        live.add(event)
        live.outputs()
    last = live.outputs(done=True)
    # The same comparison, its records alone: every chunk made from them at once.
    fresh = Live(PAIR, 7, settings, threading.Event())
    fresh.draft_texts = live.draft_texts
    for event in streamed(fresh, plain, assisted, sample):
        if isinstance(event, RunDone):
            fresh.add(event)
    expected = fresh.outputs(done=True)
    for name, value in last._asdict().items():
        assert same(value, getattr(expected, name)), name
    assert "w39 !" in last.plain_text and "</div></div>" in last.plain_text
    assert last.result["plain"]["per_step"]
    assert all(value is not UNCHANGED for value in last)


def test_each_update_renders_its_new_steps_only(monkeypatch):
    rendered = []
    real = live_module.chunk_html

    def counting(mode, number, chunk):
        rendered.append((mode, number))
        return real(mode, number, chunk)

    monkeypatch.setattr(live_module, "chunk_html", counting)
    live = Live(PAIR, 7, RunSettings(), threading.Event(), clock=Clock(per_read=0.001))
    events = streamed(live, plain_steps(300), assisted_steps(100), False)
    texts = []
    for event in events:
        before = len(rendered)
        live.add(event)
        outputs = live.outputs()
        new = len(rendered) - before
        if isinstance(event, StepEvent):
            assert new == 1  # this step, once
        elif isinstance(event, RunDone):  # its record's steps, once again
            assert new == len(event.record.steps)
        if live.phase == "plain" and "plain" not in live.records:
            texts.append(outputs.plain_text)
    # Each update's running text starts with the last one's: Gradio sends what it adds.
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert 'class="run-text plain running"' in texts[-1] and "w299" in texts[-1]


def test_the_whole_run_outputs_take_a_bounded_share_of_the_stream():
    clock = Clock(per_read=0.002)  # a build of the whole run takes 2 ms
    live = Live(PAIR, 7, RunSettings(), threading.Event(), clock=clock)
    events = streamed(live, plain_steps(400), assisted_steps(100), False)
    builds = updates = 0
    for event in events:
        clock.now += 0.08  # an update every 80 ms
        live.add(event)
        outputs = live.outputs()
        updates += 1
        held = [getattr(outputs, name) is UNCHANGED for name in HELD]
        assert all(held) or not any(held)  # the whole run is built at once, or not at all
        builds += not held[0]
        if not isinstance(event, StepEvent):  # a run starts or ends: built anew
            assert not held[0]
        assert outputs.plain_stats.startswith('<div class="stat-card">')  # always a card
        assert outputs.status and outputs.race is None
    # A build every 2 ms / WHOLE_SHARE = 100 ms at most: every other update, about.
    spent = builds * 0.002 / (updates * 0.08)
    assert spent <= WHOLE_SHARE * 1.5
    assert builds >= updates * 0.08 * WHOLE_SHARE / 0.002 * 0.5


def test_a_held_output_crosses_the_gpu_process_and_is_skipped_in_the_tab():
    live = Live(PAIR, 7, RunSettings(), threading.Event(), clock=Clock(per_read=1.0))
    for event in streamed(live, plain_steps(5), assisted_steps(2), False)[:4]:
        live.add(event)
        outputs = live.outputs()
    back = pickle.loads(pickle.dumps(outputs))  # ZeroGPU pickles each yield
    assert back.result is UNCHANGED and back.tokens_over_time is UNCHANGED
    shown = skipping_unchanged(back)
    assert shown.result == gr.skip() and shown.time_per_step == gr.skip()
    assert shown.plain_text == back.plain_text and "w1" in shown.plain_text
    # An API caller gets the last values instead, so each of its updates is whole.
    first = live_first_outputs()
    whole = filled_in(back, first)
    assert whole.result is first.result and whole.tokens_over_time is first.tokens_over_time
    assert whole.plain_text == back.plain_text
    assert filled_in(first, None) == first  # nothing left unchanged: nothing to fill


def live_first_outputs():
    live = Live(PAIR, 7, RunSettings(), threading.Event())
    live.add(decoding.Phase("plain"))
    return live.outputs()


def test_the_status_names_a_capture_only_where_this_call_paid_for_it(monkeypatch):
    """The warm-up says when it captures the assistant's drafts as graphs; the last line
    names the capture's seconds only for the call that captured (a reused worker paid
    none)."""
    from assisted.core.record import CUDA_GRAPHS, DraftingPath
    from assisted.core.settings import DraftSettings
    from assisted.engine.drafters import draft_graphs

    auto = DraftSettings(schedule="auto")
    pair = SimpleNamespace(**vars(PAIR), assistant=object())
    monkeypatch.setattr(draft_graphs, "pending", lambda model, cap: True)
    live = Live(pair, 7, RunSettings(), threading.Event(), draft=auto)
    events = streamed(live, plain_steps(4), assisted_steps(2))
    live.add(events[0])  # the warm-up starts
    assert "capturing the assistant's drafts as CUDA graphs" in live.outputs().status
    assert "capturing" not in Live(
        pair, 7, RunSettings(sample=True), threading.Event(), draft=auto
    )._status(False)
    for event in events[1:]:
        if isinstance(event, RunDone) and event.record.mode == "assisted":
            path = DraftingPath(CUDA_GRAPHS, "captured and self-checked", 1.25)
            event = RunDone(replace(event.record, drafting_path=path))
        live.add(event)
    reused = live.outputs(done=True).status
    assert "captured and self-checked" in reused and "1.25 s" not in reused
    live.set_up = True
    assert "This call captured them first, in 1.25 s" in live.outputs(done=True).status


def test_the_status_says_when_the_graphs_replay_within_the_last_bits():
    """A "last-bit" self-check drafts through the graphs, and the line says so, with the
    largest gap and where it was."""
    from assisted.core.record import CUDA_GRAPHS, LAST_BIT, DraftingPath

    live = Live(PAIR, 7, RunSettings(), threading.Event())
    for event in streamed(live, plain_steps(4), assisted_steps(2)):
        if isinstance(event, RunDone) and event.record.mode == "assisted":
            at = "a draft of 3 on a cache of 512, candidate 2"
            path = DraftingPath(
                CUDA_GRAPHS, "captured and self-checked", 1.0, LAST_BIT, 9, 0.03, at
            )
            event = RunDone(replace(event.record, drafting_path=path))
        live.add(event)
    status = live.outputs(done=True).status
    assert "within the last bits of eager passes (largest probability gap 0.03, " + at in status
    assert status.count("\n") == 0


@pytest.mark.parametrize("check", ["failed", "inconclusive"])
def test_the_status_says_in_one_line_why_drafting_fell_back_to_the_dynamic_cache(check):
    """After a failed or inconclusive self-check the drafting line names the verdict and
    the path drafting fell back to; a run whose graphs passed says nothing of it."""
    from assisted.core.record import EAGER, DraftingPath

    live = Live(PAIR, 7, RunSettings(), threading.Event())
    for event in streamed(live, plain_steps(4), assisted_steps(2)):
        if isinstance(event, RunDone) and event.record.mode == "assisted":
            reason = f"self-check {check}: …: the lean loop on a DynamicCache"
            path = DraftingPath(EAGER, reason, None, check, 3)
            event = RunDone(replace(event.record, drafting_path=path))
        live.add(event)
    status = live.outputs(done=True).status
    why = live_module.FALLBACK_WHY[check]
    assert why in status and status.count("\n") == 0
    assert "lean loop on a DynamicCache" in why and "own cost" in why
