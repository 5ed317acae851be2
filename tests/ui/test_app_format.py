"""The UI's pure formatting: chunks of steps, HTML, stat cards, summary and chart rows; and
the tabs' outputs as values."""

from __future__ import annotations

import ast
import pickle
import threading
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from assisted.analysis import stats
from assisted.analysis.stats import report
from assisted.core.record import Calibration, RunRecord, Step
from assisted.core.settings import DrafterKind, RunSettings
from assisted.engine.decoding import RunDone
from assisted.ui.benchmark import format as benchmark_format
from assisted.ui.compare import chunks as chunk_view
from assisted.ui.compare import format as compare_format
from assisted.ui.compare.chunks import Chunk
from assisted.ui.compare.format import CompareOutputs, ReplayOutputs
from assisted.ui.compare.live import Live
from assisted.ui.gpu_time import Pace, Paces
from assisted.ui.shootout import format as shootout_format


def test_a_chunk_splits_its_step_where_the_accepted_candidates_end():
    steps = [
        Step((1,), "a", 0, 0, 0.1),
        # Accepted "bc"; the draft went on with "x", then the target chose "<d>".
        Step((2, 3, 4), "bc<d>", 3, 2, 0.2, (2, 3, 9), "bc", "x"),
        # Text held back for a character split across steps: nothing to show yet.
        Step((5, 6), "", 1, 1, 0.3, (5,), "", ""),
    ]
    first, second, held = chunk_view.chunks_of(
        RunRecord("assisted", DrafterKind.ASSISTANT, 3, steps)
    )
    assert (first.accepted_text, first.own_text) == ("", "a")
    assert (second.accepted_text, second.own_text, second.tokens) == ("bc", "<d>", 3)
    assert (second.rejected_text, second.step_s) == ("x", 0.1)
    assert (held.accepted_text, held.own_text) == ("", "")
    assert chunk_view.chunks_of(None) == []


def test_run_html_escapes_and_marks_steps():
    chunks = [Chunk(0.1, "<b>", "&", 2, 1, 1)]
    assisted = compare_format.run_html(chunks, "assisted", stopped=True)
    assert "&lt;b&gt;" in assisted and "&amp;" in assisted and "<b>" not in assisted
    assert 'class="acc"' in assisted and 'class="own"' in assisted and "stopped" in assisted
    plain = compare_format.run_html(chunks, "plain", running=True)
    assert 'class="acc"' not in plain and "running" in plain
    # Running, the text is left open: the next step's update starts with this one's.
    longer = compare_format.run_html([*chunks, Chunk(0.2, "", "x", 1, 0, 0)], "plain", running=True)
    assert longer.startswith(plain) and longer != plain
    assert "waiting" in compare_format.run_html([], "plain", placeholder="waiting")


def test_an_assisted_step_shows_its_rejected_draft_and_its_details():
    first = Chunk(0.1, "", "z", 1, 0, 0, step_s=0.1)
    second = Chunk(0.3, "a", "<d>", 2, 4, 1, "<b>\n" + "x" * 40, step_s=0.183, draft_s=0.061)
    page = compare_format.run_html([first, second], "assisted")
    # Struck through right after the accepted part, before the target's own token.
    assert page.index('"acc">a<') < page.index('<s class="rej">') < page.index('"own">&lt;d&gt;<')
    # Escaped, on one line, and clipped; the whole draft is in the step's details.
    assert '<s class="rej">&lt;b&gt;↵' + "x" * 20 + "…</s>" in page
    assert compare_format.step_details(2, second) == [
        "step 2 · drafted 4 · accepted 1 · 183 ms (61 ms drafting)",
        "rejected 3: “<b>↵" + "x" * 40 + "”",
        "then the target's own token: “<d>”",
    ]
    assert "rejected 3: “&lt;b&gt;↵" + "x" * 40 + "”" in page
    assert page.count('role="tooltip"') == 2
    # One Tab stop for the text, its first step; the arrow keys reach the others (page.JS).
    assert page.count('tabindex="0"') == page.count('tabindex="-1"') == 1
    assert page.index('tabindex="0"') < page.index('tabindex="-1"')
    assert compare_format.step_details(1, first)[1] == "nothing drafted: the target alone"
    everything = Chunk(0.1, "ab", "c", 3, 2, 2, step_s=0.1)
    assert compare_format.step_details(1, everything)[1] == "every candidate accepted"


