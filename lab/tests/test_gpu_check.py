"""The GPU check (`python -m lab.gpu_check`) at toy widths on the CPU, as a lent
device would run it at full ones; and its model of a speedup, against what must hold."""

from __future__ import annotations

import json
import math

import pytest
import torch

from assisted.core.record import CUDA_GRAPHS, EAGER
from assisted.core.settings import DrafterKind
from assisted.models.registry import PAIRS
from lab.gpu_check import end_to_end, imposed
from lab.gpu_check.__main__ import main
from lab.gpu_check.architectures import ARCHITECTURES
from lab.gpu_check.imposed import Imposed
from lab.gpu_check.speedup import (
    ACCEPTANCE,
    acceptance_for,
    modelled_speedup,
    per_token_acceptance,
)

PAIRS_CHECKED = "embedded,embedded-prompt-lookup,layerskip-llama3.2-1b"


def test_the_check_times_each_pair_and_writes_one_table(tmp_path, capsys):
    out = tmp_path / "check"
    arguments = ["--tiny", "--device", "cpu", "--pairs", PAIRS_CHECKED, "--max-rows", "4"]
    arguments += ["--end-to-end-tokens", "12"]
    main([*arguments, "--repeats", "1", "--context", "16", "--out", str(out)])
    printed = capsys.readouterr().out
    assert printed.strip() == (out / "gpu_check.md").read_text().strip()
    assert "random weights at toy widths" in printed and "Modelled speedup" in printed
    report = json.loads((out / "gpu_check.json").read_text())
    assert list(report) == PAIRS_CHECKED.split(",")
    for name, costs in report.items():
        assert len(costs["rows_s"]) == 4 and all(s > 0 for s in costs["rows_s"]), name
        assert costs["launch_floor_s"] > 0 and costs["read_bytes"] > 0
    assert report["embedded-prompt-lookup"]["draft_s"] == 0.0  # drafted on the CPU
    assert report["embedded"]["draft_s"] > 0 and report["layerskip-llama3.2-1b"]["draft_s"] > 0
    # One target, timed once: the two embedded pairs share its figures.
    assert report["embedded"]["rows_s"] == report["embedded-prompt-lookup"]["rows_s"]
    lines = {line.split(" | ")[0].lstrip("| "): line for line in printed.splitlines()}
    modelled = [line for line in printed.splitlines() if "x (γ" in line]
    assert {line.split(" | ")[0].lstrip("| ") for line in modelled} == {
        "embedded",
        "embedded-prompt-lookup",
    }  # early exit has no measured acceptance
    assert "layerskip-llama3.2-1b" in lines
    # Drafting by path, for the pair with an assistant model only: on a CPU, no graphs.
    drafting = report["embedded"]["drafting"]
    assert drafting["loop_s"] > 0 and drafting["static_s"] > 0
    assert drafting["graphed_s"] is None and "not on CUDA" in drafting["reason"]
    assert report["embedded-prompt-lookup"]["drafting"] is None
    assert "Drafting by path" in printed
    # The real decoding path, end to end on the default GPU pair's shapes at toy widths.
    through = json.loads((out / "end_to_end.json").read_text())
    assert through["identical"] and through["held"] and through["drafted"] > 0
    assert through["drafting_path"] == through["expected_path"] == "eager"
    assert through["self_check"] is None  # no graphs, no self-check on a CPU
    assert "End to end (held)" in printed and "no self-check ran" in printed


def test_past_its_budget_the_check_starts_no_model_and_says_so(capsys):
    arguments = ["--tiny", "--device", "cpu", "--pairs", "embedded", "--budget-s", "0"]
    main([*arguments, "--end-to-end-tokens", "0"])
    assert "| embedded | not measured: the time budget ran out |" in capsys.readouterr().out


def test_every_pair_is_priced_from_an_architecture_of_its_own_models():
    for spec in PAIRS.values():
        assert spec.target in ARCHITECTURES, spec.name
        if spec.drafter.has_model:
            assert spec.assistant in ARCHITECTURES, spec.name
        assert (acceptance_for(spec) is None) == (spec.drafter is DrafterKind.EARLY_EXIT)


