"""The CLI on a tiny pair: streamed output, the stats table, the JSON line, clear errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from assisted import cli
from assisted.models import learnt_store

RUN_KEYS = {"text", "new_tokens", "ttft_s", "total_s", "tokens_per_s", "steps"}
ASSISTED_KEYS = RUN_KEYS | {
    "drafted",
    "accepted",
    "acceptance_rate",
    "tokens_per_step",
    "accept_histogram",
}
TOP_KEYS = {
    "pair",
    "device",
    "dtype",
    "prompt_tokens",
    "plain",
    "assisted",
    "speedup",
    "predicted_speedup",
    "prediction",
    "identical",
    "first_divergence",
}


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return cli.main(list(argv), out=out), out.getvalue()


def test_json_line_follows_the_schema(tiny_dirs):
    code, output = run_cli(
        "def add(a, b):",
        "--target",
        str(tiny_dirs["target"]),
        "--assistant",
        str(tiny_dirs["other"]),
        "--max-new-tokens",
        "12",
        "--dtype",
        "float32",
        "--json",
    )
    assert code == 0
    lines = output.strip().splitlines()
    result = json.loads(lines[-1])
    assert set(result) >= TOP_KEYS
    assert set(result["plain"]) >= RUN_KEYS
    assert set(result["assisted"]) >= ASSISTED_KEYS
    assert result["identical"] is True and result["first_divergence"] is None
    assert result["plain"]["new_tokens"] == result["assisted"]["new_tokens"]
    # the streamed text and the table come before the JSON line
    assert "── plain ──" in output and "── assisted ──" in output
    assert "acceptance rate" in output and "speedup" in output


def run_tiny_pair(tiny_dirs, *argv: str) -> tuple[str, dict]:
    """The CLI on the tiny pair in fp32 with --json: its output and the JSON line."""
    code, output = run_cli(
        "def add(a, b):",
        "--target",
        str(tiny_dirs["target"]),
        "--assistant",
        str(tiny_dirs["other"]),
        "--dtype",
        "float32",
        "--json",
        *argv,
    )
    assert code == 0
    return output, json.loads(output.strip().splitlines()[-1])


def test_json_lists_each_step_with_its_draft(tiny_dirs):
    _, result = run_tiny_pair(
        tiny_dirs, "--max-new-tokens", "12", "--draft-length", "4", "--confidence-threshold", "0"
    )
    plain, assisted = result["plain"], result["assisted"]
    timing = {"text", "t_s", "step_s"}
    assert [set(step) for step in plain["per_step"]] == [timing] * plain["steps"]
    drafts = timing | {"drafted", "accepted", "accepted_text", "rejected_text", "draft_s", "source"}
    assert [set(step) for step in assisted["per_step"]] == [drafts] * assisted["steps"]
    for run in (plain, assisted):
        assert "".join(step["text"] for step in run["per_step"]) == run["text"]
    for step in assisted["per_step"]:
        # The draft is its accepted part, which the step committed, then the rest.
        assert step["text"].startswith(step["accepted_text"])
        assert 0 <= step["accepted"] <= step["drafted"] <= 4
        assert step["rejected_text"] == "" or step["accepted"] < step["drafted"]
        assert step["draft_s"] >= 0
    assert sum(step["drafted"] for step in assisted["per_step"]) == assisted["drafted"]
    assert any(step["rejected_text"] for step in assisted["per_step"])  # a random assistant


def test_a_sampled_card_says_two_draws_and_sets_expected_acceptance_beside_observed(tiny_dirs):
    output, result = run_tiny_pair(
        tiny_dirs,
        "--max-new-tokens",
        "16",
        "--sample",
        "--seed",
        "3",
        "--confidence-threshold",
        "0",
    )
    card = output[output.index("\nnew tokens") : output.rindex("\n{")]  # before the JSON
    assert "output                two draws: plain and assisted sampling each drew" in card
    assert "not checked in this run: run `python -m assisted.bench.sampling_check`" in card
    assert "identical" not in card and "diverged" not in card
    assert "expected acceptance" in card and "\nacceptance            observed " in card
    assert result["sampling_check"] is None
    assisted = result["assisted"]
    assert 0 <= assisted["expected_acceptance_rate"] <= 1
    for step in assisted["per_step"]:
        assert len(step["drafts"]) == step["drafted"] and len(step["kinds"]) >= 1
        for draft in step["drafts"]:
            assert set(draft) == {"token", "p", "q", "accept_prob", "accepted"}


@pytest.mark.parametrize("quant", ["int8", "int4-wo"])
def test_the_json_and_the_table_name_the_assistant_precision(tiny_dirs, quant):
    output, result = run_tiny_pair(tiny_dirs, "--max-new-tokens", "8", "--assistant-quant", quant)
    assert result["assisted"]["assistant_precision"] == quant
    assert f"assistant in {quant}" in output
    assert result["identical"] is True


def test_the_auto_schedule_caps_at_8_and_carries_its_choices_and_t_of_k(tiny_dirs):
    output, result = run_tiny_pair(tiny_dirs, "--max-new-tokens", "12", "--schedule", "auto")
    assisted = result["assisted"]
    assert [k for k, _ in assisted["verify_cost_s"]] == list(range(1, 10))  # cap 8 + 1
    assert all(0 <= step["chosen"] <= 8 for step in assisted["per_step"])
    assert all(step["expected_s"] > 0 for step in assisted["per_step"])
    assert "verify_cost_s" not in result["plain"] and result["identical"] is True
    assert result["prediction"] == "policy" and result["predicted_speedup"] > 0
    assert "(the auto policy's expectations)" in output
    # Timed by this process, at the latest in the warm-up, or read from an earlier one's file.
    calibration = assisted["calibration"]
    assert calibration["source"] in ("timed", "disk") and calibration["seconds"] >= 0
    assert Path(calibration["file"]).parent == learnt_store.learnt_dir()
    assert "\ncalibration " in output and "calibration" not in result["plain"]


def test_the_table_says_what_the_prediction_comes_from():
    plain = {"new_tokens": 4, "tokens_per_s": 2.0}
    result = {
        "pair": "p",
        "device": "cpu",
        "dtype": "float32",
        "plain": plain,
        "assisted": plain,
        "speedup": 1.0,
        "predicted_speedup": 1.0,
        "prediction": "policy",
        "alpha": None,
        "mean_drafted": 0.0,
        "cost_ratio": None,
        "divergence": None,
    }
    # A policy that drafted nothing: no α, γ or c to quote, and its own prediction.
    assert "1.00x  (the auto policy's expectations)" in cli.format_table(result)
    leviathan = result | {"prediction": "leviathan", "alpha": 0.5, "mean_drafted": 3.0}
    table = cli.format_table(leviathan | {"cost_ratio": 0.2})
    # Solved from the same run: a fit to it, not a prediction.
    assert "fitted speedup" in table and "predicted" not in table
    assert "(α=0.50, γ=3.0, c=0.20, all from this run)" in table
    assert "predicted speedup" in cli.format_table(result)  # the policy's forecast


def test_plain_mode_only(tiny_dirs):
    code, output = run_cli(
        "hello",
        "--target",
        str(tiny_dirs["target"]),
        "--assistant",
        str(tiny_dirs["other"]),
        "--mode",
        "plain",
        "--max-new-tokens",
        "4",
        "--json",
    )
    assert code == 0
    result = json.loads(output.strip().splitlines()[-1])
    assert result["assisted"] is None and result["plain"]["new_tokens"] <= 4


def test_list_pairs():
    code, output = run_cli("--list-pairs")
    assert code == 0 and "embedded" in output and "prompt-lookup" in output


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["   "], "prompt is empty"),
        (["hi", "--pair", "nope"], "unknown pair"),
        (["hi", "--max-new-tokens", "0"], "max new tokens"),
        (["hi", "--max-new-tokens", "100000"], "max new tokens"),
        (["hi", "--target", "not a model"], "not a model id"),
        (["hi", "--pair", "embedded", "--target", "a/b"], "either --pair or --target"),
        (["hi", "--assistant", "a/b"], "go with --target"),
        (["hi", "--draft-length", "0"], "draft length"),
        (["hi", "--sample", "--temperature", "0"], "temperature"),
        (
            ["hi", "--pair", "embedded-prompt-lookup", "--assistant-quant", "int8"],
            "'prompt-lookup' drafter runs no separate model",
        ),
        # The suffix lookup (the default) matches 2 to 8 tokens: an n-gram size means nothing.
        (
            ["hi", "--pair", "embedded-prompt-lookup", "--ngram-size", "3"],
            "--ngram-size applies to --lookup transformers; the suffix lookup matches 2 to 8",
        ),
        (["hi", "--ngram-size", "3", "--lookup", "suffix"], "applies to --lookup transformers"),
        (["hi", "--cumulative-threshold", "1"], "cumulative threshold must be in [0, 1)"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(argv, message, capsys):
    code, output = run_cli(*argv)
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
    assert output == ""


def test_a_cumulative_threshold_reaches_the_draft_settings_and_keeps_the_output(tiny_dirs):
    args = cli.build_parser().parse_args(["hi", "--cumulative-threshold", "0.5"])
    assert cli._draft_settings(args, cli.pair_spec(args)).cumulative_threshold == 0.5
    _, result = run_tiny_pair(
        tiny_dirs, "--max-new-tokens", "12", "--schedule", "auto", "--cumulative-threshold", "0.5"
    )
    assert result["identical"] is True


def test_an_ngram_size_is_taken_with_transformers_lookup():
    parser = cli.build_parser()
    args = parser.parse_args(["hi", "--ngram-size", "3", "--lookup", "transformers"])
    spec = cli.pair_spec(args)
    assert cli._draft_settings(args, spec).max_matching_ngram_size == 3


def test_the_help_names_every_assistant_precision_and_the_cap_each_drafter_takes_under_auto():
    helps = {action.dest: action.help for action in cli.build_parser()._actions}
    assert all(quant in helps["assistant_quant"] for quant in cli.ASSISTANT_QUANTS)
    # Under auto an assistant's cap is the draft length, prompt lookup's its tokens per step.
    assert "assistant" in helps["draft_length"] and "cap" in helps["draft_length"]
    assert "prompt-lookup pair, the cap" in helps["prompt_lookup_tokens"]


def test_incompatible_pair_is_refused(tiny_dirs, capsys):
    code, _ = run_cli(
        "hi",
        "--target",
        str(tiny_dirs["target"]),
        "--assistant",
        str(tiny_dirs["other_tokenizer"]),
    )
    assert code == 2
    assert "different tokenizers" in capsys.readouterr().err


def test_two_folders_of_a_padded_vocabulary_pair_compare(padded_dirs):
    """Config vocab sizes 152064 and 151936 with one tokenizer, as Qwen2.5-7B ← 0.5B."""
    code, output = run_cli(
        "def add(a, b):",
        "--target",
        str(padded_dirs["target"]),
        "--assistant",
        str(padded_dirs["assistant"]),
        "--max-new-tokens",
        "8",
        "--dtype",
        "float32",
        "--json",
    )
    assert code == 0
    result = json.loads(output.strip().splitlines()[-1])
    assert result["identical"] is True and result["assisted"]["new_tokens"] == 8
    assert result["assisted"]["drafted"] > 0