def test_under_auto_a_steps_details_name_the_chosen_length_and_the_source():
    lookup = Chunk(0.1, "ab", "c", 3, 2, 2, step_s=0.1, chosen=4, source=DrafterKind.PROMPT_LOOKUP)
    assert compare_format.step_details(1, lookup)[:3] == [
        "step 1 · drafted 2 · accepted 2 · 100 ms",
        "auto chose γ = 4, drafted by prompt lookup",
        "every candidate accepted",
    ]
    drafted = Chunk(
        0.1, "a", "c", 2, 3, 1, "xy", step_s=0.1, chosen=3, source=DrafterKind.ASSISTANT
    )
    assert (
        compare_format.step_details(2, drafted)[1] == "auto chose γ = 3, drafted by the assistant"
    )
    plain = Chunk(0.1, "", "c", 1, 0, 0, step_s=0.1, chosen=0)
    assert compare_format.step_details(3, plain)[1:3] == [
        "auto chose γ = 0",
        "nothing drafted: the target alone",
    ]
    page = compare_format.run_html([lookup], "assisted")
    assert "auto chose γ = 4, drafted by prompt lookup" in page


def test_stat_card_shows_assisted_figures_only_for_assisted_runs():
    plain = {"ttft_s": 0.5, "tokens_per_s": 3.0, "total_s": 2.0, "steps": 6, "new_tokens": 6}
    assisted = {
        **plain,
        "drafted": 10,
        "accepted": 4,
        "acceptance_rate": 0.4,
        "tokens_per_step": 1.67,
    }
    plain_labels = [label for label, _ in compare_format.stat_rows(plain)]
    assert plain_labels[:4] == ["time to first token", "tokens/s", "total time", "target steps"]
    assert "acceptance rate" not in plain_labels
    assert ("acceptance rate", "40%") in compare_format.stat_rows(assisted)
    assert "stopped" in compare_format.stat_card_html(assisted, state="stopped")
    assert "no run yet" in compare_format.stat_card_html(None)


def _records(plain_ids, assisted_steps):
    steps = [Step((t,), "x", 0, 0, 0.1 * (i + 1)) for i, t in enumerate(plain_ids)]
    plain = RunRecord("plain", None, 5, steps, total_s=1.0)
    assisted = RunRecord("assisted", DrafterKind.ASSISTANT, 5, assisted_steps, total_s=0.5)
    return plain, assisted


def test_summary_says_identical_or_where_it_diverged():
    plain, assisted = _records([1, 2, 3], [Step((1, 2, 3), "xxx", 2, 2, 0.5)])
    result = report("p", "cpu", "float32", plain, assisted)
    text = compare_format.summary_markdown(result)
    assert "Measured speedup: 2.00×" in text and "**Identical**" in text
    plain, assisted = _records([1, 2, 3], [Step((1, 9, 3), "xxx", 2, 1, 0.5)])
    plain.top2 = [(1, 9.0, 4, 3.0), (2, 5.03, 9, 5.0), (3, 8.0, 4, 1.0)]
    assisted.top2 = [(1, 9.05, 4, 3.0), (9, 5.02, 2, 5.0), (3, 8.0, 4, 1.0)]
    plain.dtype = assisted.dtype = "bfloat16"
    text = compare_format.summary_markdown(report("p", "cpu", "bfloat16", plain, assisted))
    assert "**Diverged at token 1**: the target's top two, token 2 and token 9" in text
    assert "rounding moves a logit by at most 0.25 in this dtype" in text and "a near-tie" in text
    assisted.top2[1] = (9, 9.0, 7, 1.0)  # the plain run's token is not in its top two
    text = compare_format.summary_markdown(report("p", "cpu", "bfloat16", plain, assisted))
    assert "This looks like a bug." in text


def test_a_sampled_summary_says_two_draws_and_what_was_checked_never_identical_or_diverged():
    for assisted_ids in ([1, 9, 3], [1, 2, 3]):  # two draws that part, two that match
        plain, assisted = _records([1, 2, 3], [Step(tuple(assisted_ids), "xxx", 2, 1, 0.5)])
        plain.sampled = assisted.sampled = True
        text = compare_format.summary_markdown(report("p", "cpu", "float32", plain, assisted))
        assert "**Two draws**: plain and assisted sampling each drew their own tokens" in text
        assert "not checked in this run: run `python -m assisted.bench.sampling_check`." in text
        assert "Diverged" not in text and "Identical" not in text
    checked = report("p", "cpu", "float32", plain, assisted)
    checked["sampling_check"] = {  # `assisted.bench.sampling_check`'s result, in part
        "n": 400,
        "k": 3,
        "tv": 0.031,
        "tv_plain": 0.042,
        "bound": 0.05,
        "alpha": 0.05,
        "passed": True,
        "control": None,
    }
    text = compare_format.summary_markdown(checked)
    assert "Whether assisted sampling follows the target's distribution: Checked on 400 " in text
    assert "TV 0.031 between assisted and plain samples against 0.042 between two plain" in text
    assert "not checked" not in text


