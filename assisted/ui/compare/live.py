"""A comparison as it streams: the value of every Compare output, from the events of
`assisted.engine.decoding.compare`. Values only (strings, data frames, dicts) in a
`CompareOutputs`, so they pickle across ZeroGPU's process boundary."""

import bisect
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from assisted.analysis import stats
from assisted.core.record import (
    CHARTS,
    CUDA_GRAPHS,
    FAILED,
    INCONCLUSIVE,
    LAST_BIT,
    RunRecord,
    Step,
    attempted,
)
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import decoding, engine
from assisted.engine.decoding import RunDone, StepEvent
from assisted.models import pairs
from assisted.ui.compare.chunks import (
    Chunk,
    chunk_of,
    chunks_of,
    draft_length_frame,
    histogram_frame,
    position_frame,
    step_time_frame,
    timeline_frame,
)
from assisted.ui.compare.format import (
    UNCHANGED,
    CompareOutputs,
    chunk_html,
    run_html,
    run_html_of,
    stat_card_html,
    summary_markdown,
)

MODES = ("plain", "assisted")
WAITING = {
    "plain": "Plain decoding runs first…",
    "assisted": "Assisted generation runs after plain decoding…",
}
SUMMARY_LATER = "The comparison appears here once both runs have finished."
# The outputs that sum up the whole run so far (the stat cards, the charts, the JSON
# result) take time in proportion to its length, where its text takes only its new steps.
# So while the runs stream, they are rebuilt once the stream has gone on 1 / WHOLE_SHARE
# times as long as their last build took: a fiftieth of its time at most for the build,
# about as much again for Gradio's part, however long the run (on a short one, every
# update). The stream shares the CPU, and Python's lock, with the decoding it shows.
WHOLE_SHARE = 0.02
# The outputs that a mid-run update leaves as they are between builds (`UNCHANGED`: the
# page skips them). The cards keep their last value instead: Gradio finds an unchanged
# string unchanged at no cost, and rebuilds the component of a skipped output.
HELD = (
    "tokens_over_time",
    "accept_histogram",
    "acceptance_by_position",
    "time_per_step",
    "draft_length_per_step",
    "result",
)

# Why the assistant's drafts are graphed and the target's passes are not (docs/space.md).
GRAPHED_WHY = (
    "The assistant's drafts replay CUDA graphs, since a small model's eager passes on a GPU "
    "cost mostly kernel launches; the target stays Transformers' eager model, as a "
    "Transformers user runs it"
)
# Why a run whose graphs' self-check failed or could not judge drafts as it does, one line.
FALLBACK_WHY = {
    FAILED: "The CUDA graphs' self-check failed, so the assistant drafts with the lean loop "
    "on a DynamicCache, the path the check trusts, priced at that loop's own cost",
    INCONCLUSIVE: "The CUDA graphs' self-check could judge too few positions to vouch for "
    "them, so the assistant drafts with the lean loop on a DynamicCache, the path the check "
    "trusts, priced at that loop's own cost",
}


