"""The verdict on a divergence, from hand-made records of the target's top two."""

import json

import pytest
import torch

from assisted.analysis import divergence, stats
from assisted.analysis.divergence import NEAR_TIE, UNEXPLAINED, Top2, explain, first_divergence, ulp
from assisted.core.record import RunRecord, Step
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.engine import encode_prompt
from assisted.models.pairs import custom_pair, load_pair


def record(tokens, top2, mode="assisted", dtype="bfloat16", sampled=False) -> RunRecord:
    run = RunRecord(mode, "assistant" if mode == "assisted" else None, 5, dtype=dtype)
    run.steps = [Step((token,), "x", 0, 0, 0.1 * i) for i, token in enumerate(tokens)]
    run.top2, run.sampled = list(top2), sampled
    return run


# Before the divergence both runs scored the same prefix: rounding moved logits by 0.05, in
# enough positions to measure it (`divergence.MIN_MEASURED`).
SHARED = [1, 3] * 4
SHARED_PLAIN = [(1, 9.0, 2, 3.0), (3, 7.5, 4, 7.0)] * 4
SHARED_ASSISTED = [(1, 9.05, 2, 3.0), (3, 7.5, 4, 6.98)] * 4
AT = len(SHARED)  # where the made divergences are


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2, 3], [1, 2]) == 2
    assert first_divergence([], []) is None


def test_identical_runs_have_no_divergence():
    plain = record(SHARED, SHARED_PLAIN, mode="plain")
    assert explain(plain, record(SHARED, SHARED_ASSISTED)) is None


def test_two_tokens_tied_within_the_measured_rounding_are_a_near_tie():
    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 5.03, 11, 5.0)], mode="plain")
    assisted = record([*SHARED, 11], [*SHARED_ASSISTED, (11, 5.02, 10, 5.0)])
    found = explain(plain, assisted)
    assert found["verdict"] == NEAR_TIE
    assert (found["index"], found["plain_token"], found["assisted_token"]) == (AT, 10, 11)
    assert found["plain_margin"] == pytest.approx(0.03)
    assert found["assisted_margin"] == pytest.approx(-0.02)
    assert found["noise"] == pytest.approx(0.05)
    assert found["plain_top2"] == {
        "first": 10,
        "first_logit": 5.03,
        "second": 11,
        "second_logit": 5.0,
    }


def test_a_flip_larger_than_the_rounding_is_unexplained():
    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 9.0, 11, 5.0)], mode="plain")
    assisted = record([*SHARED, 11], [*SHARED_ASSISTED, (11, 5.1, 10, 4.9)])
    found = explain(plain, assisted)
    assert found["verdict"] == UNEXPLAINED
    assert found["plain_margin"] == pytest.approx(4.0)


def test_each_logit_may_move_by_the_noise_so_the_margin_by_twice_it():
    # Measured on the embedded pair in bf16 (write-code/sql-top-customers, token 35): an
    # exact tie in plain, the lower id taken; each logit a unit in the last place away in
    # assisted. Both margins within the noise would call this a bug.
    plain = record([*SHARED, 2604], [*SHARED_PLAIN, (2604, 19.375, 20529, 19.375)], mode="plain")
    assisted = record([*SHARED, 20529], [*SHARED_ASSISTED, (20529, 19.5, 2604, 19.25)])
    found = explain(plain, assisted)
    assert (found["plain_margin"], found["assisted_margin"]) == (0.0, -0.25)
    assert found["verdict"] == NEAR_TIE