def test_the_diverging_token_is_marked_in_its_step():
    chunk = Chunk(0.1, "abc", "d", 4, 3, 3, diverged=(2, 4))
    page = compare_format.run_html([chunk], "assisted")
    assert '<span class="acc">ab<mark class="diverged"' in page
    assert ">c</mark></span>" in page and '<span class="own"><mark class="diverged"' in page
    assert compare_format.DIVERGED_HERE in page  # in the step's details too
    plain = compare_format.run_html([Chunk(0.1, "", "x<y", 1, 0, 0, diverged=(1, 2))], "plain")
    assert 'x<mark class="diverged"' in plain and ">&lt;</mark>y" in plain
    assert "mark" not in compare_format.run_html([Chunk(0.1, "", "xy", 1, 0, 0)], "plain")


def _auto_run(chosen: list[int], curve: list[tuple[int, float]]) -> dict:
    """An auto run's summary: a step per chosen γ, and its cost curve."""
    steps = [Step((1,) * (g + 1), "x", g, g, 0.1 * (i + 1), chosen=g) for i, g in enumerate(chosen)]
    assisted = RunRecord("assisted", DrafterKind.ASSISTANT, 5, steps, 1.0, verify_cost_s=curve)
    return report("p", "cpu", "float32", None, assisted)["assisted"]


def test_the_cost_line_reads_a_flat_curve_as_cheap_drafts_and_a_steep_one_as_short_ones():
    flat = [(k, 0.100 + 0.002 * (k - 1)) for k in range(1, 10)]  # a GPU, or bf16
    line = compare_format.cost_model_line(_auto_run([8, 7, 8, 8], flat))
    assert line == (
        "**Cost model:** verifying 9 rows (the median draft the policy chose, 8 candidates, "
        "+ 1) costs 1.2× one row here (116 ms against 100 ms), so long drafts are cheap."
    )
    steep = [(k, 0.4 * (1 + 0.45 * (k - 1))) for k in range(1, 6)]  # fp32 on a CPU
    line = compare_format.cost_model_line(_auto_run([0, 0, 1, 0], steep))
    assert "verifying 4 rows (a draft of 3 candidates + 1) costs 2.3× one row" in line
    assert "(940 ms against 400 ms)" in line and "drafts short or not at all" in line
    between = [(k, 0.4 * (1 + 0.25 * (k - 1))) for k in range(1, 6)]
    line = compare_format.cost_model_line(_auto_run([2, 2, 3], between))
    assert "3 rows" in line and "1.5×" in line and "most of it is accepted" in line
    assert "2 rows (the median draft the policy chose, 1 candidate, + 1)" in (
        compare_format.cost_model_line(_auto_run([1], between))
    )
    assert compare_format.cost_model_line(_auto_run([1], [])) is None  # not an auto run
    # In the summary of a comparison, after the prediction and why it differs.
    plain, _ = _records([1, 2, 3], [])
    steps = [Step((1, 2, 3), "xxx", 2, 2, 0.5, chosen=2)]
    assisted = RunRecord("assisted", DrafterKind.ASSISTANT, 5, steps, 0.5, verify_cost_s=steep[:3])
    text = compare_format.summary_markdown(report("p", "cpu", "float32", plain, assisted))
    assert "**Cost model:** verifying 3 rows (the median draft the policy chose, 2" in text
    assert "Costs" not in text  # a record that says nothing of its calibration


def test_the_summary_says_in_one_line_where_the_auto_runs_costs_came_from():
    plain, _ = _records([1, 2, 3], [])
    steps = [Step((1, 2, 3), "xxx", 2, 2, 0.5, chosen=2)]
    curve = [(1, 0.4), (2, 0.5), (3, 0.6)]
    for calibration, line in [
        (Calibration("timed", 5.64, "/c/p.json"), "calibrated once on this machine in 5.6 s"),
        (Calibration("disk", 0.0, "/c/p.json"), "loaded from an earlier run on this machine"),
    ]:
        assisted = RunRecord(
            "assisted",
            DrafterKind.ASSISTANT,
            5,
            steps,
            0.5,
            verify_cost_s=curve,
            calibration=calibration,
        )
        paragraphs = compare_format.summary_markdown(
            report("p", "cpu", "float32", plain, assisted)
        ).split("\n\n")
        found = [paragraph for paragraph in paragraphs if line in paragraph]
        assert len(found) == 1 and "\n" not in found[0]
        assert paragraphs.index(found[0]) == 3  # after the cost model's line


def test_why_prediction_differs_covers_each_case():
    assert "No fitted speedup" in compare_format.why_prediction_differs(1.2, None)
    assert "agree" in compare_format.why_prediction_differs(1.0, 1.05)
    assert "below" in compare_format.why_prediction_differs(0.8, 1.5)
    assert "above" in compare_format.why_prediction_differs(1.5, 1.0)


