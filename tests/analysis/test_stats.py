"""Statistics on hand-made records: arithmetic and the Leviathan et al. model."""

import json
import math
import random

import pytest

from assisted.analysis import stats
from assisted.core.record import RunRecord, Step


def make_record(steps, mode="assisted", total_s=None, drafter="assistant", draft_s=()):
    """steps: (n_tokens, drafted, accepted, t_s) tuples; tokens are numbered 0, 1, 2…"""
    record = RunRecord(mode=mode, drafter=drafter if mode == "assisted" else None, prompt_tokens=7)
    next_id = 0
    for n, drafted, accepted, t_s in steps:
        ids = tuple(range(next_id, next_id + n))
        next_id += n
        record.steps.append(Step(ids, "x" * n, drafted, accepted, t_s))
    record.total_s = total_s if total_s is not None else (steps[-1][3] if steps else 0.0)
    record.draft_forward_s = list(draft_s)
    return record


PLAIN = make_record([(1, 0, 0, 1.0 + 0.5 * i) for i in range(9)], mode="plain", total_s=5.0)
# 4 steps: 3+1, 1+1, 0+1, 2+1 tokens accepted + own; γ = 3 each.
ASSISTED = make_record(
    [(4, 3, 3, 1.2), (2, 3, 1, 1.8), (1, 3, 0, 2.3), (3, 3, 2, 2.5)],
    total_s=2.5,
    draft_s=[0.1, 0.1, 0.1, 0.2, 0.1],
)


def test_counts_and_rates():
    assert stats.new_tokens(ASSISTED) == 10
    assert stats.drafted(ASSISTED) == 12
    assert stats.accepted(ASSISTED) == 6
    assert stats.acceptance_rate(ASSISTED) == pytest.approx(0.5)
    assert stats.tokens_per_step(ASSISTED) == pytest.approx(2.5)
    assert stats.tokens_per_step(PLAIN) == 1.0
    assert stats.acceptance_rate(PLAIN) is None
    assert stats.ttft_s(ASSISTED) == 1.2
    assert stats.tokens_per_s(ASSISTED) == pytest.approx(10 / 2.5)
    # 6 tokens after the first step, in 2.5 − 1.2 s
    assert stats.decode_tokens_per_s(ASSISTED) == pytest.approx(6 / 1.3)


def test_histogram_and_position_acceptance():
    assert stats.accept_histogram(ASSISTED) == [1, 1, 1, 1]
    # position 1 accepted in 3 of 4 steps, position 2 in 2 of 4, position 3 in 1 of 4
    assert stats.position_acceptance(ASSISTED) == pytest.approx([0.75, 0.5, 0.25])
    assert stats.accept_histogram(PLAIN) == [9]
    assert stats.position_acceptance(PLAIN) == []


def test_speedup_is_the_tokens_per_second_ratio():
    # plain 9 tokens / 5 s, assisted 10 tokens / 2.5 s
    assert stats.speedup(PLAIN, ASSISTED) == pytest.approx((10 / 2.5) / (9 / 5.0))


def _accepted_distribution(alpha: float, gamma: int) -> list[float]:
    """P(a step accepts exactly j of its γ candidates) when each is accepted with chance α
    and the first rejection ends the step: the process the paper's model describes,
    written out instead of summed in closed form."""
    return [alpha**j * (1 - alpha) for j in range(gamma)] + [alpha**gamma]


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 1.0])
@pytest.mark.parametrize("gamma", [1, 2, 5])
def test_expected_tokens_per_step_is_the_mean_of_the_acceptance_process(alpha, gamma):
    # Each step commits its accepted candidates plus the target's own token.
    mean = sum((j + 1) * p for j, p in enumerate(_accepted_distribution(alpha, gamma)))
    assert stats.expected_tokens_per_step(alpha, gamma) == pytest.approx(mean)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.6, 0.9, 0.99])
@pytest.mark.parametrize("gamma", [1, 3, 5.5])
def test_alpha_round_trips_through_the_measured_acceptance_rate(alpha, gamma):
    rate = stats.acceptance_rate_for_alpha(alpha, gamma)
    assert stats.alpha_from_acceptance_rate(rate, gamma) == pytest.approx(alpha, abs=1e-9)


def test_measured_acceptance_rate_is_what_simulated_steps_measure_not_alpha():
    rng = random.Random(0)
    alpha, gamma, steps = 0.8, 5, 20_000
    accepted = 0
    for _ in range(steps):
        count = 0
        while count < gamma and rng.random() < alpha:
            count += 1
        accepted += count
    measured = accepted / (steps * gamma)  # Σaccepted / Σdrafted, as the app reports it
    assert stats.acceptance_rate_for_alpha(alpha, gamma) == pytest.approx(measured, abs=0.01)
    assert measured < alpha - 0.1  # later positions are reached less often
    assert stats.acceptance_rate_for_alpha(alpha, 1) == pytest.approx(alpha)


