"""A comparison: one prompt run in each mode, one after the other on one device, after a
warm-up, and its report.

The warm-up runs each path once per loaded pair (`warm_up`), so no timed run pays a
first call's costs; what it ran is kept in the engine's cache of the pair
(`assisted.engine.prepare.PairCache`). Each run goes through `assisted.engine.running`:
prepared and planned before its clock, what it learnt kept after.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from assisted.analysis import stats
from assisted.core.record import Mode, RunRecord
from assisted.core.settings import WARMUP_PROMPT, WARMUP_TOKENS, DraftSettings, RunSettings
from assisted.engine import running
from assisted.engine.events import RunDone, StepEvent
from assisted.engine.prepare import Prepared, cache_of, prepare
from assisted.engine.prompt import encode_prompt
from assisted.models.loading import release_memory
from assisted.models.pairs import LoadedPair


@dataclass(frozen=True)
class Phase:
    """The comparison moved on: "warmup", "plain" or "assisted"."""

    name: str


# What a comparison yields: its phases, and each run's steps and end.
Event = StepEvent | RunDone | Phase


@dataclass(frozen=True)
class Warmed:
    """A path the warm-up ran once on a pair (`warm_up`), kept in the engine's cache of the
    pair (`assisted.engine.prepare.PairCache`): each assistant precision is a model of its
    own, with its own first-call costs, and so is sampling."""

    mode: Mode
    precision: str | None  # the assistant's precision key; None for plain runs
    sampled: bool


def compare(
    pair: LoadedPair,
    prompt: str | Sequence[int],
    settings: RunSettings,
    draft: DraftSettings | None = None,
    modes: tuple[Mode, ...] = ("plain", "assisted"),
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """Check, prepare and warm up, then run `modes` one after the other on one device,
    streaming every event. `prompt` is text, encoded here (`assisted.engine.prompt`, in the
    chat template where `settings` ask for it), or the ids its caller encoded."""
    prompt_ids = (
        encode_prompt(pair, prompt, settings.chat_template)
        if isinstance(prompt, str)
        else list(prompt)
    )
    draft = running.check(pair, prompt_ids, settings, draft)  # refused before any warm-up
    stop = stop or threading.Event()
    yield Phase("warmup")
    warm_up(pair, modes, draft, settings)
    for mode in modes:
        if stop.is_set():
            break
        yield Phase(mode)
        yield from running.run(pair, prompt_ids, mode, settings, draft, stop)


def warm_up(
    pair: LoadedPair,
    modes: tuple[Mode, ...],
    draft: DraftSettings | None = None,
    settings: RunSettings | None = None,
    prepared: Prepared | None = None,
) -> None:
    """Prepare the pair to draft with `draft` (`assisted.engine.prepare`) where `modes`
    draft (unless the caller hands its `prepared`), then run each mode briefly once per
    loaded pair and path (greedy, or sampled where `settings` sample: warping, sampling and
    the assistant's generator in place of the lean loop have first-call costs of their
    own), so no timed run pays first-call costs; then hand back to the system what the
    first runs, a quantized copy and the calibration freed."""
    sampled = settings is not None and settings.sample
    if "assisted" in modes and prepared is None:
        prepared = prepare(pair, draft, settings)
    ids = encode_prompt(pair, WARMUP_PROMPT)
    warm = RunSettings(max_new_tokens=WARMUP_TOKENS)
    if sampled:  # the run's own temperature and top-p
        warm = settings.with_(max_new_tokens=WARMUP_TOKENS, chat_template=True)
    warmed = cache_of(pair).warmed
    ran = False
    for mode in modes:
        # Each assistant precision is its own model, with its own first-call costs.
        precision = prepared.precision if mode == "assisted" else None
        path = Warmed(mode, precision, sampled)
        if path not in warmed:
            for _ in running.run(pair, ids, mode, warm, draft, prepared=prepared):
                pass
            warmed.add(path)
            ran = True
    if ran:
        release_memory()


def warmed_paths(pair: LoadedPair) -> int:
    """How many paths the warm-up has run on `pair` in this process or the one it was
    forked from: more after a call than before means that call warmed up."""
    return len(cache_of(pair).warmed)


def report(
    pair: LoadedPair,
    plain: RunRecord | None,
    assisted: RunRecord | None,
    steps: bool = True,
    pooled: Sequence[RunRecord] = (),
) -> dict:
    """`stats.report` of a comparison on `pair` (`per_step` only with `steps`, the oracle's
    T(k) priced from `pooled`'s steps too), with the text of the tokens where the runs
    diverged (`divergence`'s `plain_text` and `assisted_text`)."""
    device, dtype = str(pair.device), pair.dtype_name
    result = stats.report(pair.spec.name, device, dtype, plain, assisted, steps, pooled)
    found = result["divergence"]
    if found is not None:
        for run in ("plain", "assisted"):
            token = found[f"{run}_token"]
            found[f"{run}_text"] = None if token is None else pair.tokenizer.decode([token])
    return result
