"""The oracle: its dynamic programme against brute force, its replay of a run, and the
hindsight found on tiny models (a self-draft agrees everywhere)."""

from __future__ import annotations

import json
import random
from functools import cache

import pytest

from assisted.analysis import oracle, stats
from assisted.core.record import Hindsight, RunRecord, Step
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import RunDone
from assisted.models.pairs import custom_pair, load_pair

ASSISTANT, LOOKUP = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP
AUTO = DraftSettings(num_assistant_tokens=4, schedule="auto", confidence_threshold=0.0)
CONSTANT = DraftSettings(num_assistant_tokens=4, schedule="constant", confidence_threshold=0.0)


def hindsight(runs, drafts, cap=4, verify=None, **costs) -> Hindsight:
    verify = verify or {k: 1.0 + 0.05 * (k - 1) for k in range(1, cap + 2)}
    return Hindsight(
        assistant_runs=None if runs is None else tuple(runs),
        lookup_drafts=tuple(tuple(d) for d in drafts),
        verify_s=tuple(sorted(verify.items())),
        cap=cap,
        **costs,
    )


def brute_force_s(h: Hindsight, output, prompt_tokens: int) -> float:
    """The least modelled seconds over every schedule, by exhaustive recursion."""
    costs = oracle.Costs(h, prompt_tokens)

    @cache
    def least(i: int, state: oracle.Model) -> float:
        if i == len(output):
            return 0.0
        return min(
            costs.step_s(source, gamma, state, i) + least(i + n, oracle.after(source, state))
            for source, gamma, n in oracle.options(h, output, i)
        )

    return least(0, oracle.Model.UNSTARTED)


@pytest.mark.parametrize("seed", range(20))
def test_the_best_schedule_is_the_fastest_of_all(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 14)
    output = [rng.randint(0, 3) for _ in range(n)]
    runs = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        runs[i] = runs[i + 1] + 1 if rng.random() < 0.7 else 0
    drafts = [[rng.randint(0, 3) for _ in range(rng.randint(0, 4))] for _ in range(n)]
    verify = {k: rng.uniform(0.8, 1.6) for k in range(1, 6)}
    h = hindsight(
        runs[:-1],
        drafts,
        verify=verify,
        drafting_s=0.05,
        call_s=0.01,
        catch_up_s=0.1,
        prefill_s=0.002,
    )
    moves = oracle.best_schedule(h, output, prompt_tokens=30)
    assert sum(m.committed for m in moves) == n
    assert oracle.seconds(moves) == pytest.approx(brute_force_s(h, output, 30))


def test_with_free_verification_and_perfect_drafts_the_oracle_drafts_the_cap():
    n, cap = 20, 4
    h = hindsight(range(n, 0, -1), [[]] * n, cap=cap, verify={k: 1.0 for k in range(1, 6)})
    moves = oracle.best_schedule(h, list(range(n)), prompt_tokens=10)
    assert [m.committed for m in moves] == [5, 5, 5, 5]
    assert oracle.best_schedule(h, list(range(n)), 10)[0].source is ASSISTANT


def test_a_lookup_match_is_cut_where_it_stops_agreeing():
    output = [7, 8, 9, 1, 2]
    # At 0 the lookup proposes 7 8 9 5: three agree. Drafting is dear, verifying cheap.
    drafts = [[7, 8, 9, 5], [], [], [], []]
    verify = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 3.0}
    h = hindsight(None, drafts, verify=verify)
    first = oracle.best_schedule(h, output, prompt_tokens=5)[0]
    assert (first.source, first.gamma, first.committed) == (LOOKUP, 3, 4)


def step(ids, drafted=0, accepted=0, source=None, draft_ids=()):
    return Step(tuple(ids), "", drafted, accepted, 0.0, tuple(draft_ids), source=source)