def test_an_early_move_within_the_dtype_bound_is_a_near_tie():
    # Measured on examples/summarise/incident-report in bf16: token 0 agreed to the bit,
    # then a logit moved by 2 units in the last place (0.0625 each) at token 1. Too few
    # positions measured the noise, so the bound is the noise.
    plain = record([32, 6546], [(32, 16.0, 1655, 15.6875), (6546, 13.625, 6002, 13.5)], "plain")
    assisted = record([32, 6002], [(32, 16.0, 1655, 15.6875), (6002, 13.5625, 6546, 13.5)])
    found = explain(plain, assisted)
    assert found["verdict"] == NEAR_TIE and found["reason"] is None
    assert found["noise"] == found["bound"] == divergence.ROUNDING_ULPS["bfloat16"] * 0.0625
    assert "rounding moves a logit by at most 0.5 in this dtype" in divergence.describe(found)
    # The same move after enough positions that rounding moved by less is a bug to report.
    shared = [(32, 16.0, 1655, 15.6875)] * divergence.MIN_MEASURED
    late_plain = record([32] * len(shared) + [6546], [*shared, plain.top2[1]], "plain")
    late_assisted = record([32] * len(shared) + [6002], [*shared, assisted.top2[1]])
    assert explain(late_plain, late_assisted)["verdict"] == UNEXPLAINED


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("index", [0, 1])
def test_a_rounding_size_flip_at_the_first_tokens_is_a_near_tie(dtype, index):
    # An exact tie in plain, each logit 3 units in the last place away in assisted.
    unit = ulp(13.5, dtype)
    tie = (6002, 13.5, 6546, 13.5), (6546, 13.5 + 3 * unit, 6002, 13.5 - 3 * unit)
    start = [(32, 16.0, 1655, 15.6875)] * index
    plain = record([32] * index + [6002], [*start, tie[0]], "plain", dtype=dtype)
    assisted = record([32] * index + [6546], [*start, tie[1]], dtype=dtype)
    found = explain(plain, assisted)
    assert found["index"] == index and found["verdict"] == NEAR_TIE
    assert found["assisted_margin"] == pytest.approx(-6 * unit)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("index", [0, 1])
def test_a_systematic_fault_at_the_first_tokens_is_unexplained(dtype, index):
    # A wrong mask or position ids at the prefill fused with the first verification: the
    # runner-up gains 2.0, far beyond rounding, and wins. Both runs still rank the same two
    # tokens first, and each took its own best.
    start = [(32, 16.0, 1655, 15.6875)] * index
    plain = record([32] * index + [6002], [*start, (6002, 13.5, 6546, 12.5)], "plain", dtype)
    assisted = record([32] * index + [6546], [*start, (6546, 14.5, 6002, 13.5)], dtype=dtype)
    found = explain(plain, assisted)
    assert found["index"] == index and found["verdict"] == UNEXPLAINED
    assert found["noise"] == found["bound"] < 1.0
    assert divergence.describe(found).endswith("This looks like a bug")


@pytest.mark.parametrize("dtype, shift", [("float32", 1e-3), ("bfloat16", 2.0)])
def test_a_fault_that_moves_every_logit_cannot_excuse_its_own_flip(dtype, shift):
    # A systematic fault moves the logits at every position, so the gaps measured before the
    # divergence grow with it; the noise stays under the dtype's bound, and the flip it
    # causes is reported.
    shared = [(1, 9.0, 2, 3.0)] * AT
    moved = [(1, 9.0 + shift, 2, 3.0 - shift)] * AT
    tie = (10, 5.0, 11, 5.0), (11, 5.0 + shift / 2, 10, 5.0 - shift / 2)
    plain = record([1] * AT + [10], [*shared, tie[0]], "plain", dtype=dtype)
    assisted = record([1] * AT + [11], [*moved, tie[1]], dtype=dtype)
    found = explain(plain, assisted)
    assert found["verdict"] == UNEXPLAINED
    assert found["noise"] == found["bound"] == divergence.rounding_bound(5.0, dtype) < shift / 2


def test_an_unknown_dtype_gets_no_verdict():
    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 5.03, 11, 5.0)], "plain", dtype=None)
    found = explain(plain, record([*SHARED, 11], [*SHARED_ASSISTED, (11, 5.02, 10, 5.0)]))
    assert found["verdict"] is None and found["reason"] == "no rounding bound for dtype None"
    assert "no verdict" in divergence.describe(found)