def test_the_modelled_speedup_keeps_to_its_bounds():
    flat = [1.0] * 9
    # Every draft accepted, drafting free, verification free: γ + 1 tokens a pass.
    assert modelled_speedup(1.0, flat, 0.0) == (9.0, 8)
    # Nothing accepted: no γ pays, and `auto` drafts nothing.
    assert modelled_speedup(0.0, flat, 0.1) == (1.0, 0)
    # A draft token that costs a target step can never pay unless every draft holds.
    assert modelled_speedup(0.9, flat, 1.0) == (1.0, 0)
    # More acceptance never models less; costlier verification never more.
    rising = [1.0 + 0.1 * k for k in range(9)]
    speeds = [modelled_speedup(alpha, rising, 0.05)[0] for alpha in (0.3, 0.5, 0.7, 0.9)]
    assert speeds == sorted(speeds) and speeds[-1] > 1
    assert modelled_speedup(0.7, rising, 0.05)[0] < modelled_speedup(0.7, flat, 0.05)[0]
    # One step's arithmetic: α = 0.5, γ = 1 commits 1.5 tokens for 0.1 + T(2) = 1.2 s.
    assert modelled_speedup(0.5, [1.0, 1.1], 0.1) == (pytest.approx(1.5 / 1.2), 1)
    # Drafting at half the steps, the others plain: (0.75 + 0.5) tokens for 0.6 + 0.5 s.
    assert modelled_speedup(0.5, [1.0, 1.1], 0.1, 0.5) == (pytest.approx(1.25 / 1.1), 1)
    assert modelled_speedup(1.0, flat, 0.0, drafting=0.0) == (1.0, 0)


def test_acceptance_counts_each_draft_up_to_its_first_wrong_token(tmp_path):
    def line(drafter, category, steps):
        return json.dumps({"drafter": drafter, "category": category, "record": {"steps": steps}})

    steps = [
        {"drafted": 8, "accepted": 8},  # all held: no wrong token
        {"drafted": 8, "accepted": 2},  # cut at its third
        {"drafted": 0, "accepted": 0},  # a plain step
        {"drafted": 3, "accepted": 0},  # cut at its first
    ]
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        "\n".join(
            [
                line(None, "chat", [{"drafted": 0, "accepted": 0}]),
                line("assistant", "chat", steps),
                line("prompt-lookup", "chat", steps[:1]),
            ]
        )
    )
    # 10 accepted, 2 drafts cut: α = 10 / 12; 3 of the 4 steps drafted.
    assert per_token_acceptance(runs) == {
        "assistant": {"chat": (round(10 / 12, 3), 0.75)},
        "prompt-lookup": {"chat": (1.0, 1.0)},
    }


def test_at_an_imposed_acceptance_the_run_is_lossless_and_accepts_what_was_imposed(
    tmp_path, capsys
):
    """The product's path at toy widths on the CPU: the target's verification accepts the
    known output exactly as proposed, and the α counted from the record lies within three
    standard errors of the imposed one for the positions it counts."""
    out = tmp_path / "check"
    arguments = ["--tiny", "--device", "cpu", "--pairs", "embedded", "--budget-s", "0"]
    arguments += ["--end-to-end-tokens", "0", "--imposed-tokens", "40"]
    main([*arguments, "--imposed-kinds", "chat,write-code", "--out", str(out)])
    printed = capsys.readouterr().out
    result = json.loads((out / "imposed.json").read_text())
    assert result["held"] and result["new_tokens"] == 40
    assert result["drafting_path"] == result["expected_path"] == "eager"  # on a CPU
    assert result["measures"] == "cost at an imposed acceptance: the drafts are replaced"
    assert "this measures cost at a stated acceptance, not correctness" in printed
    assert list(result["kinds"]) == ["chat", "write-code"]
    for kind, run in result["kinds"].items():
        alpha = ACCEPTANCE["assistant"][kind][0]
        assert run["imposed_alpha"] == alpha
        assert run["positions"] >= 30, kind  # 40 tokens: each a position, or a cut draft's
        assert run["tolerance"] == round(3 * math.sqrt(alpha * (1 - alpha) / run["positions"]), 3)
        assert abs(run["measured_alpha"] - alpha) <= run["tolerance"], kind
        assert run["identical"] and run["as_imposed"], kind
        assert run["eager_assistant_passes"] > 0 and run["graphed_drafts"] == 0
        assert run["speedup"] > 0 and run["accepted_per_step"] > 0
    rates = [result["kinds"][kind]["accepted_per_step"] for kind in ("chat", "write-code")]
    assert rates[0] < rates[1]  # α 0.724 against 0.94, on the same draws
    assert "Measured at an imposed acceptance (held)" in printed
    assert f"Plain {result['plain_tokens_per_s']} tok/s" in printed
    for label in ("α imposed", "α measured", "assisted tok/s", "speedup", "accepted per step"):
        assert label in printed, label
    assert "eager assistant passes" in printed and "drafting path eager" in printed
    assert (out / "gpu_check.md").read_text().strip() == printed.strip()