def test_the_replay_prices_the_runs_choices_and_checks_them():
    h = hindsight(
        [2, 1, 0, 0, 0, 0],
        [[], [], [], [4, 9], [], []],
        drafting_s=0.1,
        call_s=0.02,
        catch_up_s=0.3,
        prefill_s=0.01,
    )
    record = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=10, total_s=9.0)
    record.steps = [
        step([1, 2, 3], 2, 2, ASSISTANT, [1, 2]),  # as the hindsight says: 2 accepted
        step([4, 5], 2, 1, LOOKUP, [4, 9]),  # the lookup's very proposal
        step([6], 1, 0, ASSISTANT, [8]),  # the hindsight says none: reproduced
    ]
    moves, agreeing, drafting, _ = oracle.replay(record, h)
    verify = dict(h.verify_s)
    assert [m.seconds for m in moves] == pytest.approx(
        [
            0.02 + 0.1 * 2 + verify[3] + 0.01 * 10,  # the assistant starts: its prefill
            verify[3],  # a lookup step
            0.02 + 0.1 + verify[2] + 0.3,  # the assistant catches up after skipping one
        ]
    )
    assert (agreeing, drafting) == (3, 3)
    wrong = RunRecord(**{**record.__dict__, "steps": [step([1, 2, 3], 2, 1, ASSISTANT, [1, 2])]})
    assert oracle.replay(wrong, h)[1:3] == (0, 1)


def test_a_draft_past_the_timed_curve_is_priced_along_its_last_segment_and_reported():
    # T(k) timed to 5 rows (cap 4); the run drafted 6 and 8, as Transformers' heuristic
    # schedule grows a draft past the cap.
    verify = {1: 1.0, 2: 1.2, 3: 1.3, 4: 1.4, 5: 1.5}
    h = hindsight(list(range(16, 0, -1)), [[]] * 16, verify=verify, drafting_s=0.1)
    record = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=4, total_s=5.0)
    record.steps = [
        step(range(7), 6, 6, ASSISTANT, range(6)),
        step(range(7, 16), 8, 8, ASSISTANT, range(7, 15)),
    ]
    moves, _, _, extrapolated = oracle.replay(record, h)
    assert extrapolated == [7, 9]
    assert moves[1].seconds == pytest.approx(0.1 * 8 + 1.5 + 0.1 * 4)  # T(9): 4 rows past T(5)
    record.hindsight = h
    found = oracle.report(None, record)
    assert found["reason"] is None
    assert (found["verify_rows"], found["extrapolated_rows"]) == (5, [7, 9])
    # Never cheaper than the last timed row, where the curve falls at its end.
    assert oracle.extrapolate({1: 1.0, 2: 2.0, 3: 1.5}, 9) == 1.5


def test_the_report_says_why_there_is_no_oracle_under_sampling():
    record = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=3, sampled=True)
    result = oracle.report(None, record)
    assert result["speedup_modelled"] is None
    assert result["reason"].startswith("sampled")


# -- on tiny models ------------------------------------------------------------------------


GREEDY = RunSettings(max_new_tokens=24)


def compare(pair, settings=GREEDY, draft=AUTO):
    done = {}
    for event in decoding.compare(pair, "def add(a, b):", settings, draft):
        if isinstance(event, RunDone):
            done[event.record.mode] = event.record
    return done


@pytest.fixture(scope="module")
def self_pair(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["target"]))
    return load_pair(spec, device="cpu", dtype="float32")


def test_a_self_draft_agrees_everywhere_and_the_oracle_reproduces_the_run(self_pair):
    done = compare(self_pair)  # `auto`: whether it drafts depends on the machine's timings
    output = done["assisted"].token_ids
    h = done["assisted"].hindsight
    assert h.assistant_runs == tuple(range(len(output), 0, -1))
    assert len(h.lookup_drafts) == len(h.lookup_lengths) == len(output)
    assert len(h.assistant_confidence) == len(output)
    assert all(0 < p <= 1 for p in h.assistant_confidence)
    # The constant schedule drafts at every step, priced with the calibration `auto` made.
    done = compare(self_pair, draft=CONSTANT)
    assert all(step.drafted for step in done["assisted"].steps[:-1])
    result = stats.report("self", "cpu", "float32", done["plain"], done["assisted"])["oracle"]
    assert result["reason"] is None
    assert result["agreement"] == 1.0
    # The oracle's schedule is the fastest in the model: no slower than the run's own.
    assert result["oracle_s"] <= result["auto_modelled_s"] + 1e-9
    assert sum(move["committed"] for move in result["schedule"]) == len(output)
    assert result["measured_s"] == pytest.approx(done["assisted"].total_s, abs=1e-4)