def test_a_run_that_took_a_token_its_own_scores_rank_lower_is_unexplained():
    # The logits agree to the bit, but the assisted run committed the second best: a bug
    # in acceptance, not rounding.
    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 5.1, 11, 5.0)], mode="plain")
    assisted = record([*SHARED, 11], [*SHARED_ASSISTED, (10, 5.1, 11, 5.0)])
    found = explain(plain, assisted)
    assert found["assisted_margin"] == pytest.approx(0.1) and found["verdict"] == UNEXPLAINED


def test_a_tie_of_three_within_the_noise_gets_no_verdict_and_says_why():
    # Token 12 is below plain's second (5.0), token 11 below assisted's: the records bound
    # their moves from below only (0.02 and 0), within the noise of 0.05. Three tokens
    # within 0.03 of each other: no proof of a bug, nor of rounding.
    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 5.03, 11, 5.0)], mode="plain")
    assisted = record([*SHARED, 12], [*SHARED_ASSISTED, (12, 5.02, 10, 5.0)])
    found = explain(plain, assisted)
    assert found["verdict"] is None and found["plain_margin"] is None
    assert found["reason"].startswith("a tie of three or more: token 11")
    assert divergence.outcome(found) == divergence.NOT_JUDGED


def test_a_token_outside_the_top_two_that_moved_beyond_the_noise_is_unexplained():
    # Token 12 is at most 5.0 in plain (its second) and 9.0 in assisted: it moved by 4 at
    # least, whatever the logit the plain run did not record.
    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 5.03, 11, 5.0)], mode="plain")
    assisted = record([*SHARED, 12], [*SHARED_ASSISTED, (12, 9.0, 10, 5.03)])
    assert explain(plain, assisted)["verdict"] == UNEXPLAINED
    # And a token the two runs both recorded that moved beyond it, beside a third.
    assisted = record([*SHARED, 12], [*SHARED_ASSISTED, (12, 5.02, 10, 4.5)])
    assert explain(plain, assisted)["verdict"] == UNEXPLAINED


def test_one_unit_in_the_last_place_counts_as_rounding_even_where_nothing_moved_before():
    # bf16 keeps 8 significant bits: logits near 20 are multiples of 0.125.
    assert ulp(20.0, "bfloat16") == 0.125 and ulp(20.0, "float32") < 1e-5
    tied = [(10, 20.125, 11, 20.0)], [(11, 20.125, 10, 20.0)]
    plain = record([10], tied[0], mode="plain")
    assert explain(plain, record([11], tied[1]))["verdict"] == NEAR_TIE
    # In float32, after positions that agreed to the bit, the same move is no rounding.
    same = [(1, 9.0, 2, 3.0)] * AT
    plain32 = record([1] * AT + [10], same + tied[0], mode="plain", dtype="float32")
    assisted32 = record([1] * AT + [11], same + tied[1], dtype="float32")
    assert explain(plain32, assisted32)["verdict"] == UNEXPLAINED


def test_the_sentence_gives_the_verdict_and_its_figures():
    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 5.03, 11, 5.0)], mode="plain")
    found = explain(plain, record([*SHARED, 11], [*SHARED_ASSISTED, (11, 5.02, 10, 5.0)]))
    found |= {"plain_text": " la", "assisted_text": " el"}
    assert divergence.describe(found) == (
        f"diverged at token {AT}: the target's top two, ' la' and ' el', differ by 0.03 in plain "
        "and -0.02 in assisted (rounding moved logits by up to 0.05 earlier in these runs): "
        "a near-tie that rounding flipped"
    )
    found = explain(plain, record([*SHARED, 11], [*SHARED_ASSISTED, (11, 9.0, 10, 5.0)]))
    assert divergence.describe(found).endswith("This looks like a bug")
    assert "token 10" in divergence.describe(found)
    assert divergence.describe(None).startswith("identical")


def test_sampled_runs_get_no_verdict():
    plain = record([1, 10], [SHARED_PLAIN[0], (10, 5.03, 11, 5.0)], mode="plain", sampled=True)
    assisted = record([1, 11], [SHARED_ASSISTED[0], (11, 5.02, 10, 5.0)], sampled=True)
    found = explain(plain, assisted)
    assert found["index"] == 1 and found["verdict"] is None and found["noise"] is None
    assert divergence.describe(found).startswith("two draws: ")  # a report without a check


