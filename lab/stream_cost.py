"""`python -m lab.stream_cost`: what one streaming update of the Compare tab costs
the server, early in a run and late in a long one.

A comparison's events are replayed into `assisted.ui.compare.live.Live` from made-up steps (no
model runs: a plain step commits one token, an assisted one three of four drafted), one
update per step, 80 ms apart on Live's clock as the app yields them
(`assisted.ui.compare.gpu.YIELD_EVERY_S`).
Each update is timed twice: Live's own build, and that with what Gradio then does with
the values for the page (each component's `postprocess`, the component it rebuilds for a
skipped output, and the diff against the last update, which it sends: its bytes as JSON
are the third figure). Each figure is the mean over a window of updates ending at the
token named, the median of the repeats.

Its figures are in docs/app.md#the-compare-endpoint."""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import threading
import time
from collections.abc import Sequence
from types import SimpleNamespace

import gradio as gr
from gradio import utils as gradio_utils

from assisted.core.record import RunRecord, Step
from assisted.core.settings import DrafterKind, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone, StepEvent
from assisted.models.registry import PAIRS
from assisted.ui.compare import tab as compare_tab
from assisted.ui.compare.format import UNCHANGED, CompareOutputs
from assisted.ui.compare.gpu import YIELD_EVERY_S
from assisted.ui.compare.live import Live

PROMPT_TOKENS = 40


def made_up_steps(mode: str, tokens: int) -> list[Step]:
    """Steps that commit `tokens` tokens: one a step in plain decoding; three a step
    assisted, of four drafted (two accepted, then the target's own)."""
    steps, first, t_s = [], 0, 0.0
    while first < tokens:
        t_s += 0.05
        if mode == "plain":
            steps.append(Step((first,), f"w{first} ", 0, 0, t_s))
            first += 1
            continue
        ids = (first, first + 1, first + 2)
        text = "".join(f"w{t} " for t in ids)
        accepted = text[: text.index(" w", 3) + 1]  # the first two tokens' text
        draft = (first, first + 1, 99, 98)
        timing = {"draft_s": 0.01, "chosen": 4, "source": DrafterKind.ASSISTANT}
        steps.append(Step(ids, text, 4, 2, t_s, draft, accepted, "x y", **timing))
        first += 3
    return steps


class Clock:
    """perf_counter, moved on by the time between updates that the replay skips."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset


class GradioSide:
    """What Gradio does with each update's values before it sends them to the page
    (`Blocks.postprocess_data`, `Blocks.handle_streaming_diffs`), on the Compare tab's
    components; a call returns the bytes of the diff it sends, as JSON."""

    def __init__(self) -> None:
        with gr.Blocks():
            self.components = compare_tab.output_components()
        self.last: list | None = None

    def __call__(self, outputs: CompareOutputs) -> int:
        data = []
        for name, component in self.components.items():
            value = getattr(outputs, name)
            if value is UNCHANGED:  # gr.skip(): Gradio rebuilds the component
                args = {**component.constructor_args, "render": False}
                args.pop("value", None)
                component.__class__(**args)
                data.append({"__type__": "update"})  # what Gradio keeps as its last value
                continue
            value = component.postprocess(value)
            data.append(value.model_dump() if hasattr(value, "model_dump") else value)
        sent = data
        if self.last is not None:
            sent = [
                gradio_utils.diff(before, now) for before, now in zip(self.last, data, strict=True)
            ]
        self.last = data
        return len(json.dumps(sent, default=str))


def window_cost(plain_tokens: int, assisted_tokens: int, window: int) -> tuple[float, float, float]:
    """The mean seconds of Live's build, and of the whole update with Gradio's part, and
    the mean bytes sent, over the `window` updates that end with plain at `plain_tokens`
    (assisted not started) or, with `assisted_tokens`, assisted there after plain ran
    `plain_tokens`."""
    pair = SimpleNamespace(
        spec=PAIRS["embedded"],
        device="cpu",
        dtype_name="bfloat16",
        tokenizer=SimpleNamespace(decode=lambda ids, **kwargs: "".join(f"t{t}" for t in ids)),
    )
    clock = Clock()
    live = Live(pair, PROMPT_TOKENS, RunSettings(max_new_tokens=1024), threading.Event(), clock)
    plain = made_up_steps("plain", plain_tokens)
    events: list[decoding.Event] = [decoding.Phase("plain")]
    events += [StepEvent("plain", 0, step) for step in plain]
    if assisted_tokens:
        record = RunRecord("plain", None, PROMPT_TOKENS, plain, total_s=plain[-1].t_s)
        events += [RunDone(record), decoding.Phase("assisted")]
        steps = made_up_steps("assisted", assisted_tokens)
        events += [StepEvent("assisted", 0, step) for step in steps]
    window = min(window, len(steps if assisted_tokens else plain))  # the last run's steps
    head, timed = events[:-window], events[-window:]
    gradio_side = GradioSide()
    for event in head:
        live.add(event)
    gradio_side(live.outputs())
    gc.collect()
    own, whole, sent = [], [], []
    for event in timed:
        clock.offset += YIELD_EVERY_S
        live.add(event)
        started = time.perf_counter()
        outputs = live.outputs()
        built = time.perf_counter()
        sent.append(gradio_side(outputs))
        own.append(built - started)
        whole.append(time.perf_counter() - started)
    return statistics.mean(own), statistics.mean(whole), statistics.mean(sent)


# (what, plain tokens, assisted tokens: 0 while plain runs)
POINTS = (
    ("plain, token 32", 32, 0),
    ("plain, token 1,024", 1024, 0),
    ("assisted, token 32 (plain ran 32)", 32, 32),
    ("assisted, token 1,024 (plain ran 1,024)", 1024, 1024),
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=int, default=30, help="updates a figure averages")
    args = parser.parse_args(argv)
    print("| update | Live's build (ms) | with Gradio's part (ms) | sent (kB) |")
    print("|---|--:|--:|--:|")
    for label, plain_tokens, assisted_tokens in POINTS:
        runs = [
            window_cost(plain_tokens, assisted_tokens, args.window) for _ in range(args.repeats)
        ]
        own = statistics.median(run[0] for run in runs) * 1000
        whole = statistics.median(run[1] for run in runs) * 1000
        sent = statistics.median(run[2] for run in runs) / 1000
        print(f"| {label} | {own:.2f} | {whole:.2f} | {sent:.1f} |", flush=True)


if __name__ == "__main__":
    main()
