"""A comparison as it streams: the value of every Compare output, from the events of
`assisted.engine.decoding.compare`. Values only (strings, data frames, dicts) in a `CompareOutputs`,
so they pickle across ZeroGPU's process boundary."""

import bisect
import itertools
import threading
from dataclasses import replace

from assisted.analysis import stats
from assisted.core.record import RunRecord, Step
from assisted.core.settings import RunSettings
from assisted.engine import decoding
from assisted.models import pairs
from assisted.ui.chunks import Chunk, chunks_of
from assisted.ui.compare_charts import (
    draft_length_frame,
    histogram_frame,
    position_frame,
    step_time_frame,
    timeline_frame,
)
from assisted.ui.compare_format import (
    run_html,
    stat_card_html,
    summary_markdown,
)
from assisted.ui.outputs import CompareOutputs

MODES = ("plain", "assisted")
WAITING = {
    "plain": "Plain decoding runs first…",
    "assisted": "Assisted generation runs after plain decoding…",
}
SUMMARY_LATER = "The comparison appears here once both runs have finished."


class Live:
    """The steps and records of one comparison as it streams, rendered to every output."""

    def __init__(
        self,
        pair: pairs.LoadedPair,
        prompt_tokens: int,
        settings: RunSettings,
        stop: threading.Event,
    ):
        self.pair = pair
        self.prompt_tokens = prompt_tokens
        self.settings = settings
        self.stop = stop
        self.steps: dict[str, list[Step]] = {mode: [] for mode in MODES}
        # The text of each drafted token, a list per step: decoded once, as the step arrives.
        self.draft_texts: dict[str, list[list[str]]] = {mode: [] for mode in MODES}
        self.records: dict[str, RunRecord] = {}
        self.phase = "warmup"

    def add(self, event: decoding.Event) -> None:
        if isinstance(event, decoding.Phase):
            self.phase = event.name
        elif isinstance(event, decoding.StepEvent):
            self.steps[event.mode].append(event.step)
            # Only sampled steps show their drafted tokens one by one (with p and q).
            ids = event.step.draft_ids if self.settings.sample else ()
            self.draft_texts[event.mode].append([self.pair.tokenizer.decode([t]) for t in ids])
        elif isinstance(event, decoding.RunDone):
            # Its last step may carry text held back for a character split across steps.
            self.records[event.record.mode] = event.record

    def record(self, mode: str) -> RunRecord | None:
        """The finished record, or a snapshot of the run so far (timed to its last step)."""
        if mode in self.records:
            return self.records[mode]
        steps = self.steps[mode]
        if not steps:
            return None
        drafter = self.pair.spec.drafter if mode == "assisted" else None
        return RunRecord(
            mode,
            drafter,
            self.prompt_tokens,
            list(steps),
            total_s=steps[-1].t_s,
            sampled=self.settings.sample,
        )

    @property
    def stopped(self) -> bool:
        """Whether Stop cut the comparison short (the run it ended is marked in its record)."""
        cut = self.stop.is_set() and len(self.records) < len(MODES)
        return cut or any(record.stopped for record in self.records.values())

    def outputs(self, done: bool = False) -> CompareOutputs:
        """Every Compare output's value; the race replay's state with the last (`done`)."""
        runs = {mode: self.record(mode) for mode in MODES}
        shown = {mode: chunks_of(runs[mode], self.draft_texts[mode]) for mode in MODES}
        assisted = runs["assisted"]
        result = decoding.report(self.pair, runs["plain"], assisted)
        # Two sampled runs part as two draws do: no token of theirs is marked as a fault.
        if done and result["divergence"] is not None and not self.settings.sample:
            index = result["divergence"]["index"]
            shown = {mode: self._mark(runs[mode], shown[mode], index) for mode in MODES}
        if not done:
            # Each update carries the whole result; `per_step` grows with the run, so only
            # the last update carries it.
            for summary in (result["plain"], result["assisted"]):
                if summary is not None:
                    del summary["per_step"]
        histogram = stats.accept_histogram(assisted) if assisted else []
        positions = stats.position_acceptance(assisted) if assisted else []
        return CompareOutputs(
            status=self._status(done),
            plain_text=self._text("plain", shown["plain"], done),
            assisted_text=self._text("assisted", shown["assisted"], done),
            plain_stats=self._card("plain", result, done),
            assisted_stats=self._card("assisted", result, done),
            summary=self._summary(result, done),
            tokens_over_time=timeline_frame(shown),
            accept_histogram=histogram_frame(histogram),
            acceptance_by_position=position_frame(positions),
            time_per_step=step_time_frame(runs),
            draft_length_per_step=draft_length_frame(shown["assisted"], result.get("oracle")),
            result=result,
            race=self._race(shown) if done else None,
        )

    def _status(self, done: bool) -> str:
        where = f"{self.pair.device} · {self.pair.dtype_name}"
        if done and self.stopped and not self.records:
            return "**Stopped** before the timed runs started."
        if done and self.stopped:
            return f"**Stopped** during the {self.phase} run; what was produced is kept ({where})."
        if done:
            return (
                f"**Done** on {where}. Plain ran first, then assisted, one after the other, "
                "so each was timed alone. **Replay race** shows both at their recorded pace."
            )
        return {
            "warmup": "**Warming up** (one short untimed run per mode, once per pair)… "
            "Then plain decoding runs first and assisted second, one after the other on one "
            "device, so each is timed alone.",
            "plain": "**Running plain decoding** (1 of 2). Assisted generation runs next, "
            "on its own, so the timings stay honest.",
            "assisted": "**Running assisted generation** (2 of 2). Plain decoding has finished.",
        }.get(self.phase, "")

    def _text(self, mode: str, shown: list[Chunk], done: bool) -> str:
        record = self.records.get(mode)
        waiting = WAITING[mode]
        if done and not shown:
            waiting = "Not run: the comparison was stopped." if self.stopped else "No tokens."
        return run_html(
            shown,
            mode,
            running=self.phase == mode and record is None and not done,
            stopped=bool(record and record.stopped),
            placeholder=waiting,
        )

    def _card(self, mode: str, result: dict, done: bool) -> str:
        summary = result[mode]
        record = self.records.get(mode)
        if record is not None:
            return stat_card_html(summary, state="stopped" if record.stopped else "done")
        if summary is not None or (self.phase == mode and not done):
            return stat_card_html(summary, state="running", empty="waiting for the first step…")
        return stat_card_html(None, empty="not run" if done else "runs after plain decoding")

    def _summary(self, result: dict, done: bool) -> str:
        if done:
            return summary_markdown(result)
        return SUMMARY_LATER

    def _mark(self, record: RunRecord | None, chunks: list[Chunk], index: int) -> list[Chunk]:
        """`chunks` with the token at `index` (of the new tokens) marked in the step that
        committed it, as characters of that step's text."""
        ids = record.token_ids if record else []
        if index >= len(ids):
            return chunks
        ends = list(itertools.accumulate(len(step.token_ids) for step in record.steps))
        number = bisect.bisect_right(ends, index)  # the step that committed token `index`
        first = ends[number - 1] if number else 0  # the new tokens before that step

        def chars(count: int) -> int:
            return len(self.pair.tokenizer.decode(ids[:count], skip_special_tokens=True))

        start, end = chars(index) - chars(first), chars(index + 1) - chars(first)
        marked = replace(chunks[number], diverged=(start, end))
        return [*chunks[:number], marked, *chunks[number + 1 :]]

    def _race(self, shown: dict[str, list[Chunk]]) -> dict:
        return {
            mode: {
                "chunks": [chunk.to_dict() for chunk in shown[mode]],
                "stopped": bool(self.records.get(mode) and self.records[mode].stopped),
            }
            for mode in MODES
        }


def idle_outputs(status: str) -> CompareOutputs:
    """Every output's value before the runs start (files fetched, or waiting for the device)."""
    return CompareOutputs(
        status=status,
        plain_text=run_html([], "plain", placeholder=WAITING["plain"]),
        assisted_text=run_html([], "assisted", placeholder=WAITING["assisted"]),
        plain_stats=stat_card_html(None, empty="runs once the device is free"),
        assisted_stats=stat_card_html(None, empty="runs after plain decoding"),
        summary=SUMMARY_LATER,
        tokens_over_time=timeline_frame({mode: [] for mode in MODES}),
        accept_histogram=histogram_frame([]),
        acceptance_by_position=position_frame([]),
        time_per_step=step_time_frame(dict.fromkeys(MODES)),
        draft_length_per_step=draft_length_frame([]),
        result=None,
        race=None,
    )