def test_an_imposed_run_holds_on_cuda_only_where_every_kind_replayed_its_graphs():
    """Its drafts are replaced, so a failed capture or self-check cannot show in its output:
    on CUDA it holds only where every kind's run drafted through the graphs whose cost it
    measures, with replays counted. Mutations caught: the last kind's path alone judged
    (an earlier kind that fell back passes); replays not required."""
    kind = {"identical": True, "as_imposed": True, "measured_alpha": 0.7}
    kind |= {"imposed_alpha": 0.72, "tolerance": 0.05}
    graphed = {**kind, "drafting_path": CUDA_GRAPHS, "graphed_drafts": 9}
    on_cuda = end_to_end.expected_path(torch.device("cuda"))
    assert on_cuda == CUDA_GRAPHS
    assert imposed.held({"chat": graphed, "math": graphed}, on_cuda)
    fell_back = {**kind, "drafting_path": EAGER, "graphed_drafts": 0}
    assert not imposed.held({"chat": fell_back, "math": graphed}, on_cuda)
    assert not imposed.held({"chat": {**graphed, "graphed_drafts": 0}}, on_cuda)
    on_cpu = end_to_end.expected_path(torch.device("cpu"))
    assert imposed.held({"chat": fell_back}, on_cpu)
    assert not imposed.held({"chat": graphed, "x": {**graphed, "identical": False}}, on_cuda)
    assert not imposed.held({}, on_cuda)


class Drafts:
    """A lean drafter's face: drafts of `gamma` zeros, and the ids its cache holds."""

    def __init__(self) -> None:
        self.held: list[int] = []

    def draft(self, input_ids, gamma, ids=None):
        return [0] * gamma


def test_the_imposed_drafter_proposes_the_known_output_and_rolls_back_to_it():
    expected = list(range(10, 30))  # two prompt ids, then the known output
    real = Drafts()
    imposed = Imposed(real, expected, 1.0, 64, seed=0)
    ids = expected[:2]
    assert imposed.draft(torch.tensor([ids]), 4, ids) == expected[2:6]
    # Its cache holds the ids and all but the last candidate, as after its own draft.
    assert real.held == expected[:5] and imposed.intended == [4]
    never = Imposed(Drafts(), expected, 0.0, 64, seed=0)
    assert never.draft(torch.tensor([ids]), 3, ids) == [13, 14, 15]  # each one off
    assert never.intended == [0]
    # Past the known output, the assistant's own tokens.
    assert imposed.draft(torch.tensor([expected]), 2, expected) == [0, 0]


def test_the_drafting_table_peaks_the_assistant_so_its_self_check_can_judge(monkeypatch):
    """Random weights give near-uniform logits, on which the graphs' self-check judges no
    position (bf16: a near-tie is within 8 of its steps): inconclusive. The check's drafting
    table peaks the assistant first (costs unchanged), so its self-check judges enough to
    pass. The default pair's assistant at two small layers, captured through the CPU's
    stand-in for CUDA graphs as if on CUDA."""
    from dataclasses import replace

    from assisted.engine.drafters import draft_graphs
    from lab.gpu_check import timing
    from tests.engine.graph_stand_in import StandInGraphs

    monkeypatch.setattr(draft_graphs, "GRAPHS", StandInGraphs())
    monkeypatch.setattr(draft_graphs, "BUCKETS", (128,))
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    # Two layers, 256 wide: a peak of about √width spreads stands out in bf16 probabilities.
    small = {"layers": 2, "hidden_size": 256, "intermediate_size": 512, "vocab_size": 512}
    shallow = replace(ARCHITECTURES[PAIRS["qwen2.5-coder-7b"].assistant], **small)
    shallow = replace(shallow, heads=4, kv_heads=2, head_dim=64)
    timer = timing.Timer(torch.device("cpu"), torch.bfloat16, 32, 2, 1, False, math.inf)
    drafting = timer.drafting(shallow)
    assert (drafting.check, drafting.graphed_s is not None) == ("passed", True), drafting.reason
    assert drafting.judged >= 8 and list(drafting.by_cache_s) == [128]
    monkeypatch.setattr(timing, "peaked", lambda model, never: None)  # random weights as built
    flat = timing.Timer(torch.device("cpu"), torch.bfloat16, 32, 2, 1, False, math.inf)
    drafting = flat.drafting(shallow)
    assert drafting.check == "inconclusive" and drafting.graphed_s is None
    assert drafting.reason.endswith("the lean loop on a DynamicCache")


