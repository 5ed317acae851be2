"""The sampling check (`assisted.bench.sampling_check`) on tiny models built here, with fixed seeds:
assisted sampling passes, the biased verifier is flagged, the JSON's shape, the benchmark's
option; and the permutation test (`assisted.analysis.two_sample`) on synthetic draws, whose
false-alarm rate is measured here: at most α = 5% by construction, 2.75% over 400 seeds."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from assisted.analysis import two_sample
from assisted.analysis.sampling import ALPHA, PROMPT, TOKENS, CheckSettings, sentence
from assisted.bench import sampling_check
from assisted.bench.planning import Variant
from assisted.bench.sampling_check import __main__ as sampling_check_command
from assisted.core.settings import Example, RunSettings, SettingsError
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models import pairs
from assisted.models.loading import end_ids
from assisted.models.registry import DEFAULT_PAIR, PAIRS
from assisted.ui import gpu_time
from assisted.ui.benchmark.format import BenchmarkRequest, split
from assisted.ui.requests import PairPlace
from tests.tiny import build_model, build_near_model, build_tokenizer

# At temperature 0.3 the tiny target's first three tokens spread over a few dozen outcomes,
# and the near assistant's drafts are kept about a third of the time.
SETTINGS = CheckSettings(samples=60, tokens=3, prompt="The quick brown fox", temperature=0.3)
RESULT_KEYS = {
    "pair",
    "device",
    "dtype",
    "prompt",
    "prompt_tokens",
    "n",
    "k",
    "temperature",
    "top_p",
    "seed",
    "drafter",
    "draft",
    "tv",
    "tv_plain",
    "bound",
    "p_value",
    "alpha",
    "permutations",
    "passed",
    "assisted",
    "control",
    "power",
    "outcomes",
    "top",
    "seconds",
}
CONTROL_KEYS = {"verifier", "tv", "bound", "p_value", "flagged", "verifications", "drafted"}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampling-check")
    tokenizer = build_tokenizer(root / "tokenizer")
    build_model(root / "target", tokenizer, seed=1)
    build_near_model(root / "near", root / "target")
    return root


@pytest.fixture(scope="module")
def pair(dirs):
    spec = pairs.custom_pair(str(dirs / "target"), str(dirs / "near"))
    return pairs.load_pair(spec, device="cpu", dtype="float32")


def drain(events):
    """A generator's yields run through; what it returns."""
    while True:
        try:
            next(events)
        except StopIteration as finished:
            return finished.value


@pytest.fixture(scope="module")
def result(pair):
    return drain(sampling_check.run_check(pair, SETTINGS))


def test_assisted_sampling_passes_having_kept_and_rejected_drafts(result):
    assert result["passed"] and result["tv"] <= result["bound"]
    assert result["p_value"] > result["alpha"]
    drafting = result["assisted"]
    # Both rules of speculative sampling ran: drafts kept (p/q test) and rejected (residual).
    assert 0 < drafting["accepted"] < drafting["drafted"]


def test_the_biased_verifier_is_flagged(result):
    control = result["control"]
    assert control["flagged"] and control["tv"] > control["bound"]
    # It verified every control run's draft, and kept every candidate.
    assert control["verifications"] == SETTINGS.samples
    assert control["accepted"] == control["drafted"] > 0
    assert result["power"]["tv"] is not None and result["power"]["tv"] <= control["tv"]


def test_the_result_is_one_json_object_of_the_documented_shape(result):
    assert set(result) == RESULT_KEYS
    assert set(result["control"]) >= CONTROL_KEYS
    assert (result["n"], result["k"]) == (60, 3)
    assert result["draft"]["schedule"] == "constant"
    assert result["draft"]["confidence_threshold"] == 0
    assert json.loads(json.dumps(result)) == result
    sets = ("plain", "plain_2", "assisted", "control")
    counts = [sum(row[name] for name in sets) for row in result["top"]]
    assert counts == sorted(counts, reverse=True) and result["outcomes"] >= len(counts)
    text = sentence(result)
    assert text.startswith("Checked on 60 samples of the first 3 tokens: TV ")
    assert "between two plain sets, within the bound" in text and "was flagged" in text


def test_the_command_ends_stdout_with_the_json_line(dirs, capsys):
    argv = [
        "--target",
        str(dirs / "target"),
        "--assistant",
        str(dirs / "near"),
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--samples",
        "10",
        "--tokens",
        "2",
        "--prompt",
        "The quick brown fox",
        "--no-control",
    ]
    assert sampling_check_command.main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    last = json.loads(lines[-1])
    assert last["n"] == 10 and last["control"] is None and last["power"] is None
    assert lines[-2] == sentence(last)


def test_bad_settings_fail_before_any_model_loads(capsys):
    assert sampling_check_command.main(["--tokens", "1"]) == 2
    assert "tokens must be at least 2" in capsys.readouterr().err
    with pytest.raises(SettingsError, match="samples"):
        CheckSettings(samples=1).validate()


