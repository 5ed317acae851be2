"""The benchmark: aggregation on hand-made records, input errors before any model loads, and
end-to-end runs on tiny models built here (an assistant that is a copy of the target, so
every draft is accepted and the output is identical)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from assisted import bench
from assisted.analysis import stats
from assisted.bench import __main__ as command
from assisted.core.record import RunRecord, Step
from assisted.core.settings import WARMUP_TOKENS, DrafterKind, DraftSettings, Example, RunSettings
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models import pairs
from tests.tiny import build_model, build_tokenizer

FAST = ["--max-new-tokens", "8", "--device", "cpu", "--dtype", "float32"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-models")
    tokenizer = build_tokenizer(root / "tokenizer")
    build_model(root / "target", tokenizer, seed=1)
    build_model(root / "assistant", tokenizer, seed=1)
    return ["--target", str(root / "target"), "--assistant", str(root / "assistant")]


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [
        {"question_id": "add", "category": "write-code", "turns": ["def add(a, b):"]},
        {"category": "summarise", "turns": ["Summarise the following text: the quick fox."]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def near(value):
    """Figures in the report are rounded to 4 decimals."""
    return pytest.approx(value, abs=1e-4)


def run_main(capsys, argv):
    code = command.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- aggregation ------------------------------------------------------------------------------


def record(mode, steps, total_s):
    """steps: (tokens, drafted, accepted) per step; token ids are just 1, 2, 3, ..."""
    made, next_id = [], 1
    for tokens, drafted, accepted in steps:
        ids = tuple(range(next_id, next_id + tokens))
        next_id += tokens
        made.append(Step(ids, "", drafted, accepted, t_s=total_s * len(made) / len(steps)))
    drafter = "assistant" if mode == "assisted" else None
    return RunRecord(mode, drafter, prompt_tokens=5, steps=made, total_s=total_s)


def plain(total_s):
    return record("plain", [(1, 0, 0)] * 10, total_s)


def runs_for(question_id, category, plain_runs, assisted_runs):
    made = [bench.Run(question_id, category, None, i, r) for i, r in enumerate(plain_runs)]
    made += [
        bench.Run(question_id, category, "assistant", i, r) for i, r in enumerate(assisted_runs)
    ]
    return made


def test_category_aggregation_on_hand_made_records():
    # p1: 10 tok/s plain, 20 tok/s assisted → 2.0x; 8 drafted, 6 accepted over 4 steps.
    fast = record("assisted", [(4, 4, 3), (4, 4, 3), (1, 0, 0), (1, 0, 0)], total_s=0.5)
    # p2: 10 tok/s plain, 5 tok/s assisted → 0.5x; 10 drafted, 2 accepted over 8 steps.
    slow = record("assisted", [(2, 5, 1), (2, 5, 1), *[(1, 0, 0)] * 6], total_s=2.0)
    # p3, another category: 1.0x.
    even = record("assisted", [(1, 0, 0)] * 10, total_s=1.0)
    runs = (
        runs_for("p1", "code", [plain(1.0)], [fast])
        + runs_for("p2", "code", [plain(1.0)], [slow])
        + runs_for("p3", "chat", [plain(1.0)], [even])
    )
    variants = [bench.Variant("assistant", "assistant", DraftSettings())]
    info = {"pair": "hand-made", "device": "cpu", "dtype": "float32"}
    result = bench.report(runs, variants, info, RunSettings(), repeats=1)

    code = result["categories"]["code"]
    assert code["speedup"] == near(1.25)  # median of 2.0 and 0.5
    assert code["speedup_geomean"] == near(1.0)
    assert code["acceptance_rate"] == near(8 / 18)  # pooled, not mean of rates
    assert code["tokens_per_step"] == near(20 / 12)
    assert code["prompts"] == 2
    assert code["identical"] is True
    assert [row["question_id"] for row in result["prompts"]] == ["p1", "p2", "p3"]
    assert result["overall"]["speedup_geomean"] == near(1.0)
    assert result["overall"]["prompts"] == 3
    assert result["drafters"]["assistant"]["categories"] == result["categories"]


def test_prompt_speedup_is_ratio_of_medians_over_repeats():
    plains = [plain(1.0), plain(1.2), plain(5.0)]  # median 10 / 1.2 tok/s; 5.0 is an outlier
    assisted = [record("assisted", [(2, 1, 1)] * 5, s) for s in (0.5, 0.6, 0.4)]
    row = bench.summarize_prompt(plains, assisted)
    assert row["plain_tokens_per_s"] == near(10 / 1.2)
    assert row["assisted_tokens_per_s"] == near(20.0)
    assert row["speedup"] == near(20.0 / (10 / 1.2))
    assert row["acceptance_rate"] == 1.0
    assert row["tokens_per_step"] == 2.0
    assert row["repeats"] == 3


def test_a_prompt_row_carries_the_auto_schedules_cost_curve():
    assisted = record("assisted", [(2, 1, 1)] * 5, 0.5)
    assert bench.summarize_prompt([plain(1.0)], [assisted])["verify_cost_s"] == []
    assisted.verify_cost_s = [(1, 0.01), (2, 0.0123456)]
    row = bench.summarize_prompt([plain(1.0)], [assisted])
    assert row["verify_cost_s"] == [[1, 0.01], [2, 0.012346]]


def auto_record(expected_tokens: float, cost: float, total_s: float = 0.5) -> RunRecord:
    """An `auto` run of 5 steps of 2 tokens, each expected to commit `expected_tokens`
    tokens at `cost` plain steps of 0.1 s."""
    made = record("assisted", [(2, 1, 1)] * 5, total_s)
    expected = {"expected_tokens": expected_tokens, "expected_s": cost * 0.1, "plain_step_s": 0.1}
    made.steps = [dataclasses.replace(step, chosen=1, **expected) for step in made.steps]
    return made


def test_an_auto_prompt_and_its_groups_carry_the_policys_prediction():
    runs = runs_for("p1", "code", [plain(1.0)] * 3, [auto_record(3.0, 1.5)] * 3)
    runs += runs_for("p2", "code", [plain(1.0)], [auto_record(2.0, 1.0)])  # 2.0 as well
    runs += runs_for("p3", "chat", [plain(1.0)], [auto_record(1.0, 2.0)])  # 0.5
    timed = record("assisted", [(2, 1, 1)] * 5, 0.5)
    timed.draft_forward_s = [0.01] * 5  # so that the cost ratio c is measured
    constant = runs_for("p1", "code", [plain(1.0)], [timed])
    variants = [bench.Variant("assistant", "assistant", DraftSettings(schedule="auto"))]
    info = {"pair": "hand-made", "device": "cpu", "dtype": "float32"}
    result = bench.report(runs, variants, info, RunSettings(), repeats=3)
    p1, p2, p3 = result["prompts"]
    assert (p1["predicted_speedup"], p1["prediction"]) == (2.0, "policy")
    assert p2["predicted_speedup"] == 2.0
    assert (p3["predicted_speedup"], p3["prediction"]) == (0.5, "policy")
    assert result["categories"]["code"]["prediction"] == "policy"
    overall = result["overall"]
    assert overall["predicted_speedup"] == 2.0  # the median of 2.0, 2.0 and 0.5
    assert overall["predicted_speedup_geomean"] == near((2.0 * 2.0 * 0.5) ** (1 / 3))
    assert overall["prediction"] == "policy"
    ratios = [row["predicted_speedup"] / row["speedup"] for row in (p1, p2, p3)]
    assert overall["predicted_over_measured"] == near(math.prod(ratios) ** (1 / 3))
    assert "predicted 2.00x (the auto policy's expectations)" in bench.render(result)
    assert f"÷ measured, geomean {overall['predicted_over_measured']:.2f}" in bench.render(result)
    # A constant schedule's runs carry no expectations: Leviathan et al.'s model, as before.
    result = bench.report(constant, variants, info, RunSettings(), repeats=1)
    assert result["prompts"][0]["prediction"] == result["overall"]["prediction"] == stats.LEVIATHAN
    assert stats.LEVIATHAN == "leviathan-fitted" and "fitted " in bench.render(result)


def test_auto_is_a_schedule_the_benchmark_sweeps():
    spec = pairs.custom_pair("some/target", "some/assistant")
    variants = bench.plan_variants(spec, ["assistant"], {"schedule": ["constant", "auto"]})
    assert [v.draft.schedule for v in variants] == ["constant", "auto"]


def test_identical_needs_every_repeat_to_match_its_plain_run():
    same = record("assisted", [(1, 0, 0)] * 10, 1.0)
    other = record("assisted", [(1, 0, 0)] * 9, 1.0)  # stops one token early
    row = bench.summarize_prompt([plain(1.0), plain(1.0)], [same, other])
    assert row["identical"] is False
    assert row["first_divergence"] == 9


def test_variants_name_only_the_swept_settings():
    spec = pairs.custom_pair("some/target", "some/assistant")
    sweeps = {"num_assistant_tokens": [3, 8], "confidence_threshold": [0.4]}
    variants = bench.plan_variants(spec, ["assistant", "prompt-lookup"], sweeps)
    assert [v.name for v in variants] == ["assistant n=3", "assistant n=8", "prompt-lookup"]
    assert variants[1].draft.num_assistant_tokens == 8
    assert variants[1].draft.confidence_threshold == 0.4
    assert variants[2].draft == spec.draft


def test_assistant_precisions_sweep_model_drafters_only():
    spec = pairs.custom_pair("some/target", "some/assistant")
    sweeps = {"assistant_quant": ["none", "int8", "int4-wo"]}
    variants = bench.plan_variants(spec, ["assistant", "prompt-lookup"], sweeps)
    assert [v.name for v in variants] == [
        "assistant quant=none",
        "assistant quant=int8",
        "assistant quant=int4-wo",
        "prompt-lookup",
    ]
    assert [v.draft.assistant_quant for v in variants[:3]] == ["none", "int8", "int4-wo"]
    with pytest.raises(bench.BenchError, match="--assistant-quant does not apply"):
        bench.plan_variants(spec, ["prompt-lookup"], sweeps)


def test_explicit_variants_keep_exactly_their_settings():
    spec = pairs.custom_pair("some/target", "some/assistant")
    texts = ["schedule=constant,num-assistant-tokens=2", "schedule=auto,num_assistant_tokens=8"]
    variants = [bench.parse_variant(spec, text, "assistant") for text in texts]
    assert [v.name for v in variants] == [
        "assistant schedule=constant n=2",
        "assistant schedule=auto n=8",
    ]
    assert variants[1].draft == dataclasses.replace(
        spec.draft, schedule="auto", num_assistant_tokens=8
    )
    lookup = bench.parse_variant(spec, "drafter=prompt-lookup,prompt-lookup-num-tokens=4", "x")
    assert lookup.drafter == "prompt-lookup" and lookup.draft.prompt_lookup_num_tokens == 4


def test_an_ngram_size_is_refused_unless_transformers_lookup_takes_it():
    """The suffix lookup (the default) matches 2 to 8 tokens: an n-gram size would be ignored."""
    spec = pairs.custom_pair("some/target", "some/assistant")
    sweeps = {"max_matching_ngram_size": [2, 3]}
    with pytest.raises(bench.BenchError, match="applies to lookup=transformers, not suffix"):
        bench.plan_variants(spec, ["prompt-lookup"], sweeps)
    taken = bench.plan_variants(spec, ["prompt-lookup"], sweeps | {"lookup": ["transformers"]})
    assert [v.draft.max_matching_ngram_size for v in taken] == [2, 3]
    with pytest.raises(bench.BenchError, match="applies to lookup=transformers"):
        bench.parse_variant(spec, "drafter=prompt-lookup,max-matching-ngram-size=3", "x")
    text = "drafter=prompt-lookup,lookup=transformers,max-matching-ngram-size=3"
    assert bench.parse_variant(spec, text, "x").draft.max_matching_ngram_size == 3


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("schedule", "expected KEY=VALUE"),
        ("colour=red", "unknown setting 'colour'"),
        ("num-assistant-tokens=many", "must be a whole number"),
        ("drafter=prompt-lookup,num-assistant-tokens=3", "does not apply to prompt-lookup"),
        ("schedule=sometimes", "schedule must be one of"),
    ],
)
def test_a_malformed_variant_says_what_is_wrong(text, error):
    spec = pairs.custom_pair("some/target", "some/assistant")
    with pytest.raises(bench.BenchError, match=error):
        bench.parse_variant(spec, text, "assistant")


def test_variants_and_sweeps_do_not_mix(capsys, no_loading):
    argv = ["--variant", "schedule=auto", "--num-assistant-tokens", "2,3"]
    code, _, stderr = run_main(capsys, argv)
    assert code == 2 and "drop --num-assistant-tokens" in stderr
    code, _, stderr = run_main(capsys, ["--variant", "schedule=auto", "--variant", "schedule=auto"])
    assert code == 2 and "same settings" in stderr


def test_limit_is_per_category():
    examples = [Example(str(i), c, "x") for i, c in enumerate("aabbb")]
    kept = bench.select_examples(examples, ["b"], limit=2)
    assert [e.question_id for e in kept] == ["2", "3"]


# -- input errors: one line on stderr, exit code 2, no model loaded, nothing written ---------


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(command, "load_pair", refuse)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--categories", "poetry"], "no prompts in category poetry"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--max-new-tokens", "0"], "max new tokens must be between"),
        (["--drafters", "assistant"], "has no assistant model"),
        (["--drafters", "guessing"], "unknown drafter 'guessing'"),
        (["--drafters", "early-exit", "--num-assistant-tokens", "0,4"], "draft length must be"),
        (["--num-assistant-tokens", "4"], "does not apply to the drafters here: prompt-lookup"),
        (["--assistant-quant", "int8"], "does not apply to the drafters here: prompt-lookup"),
        (
            ["--assistant", "x/y", "--target", "a/b", "--assistant-quant", "none,int3"],
            "assistant precision must be one of",
        ),
        (["--assistant", "x/y"], "--assistant and --drafter go with --target"),
    ],
)
def test_bad_options_are_refused_before_loading(
    capsys, jsonl, no_loading, tmp_path, extra, message
):
    pair = [] if "--assistant" in extra else ["--target", "some/model"]
    out = tmp_path / "out"
    code, stdout, stderr = run_main(
        capsys, ["--prompts", str(jsonl), *pair, *extra, "--out", str(out)]
    )
    assert code == 2
    assert stderr.startswith("error: ") and message in stderr
    assert stdout == ""
    assert not out.exists()


def test_malformed_jsonl_names_file_and_line(capsys, tmp_path, no_loading):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"category": "chat", "turns": ["hi"]}\n{"category": "chat", "turns": \n')
    code, _, stderr = run_main(capsys, ["--prompts", str(path)])
    assert code == 2
    assert f"{path}:2: not valid JSON" in stderr


def test_missing_prompt_file_is_an_error(capsys, tmp_path, no_loading):
    code, _, stderr = run_main(capsys, ["--prompts", str(tmp_path / "nowhere.jsonl")])
    assert code == 2 and "no such file or folder" in stderr


def test_failure_after_loading_writes_nothing(capsys, models, jsonl, tmp_path):
    # The tiny models have a 256-token context: 300 new tokens cannot fit.
    out = tmp_path / "out"
    argv = ["--prompts", str(jsonl), *models, *FAST, "--max-new-tokens", "300"]
    code, stdout, stderr = run_main(capsys, [*argv, "--out", str(out)])
    assert code == 2 and "exceeds the model's context" in stderr
    assert stdout == "" and not out.exists()


# -- end to end on tiny models ---------------------------------------------------------------


def test_jsonl_end_to_end_with_two_drafters(capsys, models, jsonl, tmp_path):
    out = tmp_path / "out"
    argv = ["--prompts", str(jsonl), *models, *FAST, "--repeats", "2", "--out", str(out)]
    code, stdout, _ = run_main(capsys, [*argv, "--drafters", "assistant,prompt-lookup"])
    assert code == 0
    card, last = stdout.rstrip("\n").rsplit("\n", 1)
    result = json.loads(last)

    assert {"pair", "device", "dtype", "overall", "categories", "prompts"} <= result.keys()
    assert result["device"] == "cpu" and result["dtype"] == "float32"
    assert result["drafter"] == "assistant"
    assert set(result["drafters"]) == {"assistant", "prompt-lookup"}
    assert result["overall"]["speedup_geomean"] > 0
    assert set(result["categories"]) == {"write-code", "summarise"}
    for category in result["categories"].values():
        for field in ("speedup", "acceptance_rate", "tokens_per_step", "predicted_speedup"):
            assert field in category
    assert len(result["prompts"]) == 4  # two prompts × two drafters
    for row in result["prompts"]:
        for field in (
            "question_id",
            "category",
            "drafter",
            "speedup",
            "plain_tokens_per_s",
            "assisted_tokens_per_s",
            "acceptance_rate",
            "identical",
        ):
            assert field in row
        assert row["identical"] is True  # greedy decoding is lossless
    by_drafter = {(r["question_id"], r["drafter"]): r for r in result["prompts"]}
    # The assistant is a copy of the target: every draft is accepted.
    assert by_drafter[("add", "assistant")]["acceptance_rate"] == 1.0
    assert by_drafter[("prompts-2", "prompt-lookup")]["question_id"] == "prompts-2"

    assert "Per prompt" in card and "Per category" in card and "Overall, assistant" in card
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2 * 2 * 3  # prompts × repeats × (plain + two drafters)
    assert {r["drafter"] for r in runs} == {None, "assistant", "prompt-lookup"}
    assert {"question_id", "category", "drafter", "repeat", "record"} <= runs[0].keys()
    assert RunRecord.from_dict(runs[0]["record"]).steps
    assert json.loads((out / "report.json").read_text()) == result
    assert (out / "speedup.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out-")] == []


def test_examples_folder_end_to_end_with_overhead(capsys, models, tmp_path):
    folder = tmp_path / "examples"
    (folder / "edit-code").mkdir(parents=True)
    (folder / "edit-code" / "add.txt").write_text("Rename b to c: def add(a, b): return a + b\n")
    argv = ["--prompts", str(folder), *models, *FAST, "--repeats", "1", "--overhead"]
    code, stdout, _ = run_main(capsys, argv)
    assert code == 0
    result = json.loads(stdout.splitlines()[-1])
    assert list(result["categories"]) == ["edit-code"]
    assert result["prompts"][0]["question_id"] == "add"
    assert isinstance(result["overall"]["overhead_pct"], float)
    assert isinstance(result["overall"]["assisted_overhead_pct"], float)
    assert "Backend overhead:" in stdout and "Backend overhead, assisted:" in stdout


def test_prompt_lookup_shares_the_loaded_target(models):
    spec = pairs.custom_pair(models[1], models[3])
    pair = pairs.load_pair(spec, device="cpu", dtype="float32")
    lookup = bench.with_drafter(pair, "prompt-lookup")
    assert lookup.target is pair.target and lookup.assistant is None
    assert lookup.spec.drafter == "prompt-lookup" and pair.spec.drafter == "assistant"
    assert bench.with_drafter(pair, "assistant") is pair


def test_timed_runs_alternate_order_by_round_and_by_prompt(models, monkeypatch):
    """Plain first, then the variants; the next round reversed; and each prompt starts the
    other way round from the one before: (prompt index + repeat) odd means reversed."""
    from assisted.engine import decoding

    pair = pairs.load_pair(pairs.custom_pair(models[1], models[3]), "cpu", "float32")
    kinds = [DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP]
    variants = bench.plan_variants(pair.spec, kinds, {"num_assistant_tokens": [2, 3]})
    examples = [Example(f"q{i}", "chat", f"prompt {i}") for i in range(3)]
    settings = RunSettings(max_new_tokens=WARMUP_TOKENS + 4)  # longer than a warm-up
    prompt_of = {
        tuple(encode_prompt(pair, e.prompt, settings.chat_template)): e.question_id
        for e in examples
    }
    variant_of = {(v.drafter, v.draft): v.name for v in variants}
    timed = []

    def fake_run(drafter, ids, mode, run_settings, draft=None, stop=None, prepared=None):
        if run_settings.max_new_tokens == settings.max_new_tokens:  # not a warm-up
            name = variant_of[drafter.spec.drafter, draft] if mode == "assisted" else "plain"
            timed.append((prompt_of[tuple(ids)], name))
        yield RunDone(record(mode, [(1, 0, 0)] * 4, total_s=0.1))

    monkeypatch.setattr(decoding, "warm_up", lambda *args, **kwargs: None)
    monkeypatch.setattr(decoding, "run", fake_run)
    events = list(bench.benchmark(pair, examples, variants, settings, repeats=2))

    forward = ["plain", *(v.name for v in variants)]  # two assistant variants, prompt lookup
    backward = forward[::-1]
    rounds = [("q0", forward), ("q0", backward), ("q1", backward), ("q1", forward)]
    rounds += [("q2", forward), ("q2", backward)]
    expected = [(prompt, run) for prompt, order in rounds for run in order]
    assert timed == expected
    finished = events[-1]
    assert isinstance(finished, bench.Finished)
    assert [(r.question_id, r.drafter or "plain") for r in finished.runs] == expected


def test_every_timed_run_of_a_prompt_starts_from_what_the_earlier_prompts_taught(
    models, monkeypatch
):
    """Each assisted run "learns" by counting itself into the pair's acceptance; a timed run
    must start from the count the earlier prompts left (their warm-ups and timed runs), never
    from its own prompt's warm-up or earlier repeats."""
    from assisted.engine import decoding

    pair = pairs.load_pair(pairs.custom_pair(models[1], models[3]), "cpu", "float32")
    variants = bench.plan_variants(pair.spec, ["assistant"], {"num_assistant_tokens": [2, 3]})
    examples = [Example(f"q{i}", "chat", f"prompt {i}") for i in range(3)]
    settings = RunSettings(max_new_tokens=WARMUP_TOKENS + 4)
    key = (DrafterKind.ASSISTANT, False)
    started_from = []

    def fake_run(drafter, ids, mode, run_settings, draft=None, stop=None, prepared=None):
        if mode == "assisted":
            learnt = drafter.learnt.precision("none").acceptance
            seen = learnt.get(key, ([0.0], [0.0]))[1][0]
            if run_settings.max_new_tokens == settings.max_new_tokens:  # not a warm-up
                started_from.append(seen)
            learnt[key] = ([0.0], [seen + 1])  # this run learnt something
        yield RunDone(record(mode, [(1, 0, 0)] * 4, total_s=0.1))

    monkeypatch.setattr(decoding, "warm_up", lambda *args, **kwargs: None)
    monkeypatch.setattr(decoding, "run", fake_run)
    # What runs before the benchmark taught, in this process or read from an earlier one's
    # file, is not where it starts.
    pair.learnt.precision("none").acceptance[key] = ([0.0], [7.0])
    list(bench.benchmark(pair, examples, variants, settings, repeats=2))
    # Per prompt: 2 warm-ups, then 2 repeats × 2 variants, each timed run starting from what
    # the prompt started with; the next prompt starts from what its last timed run left.
    assert started_from == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]


