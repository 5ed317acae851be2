"""Measuring a benchmark: every prompt timed plain and with every variant, on one loaded pair.

Method: every variant prepared first (`assisted.engine.engine`); then, per prompt, a short
untimed warm-up of the prompt in every mode, then `--repeats` rounds of one plain run and
one assisted run per drafter. The order flips from round to
round and from prompt to prompt (plain first, then the drafters; next time the reverse), so
slow drift of the machine (heat, other load) falls on both sides alike. Every drafter is
compared with the same plain baseline.

`assisted.engine.decoding` (and with it torch) is imported inside the functions that run models, so
the app can import this package without loading torch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from assisted.analysis import stats
from assisted.analysis.sampling import CheckSettings
from assisted.bench import sampling_check
from assisted.bench.journal import Journal
from assisted.bench.planning import BenchError, Variant, with_drafter
from assisted.bench.reporting import Run, overhead_percent, report
from assisted.core.record import RunRecord
from assisted.core.settings import WARMUP_TOKENS, DrafterKind, DraftSettings, Example, RunSettings
from assisted.models.pairs import LoadedPair
from assisted.policy.learnt import LearntSnapshot

if TYPE_CHECKING:
    from assisted.engine.decoding import RunDone, StepEvent
    from assisted.engine.engine import Prepared

REPEATS = 3  # rounds per prompt; medians need at least three to shrug off one outlier

# A draft holding this many consecutive tokens of the chat template's own text (its system
# prompt: the role names alone are shorter) copied it. A heuristic: four tokens of a system
# prompt rarely occur together in an answer by chance.
TEMPLATE_RUN = 4


def template_ngrams(template_ids: Sequence[int], special_ids: Collection[int]) -> frozenset:
    """The runs of `TEMPLATE_RUN` tokens of the template's text (`template_ids`, the chat
    template around an empty message), none of them special."""
    runs = (tuple(template_ids[i : i + TEMPLATE_RUN]) for i in range(len(template_ids)))
    return frozenset(
        run for run in runs if len(run) == TEMPLATE_RUN and not any(t in special_ids for t in run)
    )


def copies_template(draft: Sequence[int], special_ids: Collection[int], ngrams: frozenset) -> bool:
    """Whether a draft copied template text: a special token (a role marker, end of turn),
    or a run of the template's text (`template_ngrams`)."""
    if any(t in special_ids for t in draft):
        return True
    return any(
        tuple(draft[i : i + TEMPLATE_RUN]) in ngrams for i in range(len(draft) - TEMPLATE_RUN + 1)
    )


@dataclass(frozen=True)
class Progress:
    """`done` of `total` timed runs; `label` names the run just finished or the warm-up
    starting, and `record` is the run just finished (None for a warm-up or an overhead
    measurement), `run` the same as the report keeps it (its variant and repeat)."""

    done: int
    total: int
    label: str
    record: RunRecord | None = None
    run: Run | None = None


@dataclass(frozen=True)
class Streamed:
    """A step of a timed run as it happens, where the benchmark streams them (`steps`):
    `drafter` names its variant (None: the plain baseline)."""

    drafter: str | None
    event: StepEvent


@dataclass(frozen=True)
class Finished:
    """The benchmark's last event: the report (`reporting.report`), the timed runs it was
    made from, in the order they ran, and the acceptance the last prompt left (where a
    benchmark split into parts, the next part starts from it)."""

    report: dict
    runs: list[Run]
    acceptance: LearntSnapshot = field(default_factory=lambda: LearntSnapshot({}))