HEURISTIC = DraftSettings(num_assistant_tokens=2, schedule="heuristic", confidence_threshold=0.0)


def test_a_heuristic_draft_grown_past_the_cap_is_priced_by_a_timed_row(self_pair):
    compare(self_pair)  # `auto` calibrates the pair: T(1), T(2), T(5)
    done = compare(self_pair, RunSettings(max_new_tokens=40), HEURISTIC)
    longest = max(step.drafted for step in done["assisted"].steps)
    assert longest > AUTO.num_assistant_tokens  # everything is accepted, so γ grew past the cap
    h = done["assisted"].hindsight
    assert max(k for k, _ in h.verify_s) == longest + 1
    assert self_pair.learnt.verify_s[longest + 1] > 0  # timed, and kept for later runs
    result = stats.report("self", "cpu", "float32", done["plain"], done["assisted"])
    assert result["analysis_errors"] == {}
    found = result["oracle"]
    assert found["reason"] is None and found["extrapolated_rows"] == []
    assert found["verify_rows"] == longest + 1
    assert found["agreement"] == 1.0


def test_a_sampled_run_finds_no_hindsight(self_pair):
    settings = RunSettings(max_new_tokens=12, sample=True, temperature=0.8, seed=3)
    done = compare(self_pair, settings)
    assert done["assisted"].hindsight is None
    result = stats.report("self", "cpu", "float32", done["plain"], done["assisted"])
    assert result["oracle"]["reason"].startswith("sampled")


def test_the_hindsight_survives_json(self_pair):
    record = compare(self_pair)["assisted"]
    again = RunRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.hindsight == record.hindsight


# -- the benchmark's shares ----------------------------------------------------------------


def hand_made(total_s: float, runs) -> tuple[RunRecord, RunRecord]:
    """A plain run of 8 one-token steps and an assisted run that drafted 3 at each of 2
    steps and accepted all, with flat costs: T(k) = 1 s, so the oracle takes 2 steps."""
    plain = RunRecord(mode="plain", drafter=None, prompt_tokens=5, total_s=8.0)
    plain.steps = [Step((i,), "", 0, 0, float(i + 1)) for i in range(8)]
    assisted = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=5, total_s=total_s)
    assisted.steps = [
        step([0, 1, 2, 3], 3, 3, ASSISTANT, [0, 1, 2]),
        step([4, 5, 6, 7], 3, 3, ASSISTANT, [4, 5, 6]),
    ]
    verify = {k: 1.0 for k in range(1, 9)}
    assisted.hindsight = hindsight(runs, [[]] * 8, cap=7, verify=verify)
    return plain, assisted


def test_the_benchmark_reports_the_share_of_the_oracle_its_runs_reached():
    from assisted.bench import reporting

    plain, assisted = hand_made(4.0, [8, 7, 6, 5, 4, 3, 2, 1])
    row = reporting.prompt_fields([plain], [assisted], {})
    # The plain run: 8 s, prefill 0 (its first step took T(1)). The oracle: one step of 7.
    assert row["oracle_speedup"] == pytest.approx(8.0)
    assert row["modelled_share"] == pytest.approx(0.5)  # the run took 2 steps
    assert row["oracle_agreement"] == 1.0
    row |= {"speedup": 2.0}  # measured: 8 s against 4 s
    assert reporting.measured_share(row) == pytest.approx(0.25)
    other = dict(row, oracle_speedup=2.0, modelled_share=1.0, speedup=2.0)
    group = reporting.group_fields([row, other])
    assert group["oracle_speedup_geomean"] == pytest.approx(4.0)
    assert group["measured_share"] == pytest.approx(0.5)  # geomean 2.0 ÷ geomean 4.0
    assert group["modelled_share"] == pytest.approx(0.5**0.5, abs=1e-4)
    assert "4.00x" in reporting.overall_line(group)