def test_a_run_that_ended_early_gets_no_verdict():
    plain = record(SHARED, SHARED_PLAIN, mode="plain")
    found = explain(plain, record([1], SHARED_ASSISTED[:1]))
    assert found["index"] == 1 and found["assisted_token"] is None and found["verdict"] is None


def test_the_evidence_survives_json():
    run = record([1, 3], [SHARED_PLAIN[0], None])
    again = RunRecord.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again == run and again.top2[0] == SHARED_PLAIN[0]
    assert divergence.Top2.of(again.top2[0]).logit(2) == 3.0


def test_the_benchmark_counts_prompts_by_their_most_worrying_repeat():
    from assisted.bench import summarize_group, summarize_prompt

    plain = record([*SHARED, 10], [*SHARED_PLAIN, (10, 5.03, 11, 5.0)], mode="plain")
    same = record([*SHARED, 10], [*SHARED_ASSISTED, (10, 5.02, 11, 5.0)])
    tie = record([*SHARED, 11], [*SHARED_ASSISTED, (11, 5.02, 10, 5.0)])
    bug = record([*SHARED, 11], [*SHARED_ASSISTED, (11, 9.0, 10, 5.0)])
    for run in (plain, same, tie, bug):
        run.total_s = 1.0
    rows = [
        summarize_prompt([plain, plain], [same, same]),
        summarize_prompt([plain, plain], [same, tie]),
        summarize_prompt([plain, plain], [tie, bug]),
    ]
    assert [row["outcome"] for row in rows] == ["identical", NEAR_TIE, UNEXPLAINED]
    group = summarize_group(rows)
    assert (group["identical_prompts"], group["near_tie_prompts"]) == (1, 1)
    assert group["unexplained_prompts"] == 1


# -- on tiny models: the evidence recorded by real runs, and verdicts on made divergences --

PROMPT = "def add(a, b):"
GREEDY = RunSettings(max_new_tokens=24)
DRAFT = DraftSettings(num_assistant_tokens=4, confidence_threshold=0.0)


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return load_pair(spec, device="cpu", dtype="float32")


def run(pair, mode, hook=None) -> RunRecord:
    """One greedy run of `mode`; `hook(logits)` edits the target's logits in place."""
    ids = encode_prompt(pair, PROMPT)

    def edit(module, args, output):
        hook(output.logits)

    handle = pair.target.register_forward_hook(edit) if hook else None
    try:
        events = list(decoding.run(pair, ids, mode, GREEDY, DRAFT))
    finally:
        if handle is not None:
            handle.remove()
    return events[-1].record


@pytest.mark.parametrize("mode", ["plain", "assisted"])
def test_every_committed_token_is_the_target_s_top_choice_there(pair, mode):
    record = run(pair, mode)
    assert len(record.top2) == len(record.token_ids) > 0
    assert [row[0] for row in record.top2] == record.token_ids
    assert all(row[1] >= row[3] for row in record.top2)
    assert (record.dtype, record.sampled) == ("float32", False)


def test_greedy_fp32_runs_score_alike_and_never_diverge(pair):
    plain, assisted = run(pair, "plain"), run(pair, "assisted")
    assert stats.drafted(assisted) > 0
    assert explain(plain, assisted) is None
    # One row or several, fp32 rounding keeps every logit within the bound.
    for p, a in zip(map(Top2.of, plain.top2), map(Top2.of, assisted.top2), strict=True):
        bound = divergence.rounding_bound(max(abs(p.first_logit), abs(a.first_logit)), "float32")
        assert all(abs(p.logit(t) - a.logit(t)) <= bound for t in p.ids() & a.ids())