def benchmark(
    pair: LoadedPair,
    examples: Sequence[Example],
    variants: Sequence[Variant],
    settings: RunSettings,
    repeats: int = REPEATS,
    overhead: bool = False,
    stop: threading.Event | None = None,
    acceptance: LearntSnapshot | None = None,
    check: CheckSettings | None = None,
    journal: Journal | None = None,
    steps: bool = False,
) -> Iterator[Progress | Streamed | Finished]:
    """Time every prompt plain and with every variant; yield Progress, then Finished.

    Setting `stop` ends the run in flight within one step and the benchmark with it: no
    Finished is yielded, since a report of a partial set would mislead. `acceptance` is
    where the `auto` policy starts: what the prompts before these left, for a benchmark
    split into parts (the app on ZeroGPU, one GPU call per part); None is no acceptance.
    `check`: after the timed runs, the sampling check (`assisted.bench.sampling_check`) with
    the pair's own drafter, whose result the report holds as `sampling_check`; its draws
    count in the progress. `journal`: where each timed run, and all else the report needs,
    is kept once measured (`assisted.bench.journal`); None keeps them in memory only.
    `steps`: each timed run's steps are yielded as they happen (`Streamed`), for a caller
    that shows the runs as they go (the shoot-out)."""
    from assisted.engine import decoding
    from assisted.engine.engine import encode_prompt

    settings.validate()
    if repeats < 1:
        raise BenchError(f"--repeats must be at least 1, not {repeats}")
    drafting = {v.drafter: with_drafter(pair, v.drafter) for v in variants}
    prompt_ids = [encode_prompt(pair, e.prompt, settings.chat_template) for e in examples]
    for ids in prompt_ids:
        decoding.check_length(pair, ids, settings)

    # The overhead is measured in plain decoding and with the first variant.
    overhead_runs = 2 * repeats * (1 + min(1, len(variants))) if overhead else 0
    timed_runs = len(examples) * repeats * (1 + len(variants))
    total = timed_runs + overhead_runs + (check.validate().draws() if check is not None else 0)
    info = {"pair": pair.spec.name, "device": str(pair.device), "dtype": pair.dtype_name}
    if journal is not None:
        journal.start(info, variants, settings, repeats, timed_runs)
    session = _Session(pair, variants, drafting, settings, repeats, stop, total, journal, steps)
    yield session.progress("warming up")
    session.prepare_variants()
    # A benchmark starts from no acceptance, so that its figures do not depend on what the
    # pair ran before, in this process or in an earlier one (`assisted.models.learnt_store`), nor
    # on whether this process had to warm up; a part of a split benchmark starts from what
    # the parts before it left. What its runs teach never reaches the file: the pair's own
    # acceptance is back once it ends. The costs, facts about the machine, stay, and are
    # kept as its runs refine them.
    with pair.learnt.acceptance_apart():
        # On the path the timed runs take: a sampled benchmark warms the sampled one.
        decoding.warm_up(pair, ("plain",), settings=settings)
        for variant in variants:
            drafter, prepared = drafting[variant.drafter], session.prepared[variant.name]
            decoding.warm_up(drafter, ("assisted",), variant.draft, settings, prepared)
        pair.learnt.restore(acceptance or LearntSnapshot({}))

        overheads: dict[str, float | None] = {}
        if overhead and examples:
            overheads = yield from _time_overheads(session, prompt_ids[0])
        for index, (example, ids) in enumerate(zip(examples, prompt_ids, strict=True)):
            completed = yield from _time_prompt(session, index, example, ids)
            if not completed:
                return
        left = pair.learnt.snapshot()  # where the next part of a split benchmark starts
    checked = None
    if check is not None:  # outside the block above: the check keeps its acceptance apart too
        checked = yield from _sampling_check(session, check)
        if checked is None:
            return

    plain_pct, assisted_pct = overheads.get("plain"), overheads.get("assisted")
    result = report(session.runs, variants, info, settings, repeats, plain_pct, assisted_pct)
    if checked is not None:
        result["sampling_check"] = checked
    yield Finished(result, session.runs, left)