def test_a_share_above_the_oracle_never_reads_as_a_share():
    assert oracle.share_text(0.85) == "85%"
    assert oracle.share_text(1.0) == "100%"
    assert oracle.share_text(1.28) == "above the oracle (×1.28)"
    group = {"oracle_prompts": 1, "oracle_speedup_geomean": 1.0, "modelled_share": 1.0}
    from assisted.bench import reporting

    line = reporting.overall_line(group | {"measured_share": 1.28, "oracle_agreement": 1.0})
    assert "above the oracle (×1.28) measured" in line and "128%" not in line
    # A run measured at 0.5 s: 16x against the oracle's 8x (modelled), in the run's sentence.
    found = oracle.report(*hand_made(0.5, [8, 7, 6, 5, 4, 3, 2, 1]))
    assert found["measured_share"] == pytest.approx(2.0)
    assert "as a share of the oracle's: above the oracle (×2.00)." in oracle.describe(found)


# -- replaying the policy offline ------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_no_setting_of_the_policy_beats_the_oracle(seed):
    from lab import policy_fit

    rng = random.Random(seed)
    n = rng.randint(4, 30)
    output = [rng.randint(0, 3) for _ in range(n)]
    runs = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        runs[i] = runs[i + 1] + 1 if rng.random() < 0.8 else 0
    drafts = [[rng.randint(0, 3) for _ in range(rng.randint(0, 4))] for _ in range(n)]
    verify = {k: rng.uniform(0.8, 1.4) for k in range(1, 6)}
    h = hindsight(
        runs[:-1],
        drafts,
        verify=verify,
        drafting_s=0.05,
        call_s=0.01,
        catch_up_s=0.1,
        prefill_s=0.002,
    )
    h = Hindsight(**{**h.__dict__, "assistant_confidence": tuple(rng.random() for _ in range(n))})
    record = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=20, total_s=1.0)
    record.steps = [step([t]) for t in output]
    record.hindsight = h
    best = oracle.seconds(oracle.best_schedule(h, output, 20))
    for threshold, cumulative in ((0, 0), (0.4, 0), (0.9, 0), (0, 0.3), (0.4, 0.6)):
        for stops in policy_fit.STOPS:
            assert policy_fit.simulate(record, threshold, n, cumulative, stops) >= best - 1e-9


def assisted_run(output, runs, confidence) -> tuple[RunRecord, RunRecord]:
    """A plain run and a greedy assisted run of `output` whose hindsight has the assistant
    agree for `runs[i]` tokens from each position i, at `confidence[i]`."""
    h = hindsight(runs, [[] for _ in output], drafting_s=0.05, call_s=0.01, prefill_s=0.001)
    h = Hindsight(**{**h.__dict__, "assistant_confidence": tuple(confidence)})
    plain = RunRecord(mode="plain", drafter=None, prompt_tokens=20, total_s=1.0)
    plain.steps = [step([t]) for t in output]
    record = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=20, total_s=1.0)
    record.steps = [step([t]) for t in output]
    record.hindsight = h
    return plain, record


def agreement_runs(right: list[bool]) -> list[int]:
    runs = [0] * (len(right) + 1)
    for i in range(len(right) - 1, -1, -1):
        runs[i] = runs[i + 1] + 1 if right[i] else 0
    return runs[:-1]


def test_the_drafts_ends_moved_in_hindsight_split_what_the_stopping_rule_leaves():
    from lab import policy_fit

    rng = random.Random(0)
    right = [rng.random() < 0.7 for _ in range(40)]
    output, runs = list(range(40)), agreement_runs(right)
    moved = policy_fit.NO_EARLY_STOPS, policy_fit.NO_LATE_STOPS, policy_fit.IN_HINDSIGHT

    def shares(confidence) -> tuple[float, ...]:
        found = policy_fit.fit([assisted_run(output, runs, confidence)], [(0.5, 0.0)], 40)
        (row,) = found["settings"].values()
        return (row["share_of_oracle"], *(row["share_with_stops_moved"][s] for s in moved))

    # A confidence that knows which tokens are right: the rule already stops in hindsight.
    rule, no_early, no_late, in_hindsight = shares([0.99 if r else 0.01 for r in right])
    assert rule == no_early == no_late == in_hindsight
    # A confidence that never stops a draft: it stops late, never early.
    rule, no_early, no_late, in_hindsight = shares([0.99] * 40)
    assert rule == no_early and no_late == in_hindsight and in_hindsight > rule
    # One that stops every draft after its first token: it stops early, never late.
    rule, no_early, no_late, in_hindsight = shares([0.01] * 40)
    assert rule == no_late and no_early == in_hindsight and in_hindsight > rule


