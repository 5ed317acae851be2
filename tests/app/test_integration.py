"""Integration tests on the real embedded pair (Qwen2.5-Coder 1.5B ← 0.5B), loaded once.

The first run on a fresh machine converts both GGUF files (a few minutes); later runs load
the cached safetensors in seconds. Deselect with `-m "not integration"`.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys

import pytest

from assisted.analysis import stats
from assisted.core.settings import EXAMPLES_DIR, DraftSettings, RunSettings
from assisted.engine.decoding import RunDone, compare, report
from assisted.engine.engine import Engine
from assisted.models import embedded
from assisted.models.pairs import get_spec, load_pair

pytestmark = pytest.mark.integration

PROMPT = "Rewrite with a list comprehension: squares = []\nfor x in xs:\n    squares.append(x * x)"
SETTINGS = RunSettings(max_new_tokens=16)


@pytest.fixture(scope="module")
def pair():
    return load_pair(get_spec("embedded"), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def records(pair):
    done = {}
    for event in compare(pair, PROMPT, SETTINGS, DraftSettings(num_assistant_tokens=5)):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    return done


def test_greedy_assisted_output_equals_plain_in_fp32(records):
    plain, assisted = records["plain"], records["assisted"]
    assert plain.token_ids and assisted.token_ids == plain.token_ids
    assert "[x * x for x in xs]" in plain.text.replace("x*x", "x * x")


def test_an_int8_assistant_keeps_the_output(pair, records):
    done = {}
    quantized = DraftSettings(num_assistant_tokens=5, assistant_quant="int8")
    for event in compare(pair, PROMPT, SETTINGS, quantized, modes=("assisted",)):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    assisted = done["assisted"]
    assert assisted.assistant_precision == "int8"
    assert assisted.token_ids == records["plain"].token_ids
    # int8 rounding costs the 0.5B coder a few agreements, not most of them.
    assert stats.acceptance_rate(assisted) > 0.5


def test_the_default_auto_schedule_keeps_the_output_in_fp32(pair, records):
    # Priced so that drafting pays, as on a bf16 CPU (verifying nine rows costs about one):
    # on an AVX2 CPU in fp32 the calibration's steep T(k) can keep `auto` plain for a whole
    # run, and this test is about what its drafts commit, not whether they pay here.
    prepared = Engine.of(pair).prepare(pair.spec.draft)
    one_row = pair.learnt.verify_s[1]
    pair.learnt.verify_s.update(dict.fromkeys(range(1, 10), one_row))
    drafting = pair.learnt.precision(prepared.precision)
    drafting.draft_s, drafting.prefill_s = 0.05 * one_row, 0.0
    done = {}
    for event in compare(pair, PROMPT, SETTINGS, modes=("assisted",)):  # the pair's draft
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    assisted = done["assisted"]
    assert pair.spec.draft.schedule == "auto"
    assert assisted.token_ids == records["plain"].token_ids
    assert all(s.chosen is not None and s.drafted <= s.chosen <= 8 for s in assisted.steps)
    assert {s.source for s in assisted.steps if s.drafted} <= {"assistant", "prompt-lookup"}
    assert len(assisted.steps) < len(records["plain"].steps)


def test_a_heuristic_comparison_prices_every_draft_it_grew(pair):
    """Transformers' heuristic schedule grows a fully accepted draft past the cap; the
    comparison ends whole, its oracle priced at every length drafted."""
    # `auto`: the pair's costs, which the oracle prices with
    Engine.of(pair).prepare(pair.spec.draft)
    prompt = (EXAMPLES_DIR / "edit-code" / "add-docstrings.txt").read_text()
    heuristic = dataclasses.replace(pair.spec.draft, schedule="heuristic")
    done = {}
    for event in compare(pair, prompt, RunSettings(max_new_tokens=48), heuristic):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    result = report(pair, done["plain"], done["assisted"])
    assert result["analysis_errors"] == {} and result["identical"] is True
    longest = max(step.drafted for step in done["assisted"].steps)
    found = result["oracle"]
    assert found["reason"] is None
    assert found["verify_rows"] >= longest + 1 or found["extrapolated_rows"]


def test_drafted_accepted_and_steps_are_consistent(records):
    assisted = records["assisted"]
    assert stats.new_tokens(assisted) == stats.accepted(assisted) + len(assisted.steps)
    assert 0 < stats.accepted(assisted) <= stats.drafted(assisted)
    assert all(0 <= s.accepted <= s.drafted <= 5 for s in assisted.steps)
    # A 0.5B coder drafting for its 1.5B sibling on a code edit is right most of the time.
    assert stats.acceptance_rate(assisted) > 0.5
    assert len(assisted.steps) < len(records["plain"].steps)


def test_sha256_check_rejects_a_corrupted_real_part(tmp_path, monkeypatch):
    real = embedded.ASSISTANT.part_paths()
    corrupted = tmp_path / real[2].name
    shutil.copyfile(real[2], corrupted)
    with corrupted.open("r+b") as part:
        part.seek(1000)
        byte = part.read(1)
        part.seek(1000)
        part.write(bytes([byte[0] ^ 0xFF]))
    paths = [*real[:2], corrupted, *real[3:]]
    monkeypatch.setattr(type(embedded.ASSISTANT), "part_paths", lambda self: paths)
    with pytest.raises(embedded.EmbeddedModelError, match="sha256"):
        embedded.assemble(embedded.ASSISTANT, tmp_path / "out.gguf")


def test_cli_json_on_the_embedded_pair(pair):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "assisted",
            "Say hello in French.",
            "--max-new-tokens",
            "8",
            "--dtype",
            "float32",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["pair"] == "embedded" and result["dtype"] == "float32"
    # At most the 8 tokens asked for (EOS may come first), the same count in both runs.
    assert 0 < result["plain"]["new_tokens"] <= 8 and result["plain"]["text"].strip()
    assert result["assisted"]["new_tokens"] == result["plain"]["new_tokens"]
    assert result["identical"] is True