@dataclass
class _Session:
    """One benchmark under way: what its steps share, and how far it has got."""

    pair: LoadedPair
    variants: Sequence[Variant]
    drafting: dict[DrafterKind, LoadedPair]  # per drafter kind, sharing the pair's target
    settings: RunSettings
    repeats: int
    stop: threading.Event | None
    total: int  # timed runs, overhead measurements included
    journal: Journal | None = None  # where each timed run is kept as it ends
    steps: bool = False  # whether timed runs' steps are yielded as they happen
    done: int = 0
    runs: list[Run] = field(default_factory=list)
    # Per variant, the ids it never drafts and the runs of its template's text ...
    templates: dict[str, tuple[frozenset, frozenset]] = field(default_factory=dict)
    # ... and its preparation, made once, which each of its runs is handed.
    prepared: dict[str, Prepared] = field(default_factory=dict)

    def prepare_variants(self) -> None:
        """Every variant prepared before any run (`assisted.engine.engine.Engine`:
        copies, calibration, the learnt state read), so that no timed run prepares; and what each
        never drafts and its template's text, to count the runs that copy it."""
        from assisted.engine.engine import Engine

        for variant in self.variants:
            drafting = Engine.of(self.drafting[variant.drafter])
            prepared = drafting.prepare(variant.draft, self.settings)
            self.prepared[variant.name] = prepared
            special = prepared.never_drafted
            self.templates[variant.name] = (
                special,
                template_ngrams(prepared.template_ids, special),
            )

    def progress(self, label: str) -> Progress:
        """Where the benchmark stands as the untimed step `label` starts."""
        return Progress(self.done, self.total, label)

    def template_drafts(self, variant: Variant, record: RunRecord) -> int:
        """Steps of `record` whose prompt-lookup draft copied the chat template's text or a
        special token (`copies_template`). An assistant model's drafts are its own
        text, where ending the turn is its to draft, so only copies count."""
        special, ngrams = self.templates[variant.name]
        return sum(
            step.source == DrafterKind.PROMPT_LOOKUP
            and copies_template(step.draft_ids, special, ngrams)
            for step in record.steps
        )

    def advance(
        self, label: str, record: RunRecord | None = None, run: Run | None = None
    ) -> Progress:
        """One more timed run done: `label` names it."""
        self.done += 1
        return Progress(self.done, self.total, label, record, run)

    def note(self, **facts: object) -> None:
        """What the report needs beside the runs, in the journal once measured."""
        if self.journal is not None:
            self.journal.note(**facts)

    def keep(self, run: Run) -> None:
        """A timed run for the report, and in the journal the moment it ends."""
        self.runs.append(run)
        if self.journal is not None:
            self.journal.keep(run)


def _time_overheads(
    session: _Session, ids: list[int]
) -> Generator[Progress, None, dict[str, float | None]]:
    """The backend's cost on one prompt, per mode: streamed `run()` against a bare
    `generate()`, in % per token, in plain decoding and with the first variant."""
    overheads: dict[str, float | None] = {}
    first = [(v, session.drafting[v.drafter]) for v in session.variants[:1]]
    for variant, drafter in [(None, session.pair), *first]:
        mode = "plain" if variant is None else "assisted"
        draft = variant.draft if variant else None
        bare_s, run_s = [], []
        for repeat in range(session.repeats):
            # Alternate which goes first, as for the prompts.
            for which in ("bare", "run") if repeat % 2 == 0 else ("run", "bare"):
                seconds = _time_per_token(
                    drafter, ids, session.settings, mode, draft, bare=which == "bare"
                )
                (bare_s if which == "bare" else run_s).append(seconds)
                yield session.advance(f"overhead, {mode}: {which}")
        overheads[mode] = overhead_percent(bare_s, run_s)
    session.note(
        overhead_pct=overheads.get("plain"), assisted_overhead_pct=overheads.get("assisted")
    )
    return overheads


def _sampling_check(
    session: _Session, check: CheckSettings
) -> Generator[Progress, None, dict | None]:
    """The sampling check on the benchmark's pair, its draws counted on from the timed
    runs; its result, or None if the benchmark was stopped."""
    events = sampling_check.run_check(session.pair, check, stop=session.stop)
    before = session.done
    while True:
        try:
            event = next(events)
        except StopIteration as finished:
            session.note(sampling_check=finished.value)
            return finished.value
        session.done = before + event.done
        yield Progress(session.done, session.total, event.label)