def test_the_benchmark_keeps_its_costs_but_never_its_acceptance_in_the_learnt_file(
    models, monkeypatch, tmp_path
):
    """Each assisted run saves what it learnt, as `learning.keep_learnt` does: the costs reach
    the file, the benchmark's acceptance neither reaches it nor stays in the pair."""
    from assisted.engine import decoding
    from assisted.models import learnt_store
    from assisted.policy.learnt import LearntState

    file = learnt_store.LearntFile(tmp_path / "p.json", {"pair": "p"})
    key = (DrafterKind.ASSISTANT, False, 0)
    app = LearntState(verify_s={1: 0.5})
    app.precision("none").acceptance[key] = ([6.0], [7.0])  # what the app learnt
    learnt_store.save(file, app)
    loaded = pairs.load_pair(pairs.custom_pair(models[1], models[3]), "cpu", "float32")
    pair = dataclasses.replace(loaded, learnt=learnt_store.load(file), learnt_file=file)
    variants = bench.plan_variants(pair.spec, ["assistant"])
    settings = RunSettings(max_new_tokens=WARMUP_TOKENS + 4)

    def fake_run(drafter, ids, mode, run_settings, draft=None, stop=None, prepared=None):
        if mode == "assisted":
            drafter.learnt.precision("none").acceptance[key] = ([0.0], [1.0])
            drafter.learnt.verify_s[2] = 0.25
            learnt_store.save(drafter.learnt_file, drafter.learnt)
        yield RunDone(record(mode, [(1, 0, 0)] * 4, total_s=0.1))

    monkeypatch.setattr(decoding, "warm_up", lambda *args, **kwargs: None)
    monkeypatch.setattr(decoding, "run", fake_run)
    list(bench.benchmark(pair, [Example("q", "chat", "prompt")], variants, settings, repeats=1))
    on_disk = learnt_store.load(file)
    assert on_disk.verify_s == {1: 0.5, 2: 0.25}
    assert on_disk.precision("none").acceptance == {key: ([6.0], [7.0])}
    assert pair.learnt == on_disk  # the pair's own acceptance is back