def test_an_auto_runs_summary_names_the_policys_prediction_not_alpha_gamma_and_c():
    expected = {"expected_tokens": 2.5, "expected_s": 0.15, "plain_step_s": 0.1}
    plain, assisted = _records([1, 2, 3], [Step((1, 2, 3), "xxx", 2, 2, 0.5, chosen=2, **expected)])
    text = compare_format.summary_markdown(report("p", "cpu", "float32", plain, assisted))
    assert "**predicted: 1.67×** from the `auto` policy's own expectations, step by step" in text
    assert "not from α, γ and c" in text and "Leviathan" not in text
    assert compare_format.WHY_PREDICTION_DIFFERS[stats.POLICY]["above"] in text  # 2.00× measured
    plain, constant = _records([1, 2, 3], [Step((1, 2, 3), "xxx", 2, 2, 0.5)])
    text = compare_format.summary_markdown(report("p", "cpu", "float32", plain, constant))
    assert "from its acceptance rate 100%" in text and "(Leviathan et al. 2023)" in text
    # Solved from the very run it is set beside: a fit, never called a prediction.
    assert "**fitted: " in text and "fitted to this run, so not a forecast" in text
    assert "policy" not in text and "predict" not in text.lower()


def test_why_the_policys_prediction_differs_is_told_in_the_policys_terms():
    def why(measured, predicted):
        return compare_format.why_prediction_differs(measured, predicted, stats.POLICY)

    assert "agree" in why(1.0, 1.05) and "what it expected" in why(1.0, 1.05)
    assert "below" in why(0.8, 1.5) and "prefill" in why(0.8, 1.5)
    assert "above" in why(1.5, 1.0) and "learn as the run goes" in why(1.5, 1.0)
    for measured, predicted in ((1.0, 1.05), (0.8, 1.5), (1.5, 1.0)):
        assert why(measured, predicted) != compare_format.why_prediction_differs(
            measured, predicted
        )


def test_chart_rows_count_tokens_and_histogram_bars():
    runs = {
        "plain": [Chunk(0.1, "", "a", 1, 0, 0), Chunk(0.2, "", "b", 1, 0, 0)],
        "assisted": [Chunk(0.15, "a", "b", 2, 3, 1)],
    }
    rows = chunk_view.timeline_rows(runs)
    assert rows[0] == {"run": "plain", "t_s": 0.0, "tokens": 0}
    assert chunk_view.timeline_rows({"plain": [], "assisted": []})[1]["run"] == "assisted"
    assert [row["tokens"] for row in rows[:5]] == [0, 0, 1, 1, 2]  # a staircase
    assert rows[-2:] == [
        {"run": "assisted", "t_s": 0.15, "tokens": 0},
        {"run": "assisted", "t_s": 0.15, "tokens": 2},
    ]
    assert chunk_view.histogram_rows([3, 0, 2]) == [
        {"accepted": "0", "steps": 3},
        {"accepted": "1", "steps": 0},
        {"accepted": "2", "steps": 2},
    ]
    assert chunk_view.race_timeline(runs) == [
        (0.1, "plain", 1),
        (0.15, "assisted", 1),
        (0.2, "plain", 2),
    ]


def test_rows_of_acceptance_by_position_and_of_time_per_step():
    assert chunk_view.position_rows([0.75, 0.5]) == [
        {"position": "1", "accepted": 0.75},
        {"position": "2", "accepted": 0.5},
    ]
    rows = chunk_view.step_time_rows({"plain": [(None, 0.4)], "assisted": [(0.1, 0.6)]})
    assert rows == [
        {"run": "plain", "step": 1, "part": "target", "s": 0.4},
        {"run": "assisted", "step": 1, "part": "drafting", "s": 0.1},
        {"run": "assisted", "step": 1, "part": "target", "s": 0.6},
    ]
    assert chunk_view.step_time_label("assisted", 3.25) == "assisted: 3.25 tokens/step"
    assert chunk_view.step_time_label("plain", None) == "plain: — tokens/step"  # not run yet


