"""`python -m lab.precisions` end to end on tiny models: the machine first, the
table last, every precision measured against one plain baseline, and the JSON written."""

from __future__ import annotations

import json

import pytest

from lab import precisions


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [
        {"question_id": "add", "category": "write-code", "turns": ["def add(a, b):"]},
        {"question_id": "fox", "category": "summarise", "turns": ["Summarise: the quick fox."]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_every_precision_is_measured_against_one_plain_baseline(
    tiny_dirs, prompts, tmp_path, capsys
):
    out = tmp_path / "out"
    code = precisions.main(
        [
            "--target",
            str(tiny_dirs["target"]),
            "--assistant",
            str(tiny_dirs["other"]),
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--prompts",
            str(prompts),
            "--max-new-tokens",
            "6",
            "--repeats",
            "1",
            "--passes",
            "2",
            "--out",
            str(out),
            "--schedule",
            "constant",
        ]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert lines[0].startswith("machine: ") and "threads" in lines[0]
    table = lines[-6:]
    assert table[0].startswith("| precision |") and table[2].startswith("| plain")
    assert [row.split(" | ")[0] for row in table[3:]] == ["| none (float32)", "| int8", "| int4-wo"]
    result = json.loads((out / "precisions.json").read_text())
    rows = {row["precision"]: row for row in result["precisions"]}
    assert list(rows) == ["none", "int8", "int4-wo"]
    # float32, int8 and 4 bits (with a float32 scale and zero per 64) a linear weight
    assert rows["int4-wo"]["linear_bytes"] < rows["int8"]["linear_bytes"]
    assert rows["int8"]["linear_bytes"] < rows["none"]["linear_bytes"] / 3
    for row in rows.values():
        assert row["identical_prompts"] == row["prompts"] == 2  # greedy: lossless
        assert row["drafting_ms_per_token"] > 0 and row["drafting_ms_per_token_in_runs"] > 0
        assert row["speedup_geomean"] > 0 and row["acceptance_rate"] is not None
        assert row["assistant_drafted"] > 0  # constant γ: every step drafts with it
        assert row["assistant_acceptance_rate"] == row["acceptance_rate"]
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    plain = [run for run in runs if run["drafter"] is None]
    assert len(plain) == 2  # one baseline per prompt and repeat, for all three
    assert result["report"]["settings"]["max_new_tokens"] == 6


def test_sampling_is_refused_before_loading(capsys):
    assert precisions.main(["--target", "no/such-model", "--sample"]) == 2
    assert "greedy" in capsys.readouterr().err
