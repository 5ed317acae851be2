"""What the engine's run tests share: a tiny pair loaded, a comparison's records, and the
settings most of them run with."""

from __future__ import annotations

import dataclasses

from assisted.core.record import RunRecord
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import Engine
from assisted.models.pairs import LoadedPair, custom_pair, load_pair
from assisted.policy.learnt import LearntState

PROMPT = "def add(a, b):"
GREEDY = RunSettings(max_new_tokens=24)
DRAFT = DraftSettings(num_assistant_tokens=4, confidence_threshold=0.0)
AUTO = DraftSettings(num_assistant_tokens=4, schedule="auto", confidence_threshold=0.0)


def load(dirs, assistant="other", drafter=None) -> LoadedPair:
    """The tiny target of `dirs` with `assistant` ("other": a different random model; None:
    no model of its own) drafting as `drafter`, on the CPU in fp32."""
    assistant_dir = str(dirs[assistant]) if assistant else None
    spec = custom_pair(str(dirs["target"]), assistant_dir, drafter)
    return load_pair(spec, device="cpu", dtype="float32")


def priced(
    pair, prefill_s: float, draft_s: float | None = None, draft=AUTO, verify_s: float | None = None
) -> None:
    """Prepare `pair` for `draft` (its calibration timed), then price the assistant's reads,
    its drafted tokens where given, and every verification at `verify_s` where given (the
    rows its earlier runs measured on a tiny model, noisy, can make drafting never pay)."""
    prepared = Engine.of(pair).prepare(draft)
    drafting = pair.learnt.precision(prepared.precision)
    drafting.prefill_s = prefill_s
    drafting.draft_s = draft_s or drafting.draft_s
    if verify_s is not None:
        rows = range(1, draft.length_for(pair.spec.drafter) + 2)
        pair.learnt.verify_s.update(dict.fromkeys(rows, verify_s))


def records(pair, prompt=PROMPT, settings=GREEDY, draft=DRAFT, **kwargs) -> dict[str, RunRecord]:
    """A comparison's records, by mode."""
    done = {}
    for event in decoding.compare(pair, prompt, settings, draft, **kwargs):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    return done


def events_record(events) -> RunRecord:
    return next(e.record for e in events if isinstance(e, RunDone))


def fresh_copy(pair):
    """`pair`'s models with nothing learnt or prepared, keeping nothing on disk."""
    return dataclasses.replace(pair, learnt=LearntState(), learnt_file=None)