def test_draft_length_rows_plot_the_chosen_length_under_auto_and_the_drafted_otherwise():
    auto = [
        Chunk(0.1, "ab", "c", 3, 2, 2, chosen=2, source=DrafterKind.ASSISTANT),
        Chunk(0.2, "", "d", 1, 0, 0, chosen=0),  # a plain step
        Chunk(
            0.3, "e", "f", 2, 3, 1, chosen=4, source=DrafterKind.PROMPT_LOOKUP
        ),  # a shorter match
    ]
    rows = chunk_view.draft_length_rows(auto)
    # First, every series without a point: the chart's colours come from its first value.
    seeds = rows[: len(chunk_view.DRAFT_SOURCES)]
    assert [row["source"] for row in seeds] == list(chunk_view.DRAFT_SOURCES)
    assert all(row["step"] is None and row["candidates"] is None for row in seeds)
    # Then an undrawn point past the last step and above the longest draft: the chart clips
    # the points on its edges.
    headroom = rows[len(seeds)]
    assert headroom["source"] == chunk_view.HEADROOM
    assert (headroom["step"], headroom["candidates"]) == (20.5, 4.5)  # at least 20 steps
    long = [Chunk(0.1, "a", "b", 2, 1, 1, chosen=1, source=DrafterKind.ASSISTANT)] * 30
    headroom = chunk_view.draft_length_rows(long)[len(seeds)]
    assert (headroom["step"], headroom["candidates"]) == (30.5, 3.5)  # at least 3 candidates
    steps = rows[len(seeds) + 1 :]
    assert [(r["step"], r["candidates"], r["source"]) for r in steps] == [
        (1, 2, "assistant"),
        (2, 0, chunk_view.NOTHING_DRAFTED),
        (3, 4, "prompt lookup"),
    ]
    assert steps[2]["drafted"] == 3 and steps[2]["accepted"] == 1
    # Other schedules choose nothing: the chart shows what each step drafted.
    constant = [
        Chunk(0.1, "a", "b", 2, 3, 1, source=DrafterKind.EARLY_EXIT),
        Chunk(0.2, "", "c", 1, 0, 0),
    ]
    points = chunk_view.draft_length_rows(constant)[len(seeds) + 1 :]
    assert [(r["candidates"], r["source"]) for r in points] == [
        (3, "early exit"),
        (0, chunk_view.NOTHING_DRAFTED),
    ]
    assert len(chunk_view.draft_length_rows([])) == len(seeds) + 1
    assert set(chunk_view.DRAFT_SOURCES) == {
        *(kind.label for kind in DrafterKind),
        "none",
        chunk_view.ORACLE,
    }


def test_the_draft_length_chart_overlays_the_oracles_schedule():
    chunks = [Chunk(0.1, "ab", "c", 3, 2, 2, chosen=2, source=DrafterKind.ASSISTANT)] * 3
    schedule = [
        {"position": 0, "source": "assistant", "gamma": 8, "committed": 9},
        {"position": 9, "source": None, "gamma": 0, "committed": 1},
    ]
    rows = chunk_view.draft_length_rows(chunks, {"schedule": schedule})
    overlay = [row for row in rows if row["source"] == chunk_view.ORACLE and row["step"]]
    assert [(r["step"], r["candidates"], r["accepted"]) for r in overlay] == [(1, 8, 8), (2, 0, 0)]
    # The headroom clears the oracle's longest draft too.
    headroom = next(row for row in rows if row["source"] == chunk_view.HEADROOM)
    assert headroom["candidates"] == 8.5
    # No schedule (sampled, or not yet done): nothing overlaid.
    assert (
        rows[len(chunk_view.DRAFT_SOURCES) + 1 :][:3]
        == chunk_view.draft_length_rows(chunks, {"schedule": None})[
            len(chunk_view.DRAFT_SOURCES) + 1 :
        ]
    )


def test_chunks_survive_the_round_trip_through_state():
    chunk = Chunk(0.1, "a", "b", 2, 3, 1, "x", 0.1, 0.02, 3, DrafterKind.ASSISTANT)
    assert chunk_view.chunks_from_dicts([chunk.to_dict()]) == [chunk]


def test_a_finished_comparisons_outputs_pickle_across_the_gpu_process_boundary():
    # ZeroGPU runs `app.GPU_CALLS["compare"]` in a process of its own and pickles its yields.
    plain = RunRecord("plain", None, 5, [Step((t,), "x", 0, 0, 0.1 * t) for t in (1, 2, 3)], 0.3)
    steps = [Step((1, 2), "xx", 2, 1, 0.1), Step((3,), "x", 2, 0, 0.2)]
    assisted = RunRecord("assisted", DrafterKind.ASSISTANT, 5, steps, 0.2)
    spec = SimpleNamespace(name="p", drafter=DrafterKind.ASSISTANT)
    pair = SimpleNamespace(spec=spec, device="cpu", dtype_name="float32")
    live = Live(pair, 5, RunSettings(), threading.Event())
    for record in (plain, assisted):
        live.add(RunDone(record))
    outputs = live.outputs(done=True)
    back = pickle.loads(pickle.dumps(outputs))
    assert type(back) is CompareOutputs
    for name, value in outputs._asdict().items():
        if isinstance(value, pd.DataFrame):
            assert value.equals(getattr(back, name)), name
        else:
            assert getattr(back, name) == value, name
    assert back.result["identical"] is True and len(back.race["assisted"]["chunks"]) == 2
    # Replay race updates three of these outputs, by the same names.
    assert set(ReplayOutputs._fields) <= set(CompareOutputs._fields)