def test_predicted_speedup_limits():
    # Nothing accepted: each step commits one token and pays γ drafts on top of a pass.
    assert stats.predicted_speedup(0.0, 4, 0.25) == pytest.approx(1 / (1 + 4 * 0.25))
    # Free drafting: the speedup is the tokens per step.
    assert stats.predicted_speedup(0.7, 4, 0.0) == stats.expected_tokens_per_step(0.7, 4)
    # Everything accepted, free drafting: γ + 1 tokens for one pass.
    assert stats.predicted_speedup(1.0, 4, 0.0) == pytest.approx(5.0)
    # Dearer drafting only ever costs.
    assert stats.predicted_speedup(0.8, 4, 0.1) < stats.predicted_speedup(0.8, 4, 0.05)


def test_cost_ratio_uses_median_draft_time_over_plain_step_time():
    # plain decode: 8 tokens after the first in 4 s → 0.5 s per token; median draft 0.1 s
    assert stats.cost_ratio(PLAIN, ASSISTED) == pytest.approx(0.2)
    lookup = make_record([(2, 3, 1, 1.0)], drafter="prompt-lookup")
    assert stats.cost_ratio(PLAIN, lookup) == 0.0


def test_compare_and_report_schema():
    result = stats.report("pair", "cpu", "float32", PLAIN, ASSISTED)
    assert set(result) >= {
        "pair",
        "device",
        "dtype",
        "prompt_tokens",
        "plain",
        "assisted",
        "speedup",
        "predicted_speedup",
        "identical",
        "first_divergence",
    }
    for key in ("text", "new_tokens", "ttft_s", "total_s", "tokens_per_s", "steps"):
        assert key in result["plain"] and key in result["assisted"]
    for key in ("drafted", "accepted", "acceptance_rate", "tokens_per_step", "accept_histogram"):
        assert key in result["assisted"]
    assert result["identical"] is False  # 9 tokens against 10
    assert result["first_divergence"] == 9
    gamma, rate = 3.0, 0.5
    alpha = stats.alpha_from_acceptance_rate(rate, gamma)
    assert result["predicted_speedup"] == pytest.approx(
        stats.predicted_speedup(alpha, gamma, 0.2), abs=1e-3
    )
    only_plain = stats.report("pair", "cpu", "float32", PLAIN, None)
    assert only_plain["assisted"] is None and only_plain["speedup"] is None


# Two steps with their drafts: the first drafted "de f" and committed "de" and its own "x";
# the second committed its whole draft "g", then its own "h".
DRAFTED = RunRecord(
    "assisted",
    "assistant",
    7,
    [
        Step((1, 2), "dex", 3, 1, 0.5, (1, 5, 6), "de", " f", 0.2),
        Step((7, 8), "gh", 1, 1, 0.8, (7,), "g", "", 0.1),
    ],
    total_s=0.8,
)


def test_step_times_split_drafting_from_the_target():
    assert stats.step_s(DRAFTED) == pytest.approx([0.5, 0.3])
    (draft_1, target_1), (draft_2, target_2) = stats.step_times(DRAFTED)
    assert (draft_1, draft_2) == (0.2, 0.1)
    assert (target_1, target_2) == pytest.approx((0.3, 0.2))
    # Plain steps and prompt lookup's are not split: the whole step is the target's.
    lookup = make_record([(2, 3, 1, 1.0), (1, 3, 0, 1.5)], drafter="prompt-lookup")
    assert stats.step_times(lookup) == [(None, 1.0), (None, 0.5)]
    assert [d for d, _ in stats.step_times(PLAIN)] == [None] * 9


def test_the_summary_lists_each_step_beside_the_count_of_steps():
    result = stats.report("pair", "cpu", "float32", PLAIN, DRAFTED)
    plain, assisted = result["plain"], result["assisted"]
    assert plain["steps"] == len(plain["per_step"]) == 9
    assert plain["per_step"][1] == {"text": "x", "t_s": 1.5, "step_s": 0.5}
    assert assisted["steps"] == 2
    assert assisted["per_step"] == [
        {
            "text": "dex",
            "t_s": 0.5,
            "step_s": 0.5,
            "drafted": 3,
            "accepted": 1,
            "accepted_text": "de",
            "rejected_text": " f",
            "draft_s": 0.2,
            "source": None,
        },
        {
            "text": "gh",
            "t_s": 0.8,
            "step_s": 0.3,
            "drafted": 1,
            "accepted": 1,
            "accepted_text": "g",
            "rejected_text": "",
            "draft_s": 0.1,
            "source": None,
        },
    ]
    assert json.loads(json.dumps(result)) == result


def test_each_auto_step_lists_its_chosen_length_and_the_source_of_its_candidates():
    steps = [
        Step((1,), "a", 0, 0, 0.1, chosen=0),
        Step((2, 3), "bc", 2, 1, 0.3, (2, 9), "b", "x", chosen=2, source="prompt-lookup"),
    ]
    record = RunRecord("assisted", "assistant", 3, steps, total_s=0.3)
    first, second = stats.per_step(record)
    assert (first["chosen"], first["source"]) == (0, None)
    assert (second["chosen"], second["source"]) == (2, "prompt-lookup")