def test_the_replay_takes_the_benchmarks_token_budget_from_its_report(tmp_path, capsys):
    from lab import policy_fit

    plain, assisted = assisted_run(list(range(12)), agreement_runs([True] * 12), [0.9] * 12)
    lines = [
        {"question_id": "q", "drafter": drafter, "repeat": 0, "record": record.to_dict()}
        for drafter, record in ((None, plain), (ASSISTANT.value, assisted))
    ]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    # Without its report the budget is unknown, and a wrong one replays another policy.
    assert policy_fit.main([str(runs)]) == 2
    assert "--max-new-tokens" in capsys.readouterr().err
    (tmp_path / "report.json").write_text(json.dumps({"settings": {"max_new_tokens": 12}}))
    assert policy_fit.benchmark_max_new_tokens(runs) == 12
    assert policy_fit.main([str(runs), "--threshold", "0.4"]) == 0
    assert "1 runs: oracle" in capsys.readouterr().out


# -- replaying the cost model offline --------------------------------------------------------


def timed_run(drafter, question_id, step_s: float, rows: int, steps: int = 20) -> dict:
    """A runs.jsonl line: `steps` steps of `rows` rows each, `step_s` apart; an assisted
    run's hindsight holds a flat T(k) of 1 s."""
    drafted = rows - 1
    mode = "plain" if drafter is None else "assisted"
    record = RunRecord(mode=mode, drafter=drafter, prompt_tokens=5)
    record.steps = [
        Step((0,) * rows, "", drafted, drafted, step_s * (i + 1), (0,) * drafted)
        for i in range(steps)
    ]
    if drafter is not None:
        record.hindsight = hindsight(None, [], verify={k: 1.0 for k in range(1, 6)})
    return {"question_id": question_id, "drafter": drafter, "repeat": 0, "record": record.to_dict()}


def test_the_cost_replay_scores_each_setting_and_lets_plain_steps_refine_t1(tmp_path, capsys):
    from lab import cost_fit

    # An assisted run timed as modelled, the plain run of the next prompt at half T(1), then
    # that prompt's assisted run, its rows still timed at 1 s: T(1) alone is half T(3).
    lines = [
        timed_run(ASSISTANT.value, "a", 1.0, rows=3),
        timed_run(None, "a", 1.0, rows=1),
        timed_run(None, "b", 0.5, rows=1),
        timed_run(ASSISTANT.value, "b", 1.0, rows=3),
    ]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    loaded = cost_fit.load(runs)
    assert [(r.paired, r.plain_before) for r in loaded] == [
        (1.0, False),
        (None, False),
        (None, False),
        (0.5, True),
    ]
    alone = cost_fit.fit(loaded, [(2, 12)], plain=False)["settings"]["prior 2, window 12"]
    assert alone["error_median"] == 0.0  # every step took what its T(k) said
    assert alone["plain_after"]["median"] == 1.0
    assert alone["plain_before"]["median"] == 0.5  # T(1) never saw the faster plain steps
    fed = cost_fit.fit(loaded, [(2, 12)], plain=True)["settings"]["prior 2, window 12"]
    # The plain run set T(1), and the assisted run's steps, timed as modelled, kept it.
    assert fed["plain_before"]["median"] == pytest.approx(1.0)
    assert fed["error_median"] == 0.0
    assert cost_fit.main([str(runs), "--prior", "2,4", "--window", "12"]) == 0
    out = capsys.readouterr().out
    assert "prior 2, window 12: step error" in out and "prior 4, window 12" in out


