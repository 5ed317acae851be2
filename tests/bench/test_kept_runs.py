"""No finished run is lost: `--out DIR` keeps each timed run as it ends (`assisted.bench.journal`),
a benchmark that fails or is interrupted says where, and `--report-from DIR` makes the live
report again from the folder alone. On the tiny models of `tests/conftest.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assisted import bench
from assisted.bench import __main__ as command
from assisted.bench import journal, measuring
from assisted.core.settings import WARMUP_TOKENS
from tests.imports import ROOT

TOKENS = WARMUP_TOKENS + 2  # longer than a warm-up, so that a timed run can be told apart
FAST = ["--max-new-tokens", str(TOKENS), "--device", "cpu", "--dtype", "float32"]
DRAFTERS = ["--drafters", "assistant,prompt-lookup"]  # three runs a round, with plain


@pytest.fixture
def argv(tiny_dirs, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    lines = [
        {"question_id": "add", "category": "write-code", "turns": ["def add(a, b):"]},
        {"question_id": "fox", "category": "summarise", "turns": ["Summarise: the quick fox."]},
    ]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    pair = ["--target", str(tiny_dirs["target"]), "--assistant", str(tiny_dirs["other"])]
    return ["--prompts", str(prompts), *pair, *FAST, *DRAFTERS, "--repeats", "2"]


def fail_after(monkeypatch, timed: int, error: BaseException) -> None:
    """The timed run after the first `timed` raises `error` as it starts."""
    from assisted.engine import decoding

    real, started = decoding.run, []

    def run(pair, ids, mode, settings, *args, **kwargs):
        if settings.max_new_tokens == TOKENS:
            started.append(mode)
            if len(started) > timed:
                raise error
        return real(pair, ids, mode, settings, *args, **kwargs)

    monkeypatch.setattr(decoding, "run", run)


def kept_line(out, runs: int) -> str:
    noun = "run" if runs == 1 else "runs"
    return (
        f"{runs} {noun} kept in {out / 'runs.jsonl'}; rebuild the report with "
        f"python -m assisted.bench --report-from {out}"
    )


def lines(path) -> list[dict]:
    return [json.loads(text) for text in path.read_text().splitlines()]


def test_a_rebuilt_report_is_the_live_one(capsys, argv, tmp_path):
    out = tmp_path / "out"
    live = [*argv, "--overhead", "--sampling-check", "10", "--out", str(out)]
    assert command.main(live) == 0
    live_card, live_json = capsys.readouterr().out.rstrip("\n").rsplit("\n", 1)
    live_report = (out / "report.json").read_text()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["timed_runs"] == len(lines(out / "runs.jsonl")) == 2 * 2 * 3
    assert meta["overhead_pct"] is not None and meta["sampling_check"] is not None

    (out / "report.json").unlink()
    (out / "speedup.png").unlink()
    assert command.main(["--report-from", str(out)]) == 0
    card, json_line = capsys.readouterr().out.rstrip("\n").rsplit("\n", 1)
    assert json.loads(json_line) == json.loads(live_json)
    assert (out / "report.json").read_text() == live_report
    assert (out / "speedup.png").read_bytes()[:4] == b"\x89PNG"
    assert "Partial" not in card
    # The card, up to the line that says what was written where.
    assert card.split("\nWrote ")[0] == live_card.split("\nWrote ")[0]


def test_a_rebuild_loads_no_model_library(tmp_path, argv, capsys):
    out = tmp_path / "out"
    assert command.main([*argv, "--repeats", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    script = (
        "import sys; from assisted.bench.__main__ import main; "
        f"code = main(['--report-from', {str(out)!r}]); "
        "print(sorted({'torch', 'transformers'} & set(sys.modules))); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "error",
    [RuntimeError("the machine fell over"), KeyboardInterrupt()],
    ids=["error", "ctrl-c"],
)
def test_a_benchmark_stopped_after_k_runs_keeps_those_k(capsys, monkeypatch, argv, tmp_path, error):
    out = tmp_path / "out"
    fail_after(monkeypatch, 4, error)  # the first prompt's first round, and one run more
    with pytest.raises(type(error)):
        command.main([*argv, "--out", str(out)])
    captured = capsys.readouterr()
    assert kept_line(out, 4) in captured.err
    assert captured.out == ""
    kept = lines(out / "runs.jsonl")
    assert [(run["question_id"], run["repeat"]) for run in kept] == [("add", 0)] * 3 + [("add", 1)]
    assert all(bench.Run.from_dict(run).record.steps for run in kept)
    assert not (out / "report.json").exists()

    # The rebuilt report pairs the repeats that finished, and says it is partial.
    monkeypatch.undo()
    assert command.main(["--report-from", str(out)]) == 0
    card, json_line = capsys.readouterr().out.rstrip("\n").rsplit("\n", 1)
    result = json.loads(json_line)
    assert result["partial"] == {"timed_runs": 4, "planned": 12}
    assert "Partial: 4 of 12 timed runs finished" in card
    assert [(row["question_id"], row["repeats"]) for row in result["prompts"]] == [("add", 1)] * 2


def test_an_error_the_command_reports_still_says_where_the_runs_are(
    capsys, monkeypatch, argv, tmp_path
):
    out = tmp_path / "out"
    fail_after(monkeypatch, 3, OSError("No space left on device"))
    assert command.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "error: No space left on device" in err
    assert kept_line(out, 3) in err
    assert len(lines(out / "runs.jsonl")) == 3


def test_a_failing_report_leaves_every_run(capsys, monkeypatch, argv, tmp_path):
    out = tmp_path / "out"

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a figure divided by nothing")

    monkeypatch.setattr(measuring, "report", broken)
    with pytest.raises(ZeroDivisionError):
        command.main([*argv, "--out", str(out)])
    assert kept_line(out, 12) in capsys.readouterr().err
    assert len(lines(out / "runs.jsonl")) == 12
    monkeypatch.undo()
    assert command.main(["--report-from", str(out)]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert "partial" not in result and len(result["prompts"]) == 4


def test_a_folder_used_before_loses_its_old_runs_and_report(capsys, monkeypatch, argv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}")
    (out / "runs.jsonl").write_text('{"an": "old run"}\n')
    fail_after(monkeypatch, 1, RuntimeError("stop"))
    with pytest.raises(RuntimeError):
        command.main([*argv, "--out", str(out)])
    assert not (out / "report.json").exists()
    assert len(lines(out / "runs.jsonl")) == 1
    assert kept_line(out, 1) in capsys.readouterr().err


def test_report_from_needs_a_kept_folder_and_no_other_option(capsys, tmp_path):
    assert command.main(["--report-from", str(tmp_path)]) == 2
    assert f"{tmp_path / journal.META}: no such file" in capsys.readouterr().err
    for extra in (["--repeats", "2"], ["--out", str(tmp_path)]):
        with pytest.raises(SystemExit) as exit_:
            command.main(["--report-from", str(tmp_path), *extra])
        assert exit_.value.code == 2
        assert "--report-from" in capsys.readouterr().err