class Live:
    """The steps and records of one comparison as it streams, rendered to every output.

    Each step is rendered once, as it arrives: an update's text joins what is rendered
    (`compare.format.run_html_of`); the whole-run outputs are rebuilt at most a share of
    the stream's time (`WHOLE_SHARE`), and at each run's start and end. `clock` gives
    seconds (a test's own)."""

    def __init__(
        self,
        pair: pairs.LoadedPair,
        prompt_tokens: int,
        settings: RunSettings,
        stop: threading.Event,
        clock: Callable[[], float] = time.perf_counter,
        draft: DraftSettings | None = None,
    ):
        self.pair = pair
        self.prompt_tokens = prompt_tokens
        self.settings = settings
        self.draft = draft  # how the assisted run drafts; None: not known here
        self.stop = stop
        # Whether this call prepared the pair (its warm-up ran here): only then did it pay
        # for a capture of the assistant's drafts, which the last status line then names.
        self.set_up = False
        self.steps: dict[str, list[Step]] = {mode: [] for mode in MODES}
        # The text of each drafted token, a list per step: decoded once, as the step arrives.
        self.draft_texts: dict[str, list[list[str]]] = {mode: [] for mode in MODES}
        self.records: dict[str, RunRecord] = {}
        self.phase = "warmup"
        # Each step's chunk and its HTML, made as it arrives (again from the record, at its end).
        self.chunks: dict[str, list[Chunk]] = {mode: [] for mode in MODES}
        self.parts: dict[str, list[str]] = {mode: [] for mode in MODES}
        self._clock = clock
        self._whole: CompareOutputs | None = None  # the last build of every output
        self._whole_at = self._whole_s = 0.0  # when it ended and what it took
        self._whole_due = True  # a run started or ended since

    def add(self, event: decoding.Event) -> None:
        if isinstance(event, decoding.Phase):
            self.phase = event.name
            self._whole_due = True
        elif isinstance(event, StepEvent):
            mode, step = event.mode, event.step
            steps = self.steps[mode]
            seconds = step.t_s - (steps[-1].t_s if steps else 0.0)
            steps.append(step)
            # Only sampled steps show their drafted tokens one by one (with p and q): the
            # run's `chunks.shows_draws`, known before its record is.
            draws = self.settings.sample and mode == "assisted"
            ids = step.draft_ids if draws else ()
            texts = [self.pair.tokenizer.decode([t]) for t in ids]
            self.draft_texts[mode].append(texts)
            chunk = chunk_of(step, seconds, draws, texts)
            self.chunks[mode].append(chunk)
            self.parts[mode].append(chunk_html(mode, len(steps), chunk))
        elif isinstance(event, RunDone):
            # Its last step may carry text held back for a character split across steps.
            mode = event.record.mode
            self.records[mode] = event.record
            self.chunks[mode] = chunks_of(event.record, self.draft_texts[mode])
            self.parts[mode] = [
                chunk_html(mode, number, chunk)
                for number, chunk in enumerate(self.chunks[mode], start=1)
            ]
            self._whole_due = True

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
        """Every Compare output's value; the race replay's state with the last (`done`).
        Before it, the outputs named in `HELD` are `UNCHANGED` between builds of the whole."""
        if done:
            return self._every_output(done=True)
        started = self._clock()
        due = started - self._whole_at >= self._whole_s / WHOLE_SHARE
        if self._whole is None or self._whole_due or due:
            self._whole = self._every_output(done=False)
            self._whole_at = self._clock()
            self._whole_s, self._whole_due = self._whole_at - started, False
            return self._whole
        return self._whole._replace(
            status=self._status(done=False),
            plain_text=self._text("plain", self.chunks["plain"], done=False),
            assisted_text=self._text("assisted", self.chunks["assisted"], done=False),
            **dict.fromkeys(HELD, UNCHANGED),
        )

    def _every_output(self, done: bool) -> CompareOutputs:
        runs = {mode: self.record(mode) for mode in MODES}
        shown = dict(self.chunks)
        assisted = runs["assisted"]
        # `per_step` grows with the run, so only the last update carries it.
        result = decoding.report(self.pair, runs["plain"], assisted, steps=done)
        # Two sampled runs part as two draws do: no token of theirs is marked as a fault.
        if done and result["divergence"] is not None and not self.settings.sample:
            index = result["divergence"]["index"]
            shown = {mode: self._mark(runs[mode], shown[mode], index) for mode in MODES}
        charts = self._charts(runs, shown, result)
        return CompareOutputs(
            status=self._status(done),
            plain_text=self._text("plain", shown["plain"], done),
            assisted_text=self._text("assisted", shown["assisted"], done),
            plain_stats=self._card("plain", result, done),
            assisted_stats=self._card("assisted", result, done),
            summary=self._summary(result, done),
            **charts,
            result=result,
            race=self._race(shown) if done else None,
        )

    def _charts(
        self, runs: dict[str, RunRecord | None], shown: dict[str, list[Chunk]], result: dict
    ) -> dict:
        """Each chart's frame; a chart that fails is drawn empty, and the result's
        `analysis_errors` says so (`assisted.core.record`)."""
        assisted = runs["assisted"]
        builds = {
            "tokens_over_time": (
                lambda: timeline_frame(shown),
                lambda: timeline_frame({mode: [] for mode in MODES}),
            ),
            "accept_histogram": (
                lambda: histogram_frame(stats.accept_histogram(assisted) if assisted else []),
                lambda: histogram_frame([]),
            ),
            "acceptance_by_position": (
                lambda: position_frame(stats.position_acceptance(assisted) if assisted else []),
                lambda: position_frame([]),
            ),
            "time_per_step": (
                lambda: step_time_frame(runs),
                lambda: step_time_frame(dict.fromkeys(MODES)),
            ),
            "draft_length_per_step": (
                lambda: draft_length_frame(shown["assisted"], result.get("oracle")),
                lambda: draft_length_frame([]),
            ),
        }
        charts = {}
        for name, (build, empty) in builds.items():
            with attempted(CHARTS, result["analysis_errors"]) as drawing:
                charts[name] = build()
            if drawing.failure is not None:
                charts[name] = empty()
        return charts

    def _status(self, done: bool) -> str:
        where = f"{self.pair.device} · {self.pair.dtype_name}"
        if done and self.stopped and not self.records:
            return "**Stopped** before the timed runs started."
        if done and self.stopped:
            return f"**Stopped** during the {self.phase} run; what was produced is kept ({where})."
        if done:
            status = (
                f"**Done** on {where}. Plain ran first, then assisted, one after the other, "
                "so each was timed alone. **Replay race** shows both at their recorded pace."
            )
            assisted = self.records.get("assisted")
            drafting = stats.describe_drafting(stats.summarize(assisted)) if assisted else None
            path = assisted.drafting_path if assisted else None
            if drafting and path.path == CUDA_GRAPHS:
                drafting += f". {GRAPHED_WHY}"
                if path.check == LAST_BIT:
                    drafting += (
                        ". Their self-check found replays within the last bits of eager "
                        f"passes (largest probability gap {path.gap:.2g}, {path.gap_at}), "
                        "as another kernel rounds: kept"
                    )
                captured = assisted.drafting_path.capture_s
                if self.set_up and captured is not None:  # a reused worker paid none
                    drafting += f". This call captured them first, in {captured:.2f} s"
            elif drafting and path.check in FALLBACK_WHY:
                drafting += f". {FALLBACK_WHY[path.check]}"
            return f"{status} Drafting: {drafting}." if drafting else status
        if self.phase == "warmup" and self._captures():
            return (
                "**Warming up, and capturing the assistant's drafts as CUDA graphs** (once "
                "per worker, checked against its eager passes)… Then plain decoding runs "
                "first and assisted second, one after the other, so each is timed alone."
            )
        return {
            "warmup": "**Warming up** (one short untimed run per mode, once per pair)… "
            "Then plain decoding runs first and assisted second, one after the other on one "
            "device, so each is timed alone.",
            "plain": "**Running plain decoding** (1 of 2). Assisted generation runs next, "
            "on its own, so the timings stay honest.",
            "assisted": "**Running assisted generation** (2 of 2). Plain decoding has finished.",
        }.get(self.phase, "")

    def _captures(self) -> bool:
        """Whether this comparison's warm-up may capture the assistant's drafts as graphs
        (`assisted.engine.engine.captures_graphs`)."""
        draft = self.draft
        return draft is not None and engine.captures_graphs(self.pair, draft, self.settings)

    def _text(self, mode: str, shown: list[Chunk], done: bool) -> str:
        """The run's text: its rendered steps, unless a divergence marks one (`shown` then
        differs from the run's chunks, and is rendered anew)."""
        record = self.records.get(mode)
        waiting = WAITING[mode]
        if done and not shown:
            waiting = "Not run: the comparison was stopped." if self.stopped else "No tokens."
        parts = self.parts[mode]
        if shown is not self.chunks[mode]:
            parts = [chunk_html(mode, n, chunk) for n, chunk in enumerate(shown, start=1)]
        return run_html_of(
            parts,
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