def test_step_prices_set_each_kind_of_step_against_the_oracles_price(tmp_path, capsys):
    from dataclasses import replace

    from lab import step_prices

    h = hindsight([2] * 10, [[]] * 10, drafting_s=0.05, call_s=0.01, prefill_s=0.001)
    h = replace(h, catch_up_s=0.02)
    M = oracle.Model
    # (step, the assistant's cache before it, measured ÷ price): the assistant's steps
    # take half again their price, the others their price.
    ran = [
        (step([0]), M.UNSTARTED, 1.0),  # the first step: the target's prefill, left out
        (step([1, 2, 3], 2, 2, ASSISTANT), M.UNSTARTED, 1.5),  # its first draft
        (step([4, 5], 2, 1, ASSISTANT), M.CURRENT, 1.5),
        (step([6], 1, 0, LOOKUP, [9]), M.CURRENT, 1.0),
        (step([7, 8], 1, 1, ASSISTANT), M.BEHIND, 1.5),  # it catches up
        (step([9]), M.CURRENT, 1.0),
    ]
    costs, t_s, position, steps = oracle.Costs(h, 20), 2.0, 0, []
    for s, state, factor in ran:
        if steps:
            t_s += factor * costs.step_s(
                s.source if s.drafted else None, s.drafted, state, position
            )
        steps.append(replace(s, t_s=t_s))
        position += len(s.token_ids)
    record = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=20, total_s=t_s)
    record.steps, record.hindsight = steps, h
    plain = RunRecord(mode="plain", drafter=None, prompt_tokens=20, total_s=9.2)
    plain.steps = [replace(step([i]), t_s=2.0 + 0.8 * i) for i in range(10)]  # 0.8 T(1)
    sampled = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=20, total_s=1.0)
    sampled.steps, sampled.sampled = steps, True
    lines = [
        {"question_id": q, "category": "c", "drafter": d, "repeat": 0, "record": r.to_dict()}
        for q, d, r in (
            ("q", None, plain),
            ("q", ASSISTANT.value, record),
            ("s", ASSISTANT.value, sampled),  # no oracle under sampling: not summed
        )
    ]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    found = step_prices.report(step_prices.tally(runs))
    assert found["all"] == found["c"]
    ratios = {name: (row["steps"], row["ratio"]) for name, row in found["all"].items()}
    assert ratios == {
        step_prices.PLAIN: (1, 1.0),
        step_prices.LOOKUP: (1, 1.0),
        step_prices.ASSISTANT: (1, 1.5),
        step_prices.FIRST_DRAFT: (1, 1.5),
        step_prices.CATCH_UP: (1, 1.5),
        step_prices.PLAIN_RUN: (9, 0.8),
    }
    assert step_prices.main([str(runs)]) == 0
    assert (
        "c: plain 1.00 (1); prompt-lookup 1.00 (1); assistant 1.50 (1)" in capsys.readouterr().out
    )
    runs.write_text(json.dumps(lines[2]) + "\n", encoding="utf-8")
    assert step_prices.main([str(runs)]) == 2