def test_the_graphs_command_writes_one_json_and_prints_one_table(tmp_path, capsys):
    """`python -m lab.gpu_check.replays` on a CPU: the imposed runs, and no graphs
    to compare, said as such."""
    from lab.gpu_check import replays

    arguments = ["--tiny", "--device", "cpu", "--dtype", "float32", "--tokens", "8"]
    replays.main([*arguments, "--kinds", "chat", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / replays.JSON_NAME).read_text())
    assert result["imposed"]["held"] and list(result["imposed"]["kinds"]) == ["chat"]
    assert result["caches"]["by_cache"] == [] and result["caches"]["check"] is None
    assert "Imposed runs held on eager: chat " in printed
    assert "| — | no graphs on this device |" in printed


def test_the_graphs_command_compares_each_cache_s_replays_with_eager_passes(monkeypatch):
    """Through the CPU's stand-in for CUDA graphs, as if on CUDA: each cache's replays, by
    context and draft length, equal the eager passes (the stand-in replays them), every
    position judged; a replay one ulp off shows as a gap, in the table with where."""
    from dataclasses import replace

    from assisted.engine.drafters import draft_graphs
    from lab.gpu_check import replays
    from lab.gpu_check.models import toy
    from tests.engine.graph_stand_in import StandInGraphs
    from tests.engine.test_drafting_faults import FaultyGraphs

    monkeypatch.setattr(draft_graphs, "GRAPHS", StandInGraphs())
    # The stand-in runs each capture's passes, which advance the cache: 128 at least.
    monkeypatch.setattr(draft_graphs, "BUCKETS", (128, 256))
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    # Two layers deep: the stand-in traces every operator of every pass.
    monkeypatch.setattr(replays, "toy", lambda architecture: replace(toy(architecture), layers=2))
    found = replays.caches(torch.device("cpu"), torch.float32, tiny=True)
    assert found["check"] == "passed" and found["gap"] == 0.0
    assert [cache["capacity"] for cache in found["by_cache"]] == [128, 256]
    rows = [row for cache in found["by_cache"] for row in cache["rows"]]
    assert {row["context"] for row in rows} == {"after the probe", "near the end"}
    assert all(row["eager_equal"] and row["agrees"] and row["replays_equal"] for row in rows)
    assert all(row["gap"] == 0.0 for row in rows) and sum(row["judged"] for row in rows) > 0

    # Every replay's first probability a millionth up: within fp32's bound (1e-3).
    skewed = FaultyGraphs()
    skewed.skew = 1e-6
    monkeypatch.setattr(draft_graphs, "GRAPHS", skewed)
    monkeypatch.setattr(draft_graphs, "BUCKETS", (128,))
    found = replays.caches(torch.device("cpu"), torch.float32, tiny=True)
    assert found["check"] == "last-bit" and found["gap"] == pytest.approx(1e-6)
    run = {"held": True, "drafting_path": CUDA_GRAPHS, "kinds": {}}
    result = {"device": "CPU", "dtype": "float32", "tiny": True, "seconds": 1.0}
    lines = replays.table(result | {"imposed": run, "caches": found})
    assert "Self-check **last-bit**" in lines[0]
    first = lines[4]  # the cache of 128, under the header and its rule
    assert (
        first.startswith("| 128 | yes | yes (")
        and "1e-06 (γ 1, candidate 1, after the probe)" in first
    )
    assert all(line.count("|") == 7 for line in lines[2:])
