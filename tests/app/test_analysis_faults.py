"""An analysis never destroys a run: each analysis forced to fail after both runs finished,
in the CLI, the app (over gradio_client) and the benchmark, still returns the runs'
outputs, their measured figures and the raw records, with the failed part marked."""

from __future__ import annotations

import io
import json
import logging

import pytest

from assisted import cli
from assisted.bench import __main__ as bench_command
from assisted.ui.compare.chunks import histogram_frame

FORCED = "RuntimeError: forced"
# Each analysis found after the runs, and the function that computes it.
ANALYSES = {
    "hindsight": "assisted.engine.hindsight.find",
    "divergence": "assisted.analysis.divergence.explain",
    "prediction": "assisted.analysis.stats._prediction",
    "oracle": "assisted.analysis.oracle.report",
}
# The constant schedule on a calibrated pair (`auto` first) has an oracle to find.
CONSTANT = ("--schedule", "constant", "--draft-length", "3", "--confidence-threshold", "0")


def fail(*args, **kwargs):
    raise RuntimeError("forced")


def tiny(tiny_dirs) -> list[str]:
    return ["--target", str(tiny_dirs["target"]), "--assistant", str(tiny_dirs["target"])]


def run_cli(tiny_dirs, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(
        ["def add(a, b):", *tiny(tiny_dirs), "--dtype", "float32", "--json", *argv], out=out
    )
    return code, out.getvalue()


def assert_whole(result: dict, part: str) -> None:
    """The runs' outputs and measured figures are there, and only `part` is marked failed."""
    assert result["analysis_errors"] == {part: FORCED}
    for mode in ("plain", "assisted"):
        assert result[mode]["text"] and result[mode]["new_tokens"] > 0
        assert result[mode]["tokens_per_s"] > 0 and result[mode]["per_step"]
    assert result["speedup"] > 0
    if part in ("hindsight", "oracle"):
        assert result["oracle"]["speedup_modelled"] is None
        assert FORCED in result["oracle"]["reason"]
    if part == "oracle":
        assert result["oracle"]["error"] == FORCED
    # Whether the ids match is no analysis: a self-draft's runs are identical, judged or not.
    assert result["identical"] is True and result["divergence"] is None


@pytest.mark.parametrize("part", ANALYSES)
def test_the_cli_keeps_the_runs_when_an_analysis_fails(tiny_dirs, monkeypatch, caplog, part):
    assert run_cli(tiny_dirs, "--max-new-tokens", "4", "--schedule", "auto")[0] == 0  # calibrated
    monkeypatch.setattr(ANALYSES[part], fail)
    with caplog.at_level(logging.ERROR, logger="assisted.analysis"):
        code, output = run_cli(tiny_dirs, "--max-new-tokens", "12", *CONSTANT)
    assert code == 0
    assert_whole(json.loads(output.strip().splitlines()[-1]), part)
    assert f"Could not be computed: the {part} ({FORCED})" in output
    logged = [r for r in caplog.records if FORCED in r.getMessage()]
    assert len(logged) <= 1 and all(r.exc_info for r in logged)  # once, with its traceback


def compare(client, **changes) -> tuple[str, dict]:
    """The summary and the JSON result of a /compare call on the tiny self-draft."""
    inputs = {"prompt": "def add(a, b):", "pair": "tiny-self", "max_new_tokens": 12}
    inputs |= {"draft_length": 3, "schedule": "constant", "confidence_threshold": 0.0}
    values = client.predict(**inputs | changes, api_name="/compare")
    return values[5], values[-1]


def fail_on_data(counts: list[int]):
    """A chart that fails once it has data to draw (an empty one is drawn before the runs)."""
    if counts:
        fail()
    return histogram_frame(counts)


@pytest.mark.parametrize("part", [*ANALYSES, "charts"])
def test_the_app_keeps_the_runs_when_an_analysis_fails(self_client, monkeypatch, part):
    compare(self_client, schedule="auto")  # calibrated
    with monkeypatch.context() as patched:
        if part == "charts":
            patched.setattr("assisted.ui.compare.live.histogram_frame", fail_on_data)
        else:
            patched.setattr(ANALYSES[part], fail)
        summary, result = compare(self_client)
    assert_whole(result, part)
    assert f"Could not be computed: the {part} ({FORCED})" in summary
    _, again = compare(self_client)  # the loaded pair and the app stay usable
    assert again["analysis_errors"] == {} and again["oracle"]["reason"] is None


@pytest.mark.parametrize("part", ["hindsight", "divergence", "oracle"])
def test_the_benchmark_reports_its_runs_when_an_analysis_fails(
    tiny_dirs, tmp_path, monkeypatch, capsys, part
):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"category": "code", "turns": ["def add(a, b):"]}) + "\n")
    argv = ["--prompts", str(prompts), *tiny(tiny_dirs), "--max-new-tokens", "8"]
    argv += ["--dtype", "float32", "--repeats", "1", "--variant", "schedule=constant"]
    monkeypatch.setattr(ANALYSES[part], fail)
    assert bench_command.main([*argv, "--out", str(tmp_path / "out")]) == 0
    stdout = capsys.readouterr().out
    report = json.loads(stdout.strip().splitlines()[-1])
    (row,) = report["prompts"]
    assert row["analysis_errors"] == {part: FORCED}
    assert row["speedup"] > 0 and row["new_tokens"] > 0
    assert f"Could not be computed: the {part} ({FORCED})" in stdout
    assert (tmp_path / "out" / "runs.jsonl").read_text().count("\n") == 2


def test_a_heuristic_benchmark_prices_every_draft_it_grew(tiny_dirs, tmp_path, capsys):
    """Transformers' heuristic schedule grows a self-draft past the cap: the benchmark's
    report still carries every figure, its oracle priced at each length drafted."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"category": "code", "turns": ["def add(a, b):"]}) + "\n")
    argv = ["--prompts", str(prompts), *tiny(tiny_dirs), "--max-new-tokens", "40"]
    argv += ["--dtype", "float32", "--repeats", "1", "--variant", "schedule=auto"]
    argv += ["--variant", "schedule=heuristic,num-assistant-tokens=2,confidence-threshold=0"]
    assert bench_command.main([*argv, "--out", str(tmp_path / "out")]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    heuristic = next(row for row in report["prompts"] if "heuristic" in row["drafter"])
    assert heuristic["analysis_errors"] == {} and heuristic["oracle_speedup"] is not None
    assert heuristic["mean_drafted"] > 2  # the draft grew (every candidate is accepted)
