"""A run's events, stop and errors: phases and steps in order with their text, Stop within
one step, an abandoned run's worker ended, failures surfaced, bad input refused."""

from __future__ import annotations

import threading

import pytest

from assisted.core.settings import (
    MAX_NEW_TOKENS_CAP,
    MAX_SEED,
    MIN_TEMPERATURE,
    DraftSettings,
    RunSettings,
    SettingsError,
)
from assisted.engine import decoding
from assisted.engine.decoding import RunDone, StepEvent
from assisted.engine.engine import Engine, encode_prompt
from tests.engine.runs import DRAFT, GREEDY, PROMPT, records


def test_events_stream_in_order_with_text(pair):
    events = list(decoding.compare(pair, PROMPT, GREEDY, DRAFT))
    phases = [e.name for e in events if isinstance(e, decoding.Phase)]
    assert phases == ["warmup", "plain", "assisted"]
    for mode in ("plain", "assisted"):
        steps = [e for e in events if isinstance(e, StepEvent) and e.mode == mode]
        done = next(e for e in events if isinstance(e, RunDone) and e.record.mode == mode)
        assert [e.index for e in steps] == list(range(len(done.record.steps)))
        full = pair.tokenizer.decode(done.record.token_ids, skip_special_tokens=True)
        assert done.record.text == full
        # What streamed is the text so far; only a trailing incomplete character (random
        # models emit stray bytes) may be attached to the last step at the end.
        assert full.startswith("".join(e.step.text for e in steps))


def test_stop_ends_the_run_within_one_step_and_keeps_the_output(pair):
    stop = threading.Event()
    ids = encode_prompt(pair, PROMPT)
    seen = 0
    record = None
    for event in decoding.run(pair, ids, "plain", RunSettings(max_new_tokens=200), stop=stop):
        if isinstance(event, StepEvent):
            seen += 1
            if seen == 3:
                stop.set()
        else:
            record = event.record
    assert record.stopped
    assert 3 <= len(record.steps) <= 4
    assert record.text
    # the pair is still usable
    assert records(pair, modes=("plain",))["plain"].steps


def test_stop_before_assisted_skips_it(pair):
    stop = threading.Event()
    done = {}
    for event in decoding.compare(pair, PROMPT, GREEDY, DRAFT, stop=stop):
        if isinstance(event, StepEvent) and event.mode == "plain":
            stop.set()
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    assert done["plain"].stopped and "assisted" not in done


def test_abandoning_a_run_stops_its_worker(pair):
    ids = encode_prompt(pair, PROMPT)
    events = decoding.run(pair, ids, "plain", RunSettings(max_new_tokens=200))
    next(events)
    events.close()  # as when a browser tab closes mid-stream
    assert not [t for t in threading.enumerate() if t.name.startswith("generate-")]


def test_a_failure_inside_generate_surfaces(pair, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("device fell over")

    monkeypatch.setattr(pair.target, "generate", broken)
    ids = encode_prompt(pair, PROMPT)
    with pytest.raises(RuntimeError, match="device fell over"):
        list(decoding.run(pair, ids, "plain", GREEDY))


@pytest.mark.parametrize("prompt", ["", "   \n\t"])
def test_empty_prompt_is_refused(pair, prompt):
    with pytest.raises(SettingsError, match="cumulative threshold"):
        DraftSettings(cumulative_threshold=1.0).validate()
    with pytest.raises(SettingsError, match="empty"):
        list(decoding.compare(pair, prompt, GREEDY, DRAFT))


def test_prompt_longer_than_the_context_is_refused(pair):
    with pytest.raises(SettingsError, match="context"):
        list(decoding.compare(pair, "word " * 400, GREEDY, DRAFT))
    assert records(pair, modes=("plain",))["plain"].steps  # still usable


@pytest.mark.parametrize("max_new_tokens", [0, -3, MAX_NEW_TOKENS_CAP + 1])
def test_max_new_tokens_out_of_range_is_refused(pair, max_new_tokens):
    with pytest.raises(SettingsError, match="max new tokens"):
        list(decoding.compare(pair, PROMPT, RunSettings(max_new_tokens=max_new_tokens), DRAFT))


@pytest.mark.parametrize(
    "draft",
    [
        DraftSettings(num_assistant_tokens=0),
        DraftSettings(schedule="sometimes"),
        DraftSettings(confidence_threshold=1.5),
    ],
)
def test_draft_settings_out_of_range_are_refused(pair, draft):
    with pytest.raises(SettingsError):
        list(decoding.compare(pair, PROMPT, GREEDY, draft))


def test_the_coldest_temperature_accepted_samples_and_a_colder_one_is_refused(pair):
    # Found by tests/engine/test_every_setting.py: at 5e-324 the logits divided by the
    # temperature overflowed, and sampling failed on NaN probabilities.
    coldest = RunSettings(max_new_tokens=8, sample=True, temperature=MIN_TEMPERATURE)
    done = records(pair, settings=coldest)
    assert all(record.token_ids for record in done.values())
    for temperature in (1e-20, 5e-324):
        with pytest.raises(SettingsError, match="choose greedy"):
            list(decoding.compare(pair, PROMPT, coldest.with_(temperature=temperature), DRAFT))


def test_the_largest_seed_samples_and_a_larger_one_is_refused(pair):
    # Found by tests/engine/test_every_setting.py: a seed past 64 bits was accepted, and
    # torch.manual_seed failed on it once the run sampled.
    largest = RunSettings(max_new_tokens=4, sample=True, seed=MAX_SEED)
    assert all(record.token_ids for record in records(pair, settings=largest).values())
    for seed in (MAX_SEED + 1, 10**30, -1):
        with pytest.raises(SettingsError, match="seed must be between 0 and"):
            list(decoding.compare(pair, PROMPT, largest.with_(seed=seed), DRAFT))


def test_without_the_chat_template_the_whole_prompt_is_the_users_text(pair):
    """A raw prompt that happens to end as the template does (here with its last token, a
    newline after the assistant's role) is still all the user's: the suffix lookup searches
    it whole, as one segment, and drafts from its end."""
    prepared = Engine.of(pair).prepare(DRAFT)
    text = encode_prompt(pair, "def add(a, b):", chat_template=False)
    ids = [*text, *text, prepared.template_ids[-1]]
    lookup = decoding.suffix_lookup(ids, prepared, chat_template=False)
    assert lookup.user_span == (0, len(ids))
    # In the template, the same ids would share their last token with it.
    assert decoding.suffix_lookup(ids, prepared, chat_template=True).user_span[1] < len(ids)