ROOT = Path(__file__).resolve().parents[2]


def imported(path: Path) -> set[str]:
    """The modules a file imports, by full name (`from a import b` names a and a.b)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def packages(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


# What formats and names the tabs' values: plain values, made without a UI or a model.
FRAMEWORK_FREE = (
    "compare/format",
    "compare/chunks",
    "benchmark/format",
    "shootout/format",
    "numbers",
    "requests",
    "gpu_time",
)


def test_ui_modules_import_neither_torch_nor_each_others_frameworks():
    frameworks = {"torch", "gradio", "transformers"}
    for name in FRAMEWORK_FREE:
        assert not packages(imported(ROOT / "assisted" / "ui" / f"{name}.py")) & frameworks, name
    assert "torch" not in packages(imported(ROOT / "app.py"))
    first = ast.parse((ROOT / "app.py").read_text()).body[1]  # after the docstring
    assert isinstance(first, ast.Import) and first.names[0].name == "spaces"
    # Only app.py loads the web UI: the CLI and the benchmark never import Gradio.
    for path in (ROOT / "assisted").glob("*.py"):
        names = imported(path)
        assert "gradio" not in packages(names), path
        assert not [name for name in names if name.startswith("assisted.ui")], path


def _bench_report():
    from assisted import bench
    from assisted.core.settings import DraftSettings

    plain = RunRecord("plain", None, 5, [Step((t,), "x", 0, 0, 0.1 * t) for t in (1, 2, 3)], 1.0)
    assisted = RunRecord(
        "assisted", DrafterKind.ASSISTANT, 5, [Step((1, 2, 3), "xxx", 2, 2, 0.5)], 0.5
    )
    runs = [
        bench.Run("q1", "chat", None, 0, plain),
        bench.Run("q1", "chat", DrafterKind.ASSISTANT, 0, assisted),
    ]
    variants = [bench.Variant(DrafterKind.ASSISTANT, DrafterKind.ASSISTANT, DraftSettings())]
    info = {"pair": "p", "device": "cpu", "dtype": "float32"}
    return bench.report(runs, variants, info, RunSettings(max_new_tokens=3), 1)


def test_benchmark_tables_and_overall_line_come_from_the_report():
    result = _bench_report()
    rows = benchmark_format.bench_category_rows(result)
    identical = "1/1 (near-tie 0, unexplained 0)"
    assert rows == [["chat", "assistant", 1, "2.00×", "100%", "3.00", rows[0][6], identical]]
    assert len(rows[0]) == len(benchmark_format.CATEGORY_HEADERS)
    prompt = benchmark_format.bench_prompt_rows(result)[0]
    assert prompt[:3] == ["chat", "q1", "assistant"] and prompt[-1] == "yes"
    assert len(prompt) == len(benchmark_format.PROMPT_HEADERS)
    overall = benchmark_format.bench_overall_markdown(result)
    assert "Overall, assistant: 2.00×" in overall and "geometric mean over 1 prompt;" in overall
    assert f"identical {identical}" in overall
    assert "fitted — · acceptance" in overall  # too short to measure c: no fit
    named = (
        ("policy", "predicted 1.50× (the auto policy's"),
        ("leviathan-fitted", "fitted 1.50× (Leviathan et al., fitted to the run"),
        ("leviathan", "fitted 1.50× (Leviathan et al., fitted to the run"),  # the shorter key
    )
    for prediction, text in named:
        made = {**result["overall"], "predicted_speedup": 1.5, "prediction": prediction}
        drafters = {"drafters": {"a": {"overall": made}}}
        overall = benchmark_format.bench_overall_markdown(result | drafters)
        assert text in overall
    diverged = {**result["prompts"][0], "identical": False, "first_divergence": 7}
    row = benchmark_format.bench_prompt_rows({"prompts": [diverged | {"outcome": "near-tie"}]})
    assert row[0][-1] == "no: near-tie at token 7"


def test_benchmark_plan_and_progress_lines():
    assert benchmark_format.bench_runs(prompts=5, drafters=2, repeats=3) == 45
    # 10 timed runs of 64 tokens and 10 warm-ups of 8, at 0.5 s per token: 6 min.
    assert benchmark_format.bench_estimate_s(5, 1, 1, 64) == (10 * 64 + 10 * 8) * 0.5
    plan = benchmark_format.bench_plan_markdown(5, 1, 1, 64)
    assert "10 timed runs" in plan and "6 min" in plan
    assert "at least one category" in benchmark_format.bench_plan_markdown(0, 1, 1, 64)
    assert "10 timed runs" in benchmark_format.bench_warning(5, 1, 1, 64)
    # Nothing measured on the pair yet: the plan says the figure is a guess.
    assert "no run has been measured on this pair yet" in plan
    assert "rough guess of ≈0.5 s per token" in plan
    assert "a guess: none measured" in benchmark_format.bench_warning(5, 1, 1, 64)
    line = benchmark_format.bench_progress_markdown(2, 10, "chat / q1: plain", 20.0)
    assert "Run 2 of 10 done**: chat / q1: plain" in line and "80 s left" in line
    assert "untimed" in benchmark_format.bench_progress_markdown(2, 10, "chat / q2: warm-up", 20.0)
    assert "All 10 runs done" in benchmark_format.bench_progress_markdown(10, 10, "x: plain", 50.0)


def test_the_benchmark_estimate_uses_the_pace_measured_on_the_pair():
    paces = Paces()
    assert paces.of("t") is None
    # A comparison whose plain run decoded 20 tokens/s after its first step.
    paces.note_comparison("t", "p", {"plain": {"decode_tokens_per_s": 20.0}, "assisted": None})
    pace = paces.of("t")
    assert pace.s_per_token == 0.05 and "latest plain run on p" in pace.source
    assert (
        benchmark_format.bench_estimate_s(5, 1, 1, 64, pace.s_per_token)
        == (10 * 64 + 10 * 8) * 0.05
    )
    plan = benchmark_format.bench_plan_markdown(5, 1, 1, 64, pace)
    assert "about **36 s** at ≈50 ms per token, measured in the latest plain run on p" in plan
    assert "guess" not in plan
    assert "about 36 s at the measured pace" in benchmark_format.bench_warning(5, 1, 1, 64, pace)
    slow = Pace(0.42, "measured in the latest plain run on q here")
    assert "≈0.42 s per token" in benchmark_format.bench_plan_markdown(5, 1, 1, 64, slow)


def test_a_targets_pace_comes_from_its_latest_plain_run_else_from_an_auto_runs_one_row_time():
    paces = Paces()
    # No plain figure (stopped within two steps): an auto run's T(1) stands in.
    auto = {"plain": {"decode_tokens_per_s": None}, "assisted": {"verify_cost_s": [[1, 0.3]]}}
    paces.note_comparison("t", "p", auto)
    assert paces.of("t").s_per_token == 0.3 and "one row on p" in paces.of("t").source
    # The benchmark's plain runs: 1 s between the first and the last of 3 steps, 2 tokens.
    plain = RunRecord("plain", None, 5, [Step((t,), "x", 0, 0, 0.5 * t) for t in (1, 2, 3)])
    paces.note_plain_run("t", "q", plain)  # another pair with the same target
    assert paces.of("t").s_per_token == 0.5 and "plain run on q" in paces.of("t").source
    # A plain figure is not replaced by a one-row time; assisted runs set nothing.
    paces.note_comparison("t", "p", auto)
    paces.note_plain_run("t", "p", RunRecord("assisted", DrafterKind.ASSISTANT, 5, plain.steps))
    assert paces.of("t").s_per_token == 0.5 and paces.of("other") is None


def test_picking_auto_makes_the_draft_length_its_cap():
    from assisted.core.settings import AUTO_CAP
    from assisted.ui.compare.tab import DRAFT_CAP_LABEL, DRAFT_LENGTH_LABEL, on_schedule_change

    auto = on_schedule_change("auto", 3.0)
    assert auto["value"] == AUTO_CAP and auto["label"] == DRAFT_CAP_LABEL
    assert on_schedule_change("auto", 12.0)["value"] == 12  # a longer length stays
    constant = on_schedule_change("constant", 8.0)
    assert "value" not in constant and constant["label"] == DRAFT_LENGTH_LABEL


def _sampled_steps() -> list[Step]:
    """A step whose second candidate was rejected, then one that accepted its draft."""
    rejected = Step(
        (1, 9),
        "ab",
        3,
        1,
        0.2,
        (1, 5, 6),
        "a",
        "cd",
        draft_p=(0.9, 0.1, 0.3),
        draft_q=(0.3, 0.2, 1.0),
    )
    whole = Step((7, 8), "ef", 1, 1, 0.3, (7,), "e", "", draft_p=(0.5,), draft_q=(0.5,))
    return [rejected, whole]


def test_a_sampled_step_shows_each_drafts_p_q_and_chance_and_marks_the_targets_token():
    record = RunRecord("assisted", DrafterKind.ASSISTANT, 5, _sampled_steps(), sampled=True)
    chunks = chunk_view.chunks_of(record, [["a", "c", "d"], ["e"]])
    lines = compare_format.step_details(1, chunks[0])
    assert "“a”: p 0.9 · q 0.3 · min(1, p/q) 1 · accepted" in lines
    assert "“c”: p 0.1 · q 0.2 · min(1, p/q) 0.5 · rejected" in lines
    assert "“d”: p 0.3 · q 1 · min(1, p/q) 0.3 · after the rejection" in lines
    assert lines[-1].startswith("then the target's own token: “b”, corrected: after the rejection")
    assert compare_format.step_details(2, chunks[1])[-1].endswith(
        "a bonus: every candidate was accepted, so drawn from p at no extra step"
    )
    page = compare_format.run_html(chunks, "assisted")
    assert '<span class="own corrected">b</span>' in page
    assert '<span class="own bonus">f</span>' in page
    greedy = RunRecord("assisted", DrafterKind.ASSISTANT, 5, _sampled_steps())
    page = compare_format.run_html(chunk_view.chunks_of(greedy), "assisted")
    assert "corrected" not in page and "bonus" not in page and "p/q" not in page


def test_a_sampled_card_and_summary_set_the_expected_acceptance_beside_the_observed():
    plain = RunRecord("plain", None, 5, [Step((t,), "x", 0, 0, 0.1 * t) for t in (1, 2, 3)], 0.3)
    assisted = RunRecord("assisted", DrafterKind.ASSISTANT, 5, _sampled_steps(), 0.3, sampled=True)
    plain.sampled = True
    result = report("p", "cpu", "float32", plain, assisted)
    # Expected (1 + 0.5 + 0.5 · 0.3 + 1) / 4 drafted; 2 of 4 accepted.
    assert ("expected acceptance", "66%") in compare_format.stat_rows(result["assisted"])
    text = compare_format.summary_markdown(result)
    assert "**Acceptance**: observed 50.0%, expected 66.2% ± " in text
    greedy = report("p", "cpu", "float32", *_records([1, 2, 3], [Step((1, 2, 3), "x", 2, 2, 0.5)]))
    assert "expected acceptance" not in dict(compare_format.stat_rows(greedy["assisted"]))
    assert "**Acceptance**" not in compare_format.summary_markdown(greedy)


def test_two_sampled_runs_that_part_have_no_token_marked_as_a_divergence():
    plain = RunRecord("plain", None, 5, [Step((t,), "x", 0, 0, 0.1 * t) for t in (1, 2, 3)], 0.3)
    assisted = RunRecord("assisted", DrafterKind.ASSISTANT, 5, _sampled_steps(), 0.3)
    spec = SimpleNamespace(name="p", drafter=DrafterKind.ASSISTANT)
    tokenizer = SimpleNamespace(decode=lambda ids, **kwargs: "x" * len(ids))
    pair = SimpleNamespace(spec=spec, device="cpu", dtype_name="float32", tokenizer=tokenizer)
    for sample in (False, True):
        plain.sampled = assisted.sampled = sample
        live = Live(pair, 5, RunSettings(sample=sample), threading.Event())
        for record in (plain, assisted):
            live.add(RunDone(record))
        outputs = live.outputs(done=True)
        marked = 'class="diverged"' in outputs.plain_text + outputs.assisted_text
        assert marked is not sample  # greedy runs mark where they part; sampled never


def test_a_lane_measured_above_its_oracle_reads_above_it_in_the_ranking():
    lane = {
        "lane": "prompt lookup",
        "speedup": 1.4,
        "acceptance_rate": 0.5,
        "tokens_per_step": 1.6,
        "drafting_s_per_token": 0.0,
        "drafting_cost_ratio": 0.0,
        "oracle_speedup": 1.09,
        "outcome": "identical",
    }
    rows = shootout_format.ranking_rows(
        {"lanes": [lane | {"measured_share": share} for share in (1.28, 0.9, None)]}
    )
    column = shootout_format.RANKING_HEADERS.index("share of the oracle")
    assert [row[column] for row in rows] == ["above the oracle (×1.28)", "90%", "—"]


def test_the_benchmark_note_says_what_a_benchmark_costs_on_the_device_it_runs_on():
    cpu = benchmark_format.device_note("cpu", zerogpu=False)
    gpu = benchmark_format.device_note("cuda", zerogpu=False)
    zerogpu = benchmark_format.device_note("cuda", zerogpu=True)
    assert "many minutes" in cpu and "many minutes" not in gpu + zerogpu
    assert "one request at a time" in cpu and "one request at a time" in gpu
    assert "one request at a time" not in zerogpu and "several calls" in zerogpu