def _tie(first: int, second: int, nudge: float = 0.0):
    """A double of rounding: `second` scores as `first` (+ `nudge`), a tie that the plain run
    breaks towards the lower id; other tokens move by up to ±|nudge|."""

    def hook(logits):
        if nudge:
            ids = torch.arange(logits.shape[-1])
            logits += nudge * torch.where(ids % 2 == 0, 1.0, -1.0)
            logits[..., first] -= nudge * (1.0 if first % 2 == 0 else -1.0)
        logits[..., second] = logits[..., first] + nudge / 2

    return hook


def _tied_runs(pair, nudge_ulps: float = 0.0, nudge: float = 0.0):
    """A plain run with a made tie at a new token, and an assisted run where rounding (or a
    fault) of `nudge`, or `nudge_ulps` units in the last place there, breaks it the other
    way."""
    reference = run(pair, "plain")
    ids = reference.token_ids
    index = next(i for i, t in enumerate(ids) if i > 0 and t not in ids[:i])
    first, second = reference.token_ids[index], len(pair.tokenizer) - 1
    assert first < second and second not in ids
    plain = run(pair, "plain", _tie(first, second))
    assert plain.token_ids == reference.token_ids  # the plain run keeps the lower id
    nudge = nudge or nudge_ulps * ulp(plain.top2[index][1], "float32")
    return index, first, second, plain, run(pair, "assisted", _tie(first, second, nudge))


def test_a_tie_that_rounding_breaks_the_other_way_is_a_near_tie(pair):
    index, first, second, plain, assisted = _tied_runs(pair, nudge_ulps=2)
    found = explain(plain, assisted)
    assert found["index"] == index
    assert (found["plain_token"], found["assisted_token"]) == (first, second)
    assert found["verdict"] == NEAR_TIE
    assert found["plain_margin"] == 0.0 and found["assisted_margin"] < 0
    named = decoding.report(pair, plain, assisted)["divergence"]
    assert named["plain_text"] == pair.tokenizer.decode([first])
    assert "a near-tie" in divergence.describe(named)


def test_a_fault_of_1e_3_on_every_fp32_logit_is_unexplained(pair):
    # Real fp32 gaps are a few units in the last place (1e-6 at a logit of 10): ±1e-3 on
    # every logit is a systematic fault, and the tie it breaks is no rounding.
    index, first, second, plain, assisted = _tied_runs(pair, nudge=1e-3)
    found = explain(plain, assisted)
    assert found["index"] == index
    assert (found["plain_token"], found["assisted_token"]) == (first, second)
    assert found["verdict"] == UNEXPLAINED
    assert found["assisted_margin"] == pytest.approx(-5e-4, rel=0.05)
    assert found["noise"] <= found["bound"] < 5e-4


def test_a_fault_in_the_prefill_s_verification_is_unexplained(pair):
    # The first assisted pass verifies the first candidates with the prompt's prefill: a
    # wrong mask there lifts the target's runner-up at token 0 past its winner.
    plain = run(pair, "plain")
    winner, runner_up = plain.top2[0][0], plain.top2[0][2]
    calls = []

    def faulty_prefill(logits):
        calls.append(1)
        if len(calls) == 1:  # row 0 of the first pass predicts token 0
            logits[0, 0, runner_up] = logits[0, 0, winner] + 1.0

    found = explain(plain, run(pair, "assisted", faulty_prefill))
    assert (found["index"], found["assisted_token"]) == (0, runner_up)
    assert found["assisted_top2"]["second"] == winner  # ranked as a rounding flip would be
    assert found["verdict"] == UNEXPLAINED


def test_a_verification_that_flips_a_clear_winner_is_unexplained(pair):
    plain = run(pair, "plain")
    index = next(i for i, token in enumerate(plain.token_ids) if i > 0)
    winner = plain.token_ids[index]
    other = next(t for t in range(len(pair.tokenizer)) if t not in plain.token_ids)

    def wrong_verification(logits):
        # Wherever the winner wins, a token the target ranks far below it wins instead.
        rows = logits.argmax(-1) == winner
        logits[..., other] += 50.0 * rows

    found = explain(plain, run(pair, "assisted", wrong_verification))
    assert found["index"] <= index and found["assisted_token"] == other
    assert found["verdict"] == UNEXPLAINED