def expecting(tokens: float, cost: float, plain_s: float = 0.1, n: int = 1, chosen: int = 0):
    """An `auto` step that expected `tokens` tokens at `cost` plain steps of `plain_s`."""
    expected = {"expected_tokens": tokens, "expected_s": cost * plain_s, "plain_step_s": plain_s}
    return Step(tuple(range(n)), "x" * n, chosen, chosen, 0.1, chosen=chosen, **expected)


def test_the_policy_predicts_from_what_it_expected_step_by_step():
    plain_steps = RunRecord("assisted", "assistant", 3, [expecting(1.0, 1.0)] * 5)
    assert stats.policy_predicted_speedup(plain_steps) == 1.0  # exactly: it drafted nothing
    drafting = RunRecord("assisted", "assistant", 3, [expecting(3.0, 1.5, chosen=4)])
    assert stats.policy_predicted_speedup(drafting) == pytest.approx(2.0)
    # Σ E·T(1) / Σ cost, with T(1) as it stood at each step: 1 + 3 tokens' worth of plain
    # time, (0.1 + 3 × 0.2) s, over (0.1 + 1.5 × 0.2) s.
    both = RunRecord("assisted", "assistant", 3, [expecting(1, 1), expecting(3, 1.5, 0.2)])
    assert stats.policy_predicted_speedup(both) == pytest.approx(0.7 / 0.4)
    assert stats.policy_predicted_speedup(ASSISTED) is None  # not an `auto` run


def test_an_auto_run_reports_the_policys_prediction_and_a_constant_one_leviathans():
    steps = [expecting(1.0, 1.0, n=1), expecting(3.0, 1.5, n=3, chosen=2)]
    auto = RunRecord("assisted", "assistant", 7, steps, total_s=0.5)
    result = stats.report("pair", "cpu", "float32", PLAIN, auto)
    assert result["prediction"] == stats.POLICY
    assert result["predicted_speedup"] == pytest.approx((0.1 + 0.3) / (0.1 + 0.15), abs=1e-4)
    assert result["alpha"] is not None  # still reported beside it
    constant = stats.report("pair", "cpu", "float32", PLAIN, ASSISTED)
    assert constant["prediction"] == stats.LEVIATHAN
    alpha = stats.alpha_from_acceptance_rate(0.5, 3.0)
    assert constant["predicted_speedup"] == round(stats.predicted_speedup(alpha, 3.0, 0.2), 4)
    assert stats.report("pair", "cpu", "float32", PLAIN, None)["prediction"] is None


def test_each_auto_step_lists_what_the_policy_expected_of_it():
    record = RunRecord("assisted", "assistant", 3, [expecting(2.5, 1.25, n=2, chosen=2)])
    (row,) = stats.per_step(record)
    assert (row["expected_tokens"], row["expected_s"], row["plain_step_s"]) == (2.5, 0.125, 0.1)
    assert RunRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    assert "expected_s" not in stats.per_step(DRAFTED)[0]


def test_the_verify_cost_ratio_is_quoted_at_the_median_chosen_draft_or_at_four_rows():
    flat = [(1, 0.10), (2, 0.10), (3, 0.11), (4, 0.11), (5, 0.12)]
    assert stats.verify_cost_ratio(flat, 4) == pytest.approx(1.1)
    assert stats.verify_cost_ratio(flat, 9) is None and stats.verify_cost_ratio([], 1) is None
    # Where the policy drafted, its median γ + 1; where it mostly did not, γ = 3's 4 rows.
    assert stats.reference_rows([4, 1, 3, 4, 4], flat) == 5
    assert stats.reference_rows([0, 0, 1], flat) == 4
    assert stats.reference_rows([], flat) == 4
    assert stats.reference_rows([0], flat[:3]) == 3  # within the curve
    assert stats.reference_rows([2], []) is None


def test_record_round_trips_through_dict():
    again = RunRecord.from_dict(ASSISTED.to_dict())
    assert again == ASSISTED
    assert again.text == "x" * 10


def test_a_record_with_drafts_round_trips_through_json_and_an_old_one_still_loads():
    step = Step((5, 6), "ab", 3, 1, 0.4, (5, 7, 8), "a", "cd", 0.1)
    record = RunRecord("assisted", "assistant", 3, [step], total_s=0.4)
    assert RunRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    old = record.to_dict()
    for key in ("draft_ids", "accepted_text", "rejected_text", "draft_s"):
        del old["steps"][0][key]
    assert RunRecord.from_dict(old).steps[0] == Step((5, 6), "ab", 3, 1, 0.4)


def test_geometric_mean_and_median():
    assert stats.geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    assert stats.geometric_mean([]) is None
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 2, 3]) == 2.5
    assert math.isclose(stats.geometric_mean([2.0, 2.0, 2.0]), 2.0)