def test_stop_ends_the_benchmark_within_a_step_without_a_report(models):
    pair = pairs.load_pair(pairs.custom_pair(models[1], models[3]), "cpu", "float32")
    examples = [Example("long", "write-code", "def add(a, b):")]
    variants = bench.plan_variants(pair.spec, ["assistant"])
    stop = threading.Event()
    events = []
    for event in bench.benchmark(
        pair, examples, variants, RunSettings(max_new_tokens=200), repeats=3, stop=stop
    ):
        events.append(event)
        if isinstance(event, bench.Progress) and event.label.endswith("warm-up"):
            stop.set()  # the warm-up and the first timed run end at once
    assert not any(isinstance(event, bench.Finished) for event in events)
    assert events[-1].done == 0  # no timed run was completed, let alone reported


def test_runs_whose_drafts_copied_the_template_are_counted_per_prompt_and_overall():
    assisted = record("assisted", [(2, 1, 1)] * 5, 0.5)
    runs = runs_for("p1", "code", [plain(1.0)] * 2, [assisted] * 2)
    runs += runs_for("p2", "chat", [plain(1.0)], [assisted])
    counts = iter([2, 0, 0])  # template copies in p1's two runs, then in p2's one
    runs = [
        r if r.drafter is None else dataclasses.replace(r, template_drafts=next(counts))
        for r in runs
    ]
    variants = [bench.Variant("assistant", "assistant", DraftSettings())]
    info = {"pair": "hand-made", "device": "cpu", "dtype": "float32"}
    result = bench.report(runs, variants, info, RunSettings(), repeats=2)
    assert [p["template_draft_runs"] for p in result["prompts"]] == [1, 0]
    overall = result["overall"]
    assert (overall["template_draft_runs"], overall["assisted_runs"]) == (1, 3)
    assert "drafts copied the chat template in 1 of 3 runs" in bench.render(result)
    assert runs[2].to_dict()["template_drafts"] == 2
    uncounted = bench.report(
        runs_for("p1", "code", [plain(1.0)], [assisted]), variants, info, RunSettings(), repeats=1
    )
    assert uncounted["overall"]["template_draft_runs"] is None