def _time_prompt(
    session: _Session, index: int, example: Example, ids: list[int]
) -> Generator[Progress | Streamed, None, bool]:
    """Warm the prompt up untimed in every mode, then time its rounds (the `index`th prompt,
    which sets the order). Returns False if the benchmark was stopped."""
    from assisted.engine import decoding

    pair, settings, stop = session.pair, session.settings, session.stop
    # The `auto` policy starts each run from the acceptance the pair's earlier runs saw.
    # Every timed run of this prompt starts from what the earlier prompts taught, never
    # from this prompt's own warm-up or repeats, as a new prompt in the app would.
    learnt = pair.learnt.snapshot()
    yield session.progress(f"{example.label}: warm-up")
    warmup = settings.with_(max_new_tokens=min(WARMUP_TOKENS, settings.max_new_tokens))
    decoding.drain(decoding.run(pair, ids, "plain", warmup, stop=stop))
    for variant in session.variants:
        drafter, prepared = session.drafting[variant.drafter], session.prepared[variant.name]
        decoding.drain(
            decoding.run(drafter, ids, "assisted", warmup, variant.draft, stop, prepared)
        )
    for repeat in range(session.repeats):
        for variant in _run_order(session.variants, index, repeat):
            if stop is not None and stop.is_set():
                return False
            if variant is None:
                events = decoding.run(pair, ids, "plain", settings, stop=stop)
            else:
                pair.learnt.restore(learnt)
                events = decoding.run(
                    session.drafting[variant.drafter],
                    ids,
                    "assisted",
                    settings,
                    variant.draft,
                    stop,
                    session.prepared[variant.name],
                )
            name = variant.name if variant else None
            if session.steps:
                record = yield from _streamed(events, name)
            else:
                record = decoding.drain(events)
            if record.stopped:
                return False
            copies = session.template_drafts(variant, record) if variant else None
            run = Run(example.question_id, example.category, name, repeat, record, copies)
            session.keep(run)
            yield session.advance(f"{example.label}: {name or 'plain'}", record, run)
    return True


def _streamed(
    events: Iterator[StepEvent | RunDone], drafter: str | None
) -> Generator[Streamed, None, RunRecord]:
    """A timed run's steps as they happen; its record."""
    from assisted.engine.decoding import RunDone

    for event in events:
        if isinstance(event, RunDone):
            return event.record
        yield Streamed(drafter, event)
    raise RuntimeError("the run ended without a record")


def _run_order(variants: Sequence[Variant], index: int, repeat: int) -> list[Variant | None]:
    """One round's runs in order: plain (None), then the variants; reversed when the prompt's
    `index` plus the `repeat` is odd, so the order flips from round to round and from prompt
    to prompt (the method in the module docstring)."""
    order: list[Variant | None] = [None, *variants]
    if (index + repeat) % 2:
        order.reverse()
    return order


def _time_per_token(
    pair: LoadedPair,
    ids: list[int],
    settings: RunSettings,
    mode: str,
    draft: DraftSettings | None,
    bare: bool,
) -> float:
    """Seconds per new token, seen from the caller: the streamed run pays for its queue,
    streamer and hooks (and, assisted, for reading and decoding each step's draft); the
    bare generate() for none of them.

    The bare call runs in a worker thread too, as `run()`'s generate() does: on a CPU,
    OpenMP behaves differently on the main thread (on a busy 2-core machine the tiny test
    models run many times slower there), which would pass for our overhead.
    """
    from assisted.engine import decoding

    if bare:
        result: list = []
        worker = threading.Thread(
            target=lambda: result.append(decoding.run_bare(pair, ids, mode, settings, draft))
        )
        worker.start()
        worker.join()
        if not result:
            raise RuntimeError("the bare generate() failed; see the traceback above")
        tokens, seconds = result[0]
        return seconds / max(1, len(tokens))
    start = time.perf_counter()
    record = decoding.drain(decoding.run(pair, ids, mode, settings, draft))
    return (time.perf_counter() - start) / max(1, stats.new_tokens(record))