def test_the_replay_under_a_larger_cap_prices_the_untimed_rows_and_drafts_longer(tmp_path, capsys):
    from lab import policy_fit

    plain, assisted = assisted_run(list(range(24)), agreement_runs([True] * 24), [0.99] * 24)
    wider = policy_fit.with_cap(assisted, 8, row_share=0.1)
    verify = dict(wider.hindsight.verify_s)
    assert wider.hindsight.cap == 8 and assisted.hindsight.cap == 4
    assert verify[5] == dict(assisted.hindsight.verify_s)[5]  # timed rows kept
    assert verify[9] == pytest.approx(verify[5] * 1.4)  # 4 rows past T(5), 10% of it each
    # Every draft is right, so the oracle and the policy both gain from longer drafts.
    narrow_found, wide_found = oracle.report(plain, assisted), oracle.report(plain, wider)
    assert wide_found["speedup_modelled"] > narrow_found["speedup_modelled"]
    narrow, wide = (
        policy_fit.fit([(plain, a)], [(0.4, 0.0)], 24)["settings"] for a in (assisted, wider)
    )
    assert (
        next(iter(wide.values()))["speedup_modelled"]
        > next(iter(narrow.values()))["speedup_modelled"]
    )
    lines = [
        {"question_id": "q", "drafter": drafter, "repeat": 0, "record": record.to_dict()}
        for drafter, record in ((None, plain), (ASSISTANT.value, assisted))
    ]
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    args = [str(runs), "--max-new-tokens", "24", "--threshold", "0.4", "--cap", "4,8"]
    assert policy_fit.main(args) == 2  # rows past T(5) were never timed
    assert "--row-share" in capsys.readouterr().err
    assert policy_fit.main([*args, "--row-share", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "cap 4:" in out and "cap 8:" in out


def test_a_constant_schedule_drafts_as_far_as_the_confidence_threshold_lets_it():
    # The assistant agrees all along, but is unsure of every third token: a constant lane
    # at threshold 0.4 ends each draft after such a token, as Transformers' criteria do.
    output = list(range(12))
    runs = [len(output) - i for i in range(len(output))]
    confidence = [0.3 if i % 3 == 2 else 0.9 for i in range(len(output))]
    h = hindsight(runs, [[] for _ in output], drafting_s=0.05)
    h = Hindsight(**{**h.__dict__, "assistant_confidence": tuple(confidence)})
    free = oracle.constant_schedule(h, output, 20, 4)
    cut = oracle.constant_schedule(h, output, 20, 4, threshold=0.4)
    assert [m.gamma for m in free][:2] == [4, 4]
    # Each draft ends at its unsure token (positions 2, 5, 8, 11), then the target's own.
    assert [(m.position, m.gamma, m.committed) for m in cut] == [
        (0, 3, 4),
        (4, 2, 3),
        (7, 2, 3),
        (10, 2, 2),
    ]
    # Past its first wrong token the draft's confidence is unknown: it runs on to γ.
    wrong = [0] * len(output)
    h = Hindsight(**{**h.__dict__, "assistant_runs": tuple(wrong)})
    assert oracle.constant_schedule(h, output, 20, 4, threshold=0.4)[0].gamma == 4


def test_past_its_first_wrong_token_a_draft_runs_on_as_the_runs_own_drafts_did():
    # The assistant is sure of every token and right about the first of each draft only:
    # past the second, wrong on the true prefix, its confidence is unknown.
    output = list(range(12))
    h = hindsight([1] * len(output), [[] for _ in output], drafting_s=0.05)
    h = Hindsight(**{**h.__dict__, "assistant_confidence": (0.9,) * len(output)})
    costs = oracle.Costs(h, 20)

    def first(runs_on: float) -> oracle.Move:
        return oracle.constant_schedule(h, output, 20, 4, threshold=0.4, runs_on=runs_on)[0]

    assert first(1.0).gamma == 4  # no evidence: on to γ, as before
    step_s = {d: costs.step_s(ASSISTANT, d, oracle.Model.UNSTARTED, 0) for d in (2, 3, 4)}
    assert first(1.0).seconds == pytest.approx(step_s[4])
    assert (first(0.0).gamma, first(0.0).seconds) == (2, pytest.approx(step_s[2]))
    half = first(0.5)  # ends at 2, 3 or 4 candidates: 1/2, 1/4, 1/4
    assert half.seconds == pytest.approx(step_s[2] / 2 + step_s[3] / 4 + step_s[4] / 4)
    assert half.committed == first(1.0).committed == 2  # what it keeps does not move

    # The chance, from a record's drafts: past the first wrong candidate (the second),
    # one went on past 2 of them to its γ of 4, another stopped at once.
    ids = (0, 1)
    record = RunRecord(mode="assisted", drafter=ASSISTANT, prompt_tokens=20)
    record.steps = [
        step(ids, drafted=4, accepted=1, source=ASSISTANT),
        step(ids, drafted=2, accepted=1, source=ASSISTANT),
        step(ids, drafted=3, accepted=3, source=ASSISTANT),  # no wrong token: says nothing
    ]
    assert oracle.runs_on_past_a_rejection(record, h, 0.4) == pytest.approx(2 / 3)
    sure_of_nothing = Hindsight(**{**h.__dict__, "assistant_confidence": (0.3,) * 12})
    assert oracle.runs_on_past_a_rejection(record, sure_of_nothing, 0.4) == 1.0