def test_a_run_counts_the_steps_whose_lookup_draft_copied_the_template():
    from assisted.bench.measuring import _Session

    variant = bench.Variant("lookup", "prompt-lookup", DraftSettings())
    session = _Session(None, [variant], {}, RunSettings(), 1, None, 1)
    session.templates["lookup"] = (frozenset({90}), frozenset({(20, 21, 22, 23)}))
    lookup, model = DrafterKind.PROMPT_LOOKUP, DrafterKind.ASSISTANT
    steps = [
        Step((5,), "", 4, 0, 0.1, draft_ids=(7, 20, 21, 22, 23), source=lookup),  # its text
        Step((5,), "", 2, 0, 0.2, draft_ids=(7, 90), source=lookup),  # a special token
        Step((5,), "", 2, 0, 0.3, draft_ids=(7, 8), source=lookup),
        Step((5,), "", 2, 0, 0.4, draft_ids=(7, 90), source=model),  # an assistant's own end
    ]
    made = RunRecord("assisted", lookup, 3, steps)
    assert session.template_drafts(variant, made) == 2


def test_the_benchmark_counts_template_copies_of_each_assisted_run(capsys, models, tmp_path):
    folder = tmp_path / "examples"
    (folder / "chat").mkdir(parents=True)
    (folder / "chat" / "hi.txt").write_text("Say hello, then say hello again.\n")
    argv = [
        "--prompts",
        str(folder),
        *models,
        *FAST,
        "--repeats",
        "1",
        "--drafters",
        "prompt-lookup,assistant",
        "--lookup",
        "transformers",
    ]
    code, stdout, _ = run_main(capsys, argv)
    assert code == 0
    result = json.loads(stdout.splitlines()[-1])
    assert all(isinstance(p["template_draft_runs"], int) for p in result["prompts"])
    assert "template runs" in stdout


def test_a_sampled_benchmark_warms_the_sampled_path(models, monkeypatch):
    from assisted.engine import decoding

    pair = pairs.load_pair(pairs.custom_pair(models[1], models[3]), "cpu", "float32")
    variants = bench.plan_variants(pair.spec, ["assistant"], {"num_assistant_tokens": [2]})
    settings = RunSettings(max_new_tokens=WARMUP_TOKENS + 4, sample=True, temperature=1.2)
    warmed = []

    def fake_run(drafter, ids, mode, run_settings, draft=None, stop=None, prepared=None):
        yield RunDone(record(mode, [(1, 0, 0)] * 4, total_s=0.1))

    def warm_up(pair, modes, draft=None, settings=None, prepared=None):
        warmed.append((modes, settings))

    monkeypatch.setattr(decoding, "warm_up", warm_up)
    monkeypatch.setattr(decoding, "run", fake_run)
    list(bench.benchmark(pair, [Example("q", "chat", "prompt")], variants, settings, repeats=1))
    assert warmed == [(("plain",), settings), (("assisted",), settings)]