def test_batched_plain_samples_follow_one_row_plain_runs(pair):
    """The plain sets are drawn in a batch over a repeated prefix cache: the same
    distribution as the product's plain runs of one row each."""
    run = SETTINGS.run_settings()
    ids = encode_prompt(pair, SETTINGS.prompt)
    batched = decoding.plain_samples(pair, ids, run, 60)
    eos = frozenset(end_ids(pair.target.generation_config))
    single = []
    for seed in range(100, 160):
        events = decoding.run(pair, ids, "plain", run.with_(seed=seed))
        record = next(event for event in events if isinstance(event, RunDone)).record
        single.append(decoding.first_tokens(record.token_ids, eos))
    assert not two_sample.permutation_test(batched, single, ALPHA).flagged


def test_the_verifier_is_restored_however_the_control_ends():
    from transformers.generation import utils

    original = utils._speculative_sampling
    with pytest.raises(RuntimeError), decoding.biased_verifier():
        assert utils._speculative_sampling is not original
        raise RuntimeError("a run failed")
    assert utils._speculative_sampling is original


def test_the_benchmark_option_runs_the_check_after_the_timed_runs(dirs, tmp_path, capsys):
    from assisted.bench import __main__ as command

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"category": "chat", "turns": ["def add(a, b):"]}) + "\n")
    argv = [
        "--prompts",
        str(prompts),
        "--repeats",
        "1",
        "--max-new-tokens",
        "4",
        "--target",
        str(dirs / "target"),
        "--assistant",
        str(dirs / "near"),
        "--dtype",
        "float32",
        "--device",
        "cpu",
    ]
    assert command.main([*argv, "--sampling-check", "1"]) == 2  # refused before loading
    assert "samples must be 2" in capsys.readouterr().err
    assert command.main([*argv, "--sampling-check", "10"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    report = json.loads(out[-1])
    check = report["sampling_check"]
    assert check["n"] == 10 and check["k"] == TOKENS
    assert check["prompt"] == PROMPT  # the check's own prompt, not the set's
    assert f"Sampling: {sentence(check)}" in out
    assert report["overall"]["prompts"] == 1  # the timed runs as ever


# -- the permutation test -----------------------------------------------------------------


def test_tv_distance_by_hand():
    # a: 2/3 on 1, 1/3 on 2; b: 2/3 on 2, 1/3 on 3 → ½ (2/3 + 1/3 + 1/3)
    assert two_sample.tv_distance([1, 1, 2], [2, 2, 3]) == pytest.approx(2 / 3)
    assert two_sample.tv_distance([(1, 2)] * 3, [(1, 2)]) == 0.0


SPREAD = np.array([0.4, 0.2, 0.1, 0.1, 0.05, 0.05, 0.04, 0.03, 0.02, 0.01])


def test_the_false_alarm_rate_is_at_most_alpha():
    """Two sets of 60 samples of one distribution, 400 seeds: the test flags 2.75% of them
    (11), at most α = 5% by construction, and below it as TV takes few values (ties)."""
    rng = np.random.default_rng(0)
    flagged = 0
    for seed in range(400):
        a, b = (list(rng.choice(len(SPREAD), 60, p=SPREAD)) for _ in range(2))
        verdict = two_sample.permutation_test(a, b, ALPHA, seed=seed)
        assert verdict.flagged == (verdict.p_value <= ALPHA)
        assert verdict.flagged == (verdict.tv > verdict.bound)
        flagged += verdict.flagged
    # 11 is the figure docs/benchmarks.md quotes; any count from 1 to 20 is within α.
    assert flagged == 11


def test_a_moved_distribution_is_flagged_and_the_power_says_so():
    rng = np.random.default_rng(1)
    moved = np.roll(SPREAD, 1)  # TV 0.39 from SPREAD
    a = list(rng.choice(len(SPREAD), 200, p=SPREAD))
    b = list(rng.choice(len(SPREAD), 200, p=moved))
    assert two_sample.permutation_test(a, b, ALPHA).flagged
    detected = two_sample.detectable_tv(a, b, 60, ALPHA)
    assert detected is not None and 0.1 < detected <= two_sample.tv_distance(a, b)


# -- the app's ZeroGPU calls ----------------------------------------------------------------


def test_the_check_gets_a_zerogpu_call_of_its_own_where_it_does_not_fit_beside_prompts():
    times = gpu_time.GpuTimes(max_s=100)
    times.note(gpu_time.CallReport("pair", None, 0.0, 0.1, 0.1))  # 0.1 s a token, no set-up
    prompts = [Example(f"q{index}", "chat", "prompt") for index in range(2)]
    settings, check = RunSettings(max_new_tokens=8), CheckSettings(samples=10)

    spec = replace(PAIRS[DEFAULT_PAIR], name="pair")
    place = PairPlace(spec, "cuda", "bfloat16", False)
    variant = Variant(spec.drafter.value, spec.drafter, spec.draft)  # one drafter
    request = BenchmarkRequest(place, tuple(prompts), (variant,), settings, 1, None, None, check)

    def calls(max_s: int) -> list[list[str]]:
        times.max_s = max_s
        found = split(request, times, True)
        return [[example.question_id for example in call.examples] for call in found]

    # A prompt: 16 tokens, 1.6 s (× 1.5: 2.4 s); the check: 40 samples of 6 tokens, 24 s.
    assert calls(100) == [["q0", "q1"]]  # (3.2 + 24) × 1.5 = 40.8 s
    assert calls(40) == [["q0", "q1"], []]
    assert calls(3) == [["q0"], ["q1"], []]
    estimate = times.estimate(request, True)
    assert estimate.estimate_s == pytest.approx(3.2 + 24)
