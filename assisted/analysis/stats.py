"""Statistics of decoding runs: every figure of a run and of a comparison, derived here from
the raw per-step record (`RunRecord`), never accumulated ad hoc.

Numbers in, numbers out: no torch, numpy or gradio. Each term the figures and the JSON use
(step, draft, accepted, speedup, the fitted and the predicted speedup, ...) is defined once,
in docs/json.md ("Terms").

When and why an `auto` run kept its assistant from drafting, from its record's steps
(`Step.held_back`; the reasons are `assisted.core.record`'s): the figures of the JSON, and
the sentence the app's summary, the CLI and the benchmark's card say.

The first-draft rule's outcome in a run is one of:
- "at once": the assistant drafted at the first step it was weighed, its read of the prompt
  priced and paid for;
- "waited": it drafted after steps where that read could not pay yet (`first-draft`: the
  answer, running on, came to be expected to run long enough);
- "declined": it never drafted, because the read could not pay over the tokens the run had
  left (`first-draft`): the reason is the run's last such step's.
Records written before the wait rule was folded into the first-draft rule also hold
`waiting` steps (`assisted.core.record`), counted as the rule's.

Numbers in, words out: no torch.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from assisted.analysis import divergence, oracle, sampling
from assisted.core.record import (
    DIVERGENCE,
    ORACLE,
    PREDICTION,
    HeldBack,
    RunRecord,
    attempted,
    median,
    rounded,
)
from assisted.core.settings import DrafterKind

AT_ONCE, WAITED, DECLINED = "at once", "waited", "declined"
_FIRST_DRAFT_RULE = (HeldBack.FIRST_DRAFT, HeldBack.WAITING)


def held_back(record: RunRecord) -> dict[str, int]:
    """Steps per reason the assistant was held back, in the reasons' order; none: {}."""
    counts = Counter(step.held_back for step in record.steps if step.held_back is not None)
    return {str(reason): counts[reason] for reason in HeldBack if counts[reason]}


def first_draft(record: RunRecord) -> tuple[str, HeldBack | None] | None:
    """The first-draft rule's outcome in an `auto` run with an assistant model (the module's
    note) and the reason that held the assistant back last before it, if any; None for a run
    where the rule never applied (plain, another schedule, no assistant model)."""
    if record.mode != "assisted" or record.drafter is None:
        return None
    if not DrafterKind(record.drafter).has_model:  # a name, in records read from JSON
        return None
    if not record.steps or record.steps[0].expected_tokens is None:
        return None  # not an `auto` run: nothing weighed the assistant's read
    reason = None
    for step in record.steps:
        if step.source == record.drafter:
            return (WAITED, reason) if reason is not None else (AT_ONCE, None)
        if step.held_back in _FIRST_DRAFT_RULE:
            reason = step.held_back
    return (DECLINED, reason) if reason is not None else None


def summary_fields(record: RunRecord) -> dict:
    """The JSON's fields (docs/json.md): `first_draft` and `first_draft_reason` (null where
    the rule never applied), and `held_back`, steps per reason."""
    outcome = first_draft(record)
    return {
        "first_draft": outcome[0] if outcome else None,
        "first_draft_reason": str(outcome[1]) if outcome and outcome[1] else None,
        "held_back": held_back(record),
    }


def describe(summary: dict) -> str | None:
    """What held the assistant back in a run, in words, from its JSON summary; None where
    nothing did."""
    outcome, reason = summary.get("first_draft"), summary.get("first_draft_reason")
    counts = summary.get("held_back") or {}
    parts = []
    if outcome == DECLINED and reason:
        parts.append(f"the assistant never drafted: {HeldBack(reason).words}")
    elif outcome == WAITED:
        waited = sum(counts.get(str(rule), 0) for rule in _FIRST_DRAFT_RULE)
        parts.append(
            f"the assistant started after {waited} step{'s' * (waited != 1)} waiting for its "
            "first read of the prompt to pay"
        )
    for other in (HeldBack.CATCH_UP, HeldBack.FLOOR):
        steps = counts.get(str(other), 0)
        if steps:
            parts.append(
                f"{steps} step{'s' * (steps != 1)} held the assistant back because {other.words}"
            )
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def prompt_fields(assisted: Sequence[RunRecord]) -> dict:
    """A benchmark prompt's fields (docs/json.md): how the first-draft rule went in most of
    its assisted runs, why, and in how many of them."""
    outcomes = Counter(first_draft(record) for record in assisted)
    outcomes.pop(None, None)
    if not outcomes:
        return {"first_draft": None, "first_draft_reason": None, "first_draft_runs": 0}
    (outcome, reason), runs = outcomes.most_common(1)[0]
    return {
        "first_draft": outcome,
        "first_draft_reason": str(reason) if reason else None,
        "first_draft_runs": runs,
    }


def card_lines(rows: Sequence[dict]) -> list[str]:
    """The benchmark card's lines for the prompts (`rows`, with `prompt_fields`) where the
    first-draft rule kept the assistant from drafting at once: a heading, a line each and a
    blank line; none where there are none."""
    lines = []
    for row in rows:
        outcome, reason = row.get("first_draft"), row.get("first_draft_reason")
        runs = f"in {row['first_draft_runs']} of {row['repeats']} runs"
        label = f"  {row['question_id']} ({row['drafter']})"
        if outcome == DECLINED:
            because = HeldBack(reason).words if reason else "it was never worth it"
            lines.append(f"{label}: declined {runs}: {because}")
        elif outcome == WAITED:
            lines.append(f"{label}: started late {runs}, waiting for its read of the prompt to pay")
    if not lines:
        return []
    return ["First draft: where the assistant's read of the prompt kept it back", *lines, ""]


# Which model a `predicted_speedup` comes from (the `prediction` key), what the cards call
# it, and the word for the figure: the policy predicts; Leviathan et al.'s model, fed with
# α and c from the same run, is fitted to it.
LEVIATHAN = "leviathan-fitted"  # Leviathan et al. 2023, from the run's own α, γ and c
LEVIATHAN_BEFORE = "leviathan"  # the same, as saved reports with the shorter key name it
POLICY = "policy"  # the `auto` policy's per-step expectations
PREDICTION_NAMES = {
    LEVIATHAN: "Leviathan et al., fitted to the run",
    LEVIATHAN_BEFORE: "Leviathan et al., fitted to the run",
    POLICY: "the auto policy's expectations",
}


def speedup_word(prediction: str | None) -> str:
    """What to call a `predicted_speedup` made by `prediction`: "predicted" for the `auto`
    policy's forecast, "fitted" for Leviathan et al.'s model solved from the same run."""
    return "predicted" if prediction == POLICY else "fitted"


def new_tokens(record: RunRecord) -> int:
    return sum(len(step.token_ids) for step in record.steps)


def ttft_s(record: RunRecord) -> float | None:
    return record.steps[0].t_s if record.steps else None


def tokens_per_s(record: RunRecord) -> float:
    return new_tokens(record) / record.total_s if record.total_s > 0 else 0.0


def decode_tokens_per_s(record: RunRecord) -> float | None:
    if len(record.steps) < 2:
        return None
    first = record.steps[0]
    elapsed = record.steps[-1].t_s - first.t_s
    return (new_tokens(record) - len(first.token_ids)) / elapsed if elapsed > 0 else None


def drafted(record: RunRecord) -> int:
    return sum(step.drafted for step in record.steps)


def accepted(record: RunRecord) -> int:
    return sum(step.accepted for step in record.steps)


def acceptance_rate(record: RunRecord) -> float | None:
    total = drafted(record)
    return accepted(record) / total if total else None


def tokens_per_step(record: RunRecord) -> float | None:
    return new_tokens(record) / len(record.steps) if record.steps else None


def mean_drafted(record: RunRecord) -> float | None:
    return drafted(record) / len(record.steps) if record.steps else None


def accept_histogram(record: RunRecord) -> list[int]:
    if not record.steps:
        return []
    counts = [0] * (max(step.accepted for step in record.steps) + 1)
    for step in record.steps:
        counts[step.accepted] += 1
    return counts


def position_acceptance(record: RunRecord) -> list[float]:
    longest = max((step.drafted for step in record.steps), default=0)
    rates = []
    for position in range(1, longest + 1):
        tried = [step for step in record.steps if step.drafted >= position]
        rates.append(sum(step.accepted >= position for step in tried) / len(tried))
    return rates


def step_s(record: RunRecord) -> list[float]:
    times = [step.t_s for step in record.steps]
    return [t - previous for previous, t in zip([0.0, *times], times, strict=False)]


def step_times(record: RunRecord) -> list[tuple[float | None, float]]:
    """(draft_s, target_s) of each step; draft_s is None where drafting is not timed."""
    return [
        (step.draft_s, seconds - (step.draft_s or 0.0))
        for step, seconds in zip(record.steps, step_s(record), strict=True)
    ]


def speedup(plain: RunRecord, assisted: RunRecord) -> float | None:
    plain_rate = tokens_per_s(plain)
    return tokens_per_s(assisted) / plain_rate if plain_rate > 0 else None


def target_s_per_token(plain: RunRecord) -> float | None:
    rate = decode_tokens_per_s(plain)
    return 1.0 / rate if rate else None


def cost_ratio(plain: RunRecord, assisted: RunRecord) -> float | None:
    """c = drafter seconds per drafted token / target seconds per plain decoding step."""
    if not DrafterKind(assisted.drafter).times_drafting:  # prompt lookup: an n-gram search
        return 0.0
    target = target_s_per_token(plain)
    if not assisted.draft_forward_s or not target:
        return None
    draft = median(assisted.draft_forward_s)
    return draft / target


def expected_tokens_per_step(alpha: float, gamma: float) -> float:
    if alpha >= 1.0:
        return gamma + 1
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def acceptance_rate_for_alpha(alpha: float, gamma: float) -> float:
    """Measured Σaccepted/Σdrafted expected under the i.i.d. model for a given α."""
    if gamma <= 0:
        return 0.0
    return (expected_tokens_per_step(alpha, gamma) - 1) / gamma


def alpha_from_acceptance_rate(rate: float, gamma: float) -> float:
    """Invert `acceptance_rate_for_alpha` by bisection (it rises monotonically in α)."""
    if rate <= 0:
        return 0.0
    if rate >= 1:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if acceptance_rate_for_alpha(middle, gamma) < rate:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def predicted_speedup(alpha: float, gamma: float, c: float) -> float:
    return expected_tokens_per_step(alpha, gamma) / (gamma * c + 1)


def policy_predicted_speedup(record: RunRecord) -> float | None:
    """The `auto` policy's own prediction, Σ E_i·T1_i / Σ cost_i over the steps that carry
    its expectation (see the module's docstring); None where none does."""
    expected = [step for step in record.steps if step.expected_s is not None]
    spent_s = sum(step.expected_s for step in expected)
    if not spent_s:
        return None
    return sum(step.expected_tokens * step.plain_step_s for step in expected) / spent_s


def per_step(record: RunRecord) -> list[dict]:
    """One object per step: what it committed and when; in assisted runs also its draft,
    as the accepted text (the start of `text`) and the rejected remainder, and in sampled
    ones each draft's p and q and each token's kind (`sampling.step_fields`)."""
    rows = []
    for step, seconds in zip(record.steps, step_s(record), strict=True):
        row = {"text": step.text, "t_s": rounded(step.t_s), "step_s": rounded(seconds)}
        if record.mode == "assisted":
            row.update(
                drafted=step.drafted,
                accepted=step.accepted,
                accepted_text=step.accepted_text,
                rejected_text=step.rejected_text,
                draft_s=rounded(step.draft_s),
                source=step.source,
            )
            if step.chosen is not None:
                row["chosen"] = step.chosen
            if step.expected_s is not None:
                row.update(
                    expected_tokens=rounded(step.expected_tokens),
                    expected_s=rounded(step.expected_s, 6),
                    plain_step_s=rounded(step.plain_step_s, 6),
                    held_back=step.held_back,
                )
            if record.sampled:
                row.update(sampling.step_fields(step))
        rows.append(row)
    return rows


def summarize(record: RunRecord, steps: bool = True) -> dict:
    """The per-run figures of the CLI's and the API's JSON. `steps` is the count of steps;
    `per_step` lists them (left out without `steps`: it grows with the run)."""
    summary = {
        "text": record.text,
        "new_tokens": new_tokens(record),
        "ttft_s": rounded(ttft_s(record)),
        "total_s": rounded(record.total_s),
        "tokens_per_s": rounded(tokens_per_s(record)),
        "decode_tokens_per_s": rounded(decode_tokens_per_s(record)),
        "steps": len(record.steps),
        **({"per_step": per_step(record)} if steps else {}),
        "stopped": record.stopped,
    }
    if record.mode == "assisted":
        summary.update(
            drafter=record.drafter,
            assistant_precision=record.assistant_precision,
            drafted=drafted(record),
            accepted=accepted(record),
            acceptance_rate=rounded(acceptance_rate(record)),
            tokens_per_step=rounded(tokens_per_step(record)),
            accept_histogram=accept_histogram(record),
            position_acceptance=[rounded(r) for r in position_acceptance(record)],
            **summary_fields(record),
        )
        if record.sampled:
            summary.update(sampling.run_fields(record))
        if record.verify_cost_s:
            summary["verify_cost_s"] = [[k, rounded(s, 6)] for k, s in record.verify_cost_s]
        if record.calibration:
            calibration = record.calibration
            summary["calibration"] = {
                "source": calibration.source,
                "seconds": rounded(calibration.seconds, 2),
                "file": calibration.file,
                "checked": list(calibration.checked),
                "corrected": list(calibration.corrected),
            }
        if record.acceptance_band is not None:
            summary["acceptance_band"] = record.acceptance_band
        if record.drafting_path is not None:
            path = record.drafting_path
            summary.update(
                drafting_path=path.path,
                drafting_path_reason=path.reason,
                drafting_self_check=path.check,
                drafting_self_check_judged=path.judged,
                drafting_self_check_gap=path.gap,
                drafting_self_check_gap_at=path.gap_at or None,
                graph_capture_s=rounded(path.capture_s, 3),
                drafting_s_per_token=rounded(drafting_s_per_token(record), 6),
            )
    return summary


def describe_drafting(summary: dict) -> str | None:
    """An assisted run's drafting path in words, from its JSON summary: the path, its
    drafting time per token and why it took that path; None without an assistant model."""
    path = summary.get("drafting_path")
    if path is None:
        return None
    per_token = summary.get("drafting_s_per_token")
    cost = "" if per_token is None else f", {per_token * 1000:.2f} ms a drafted token"
    return f"{path}{cost} ({summary.get('drafting_path_reason')})"


def drafting_s_per_token(record: RunRecord) -> float | None:
    """The assistant's seconds per drafted token over the steps it drafted, its catch-ups
    of committed ids included (each step's `draft_s`); None where it drafted nothing or
    its drafting was not timed."""
    timed = [
        step
        for step in record.steps
        if step.drafted
        and step.draft_s is not None
        and (step.source is None or step.source.times_drafting)
    ]
    drafted = sum(step.drafted for step in timed)
    return sum(step.draft_s for step in timed) / drafted if drafted else None


def compare_runs(
    plain: RunRecord, assisted: RunRecord, failures: dict[str, str] | None = None
) -> dict:
    """Speedup, theory beside measurement, and losslessness of one plain/assisted pair.
    The prediction is the `auto` policy's own where its steps carry one, else Leviathan et
    al.'s; `prediction` names it (None without a prediction). The prediction and the
    divergence verdict are analyses: where one fails, its figures are empty and `failures`
    keeps why (`assisted.core.record`); the measured speedup stands."""
    failures = {} if failures is None else failures
    predicted = dict.fromkeys(_PREDICTION_KEYS)
    with attempted(PREDICTION, failures):
        predicted = _prediction(plain, assisted)
    with attempted(DIVERGENCE, failures) as judging:
        found = divergence.explain(plain, assisted)
    if judging.failure is not None:
        found = divergence.unjudged(plain, assisted, f"could not be judged: {judging.failure}")
    return {
        "speedup": rounded(speedup(plain, assisted)),
        **predicted,
        "identical": found is None,
        "first_divergence": found["index"] if found else None,
        "divergence": found,
        # Sampled runs are two draws: what a check of their distributions found, null where
        # none was made in this run (`assisted.analysis.divergence.describe_sampled`).
        **({"sampling_check": None} if plain.sampled or assisted.sampled else {}),
    }


_PREDICTION_KEYS = ("predicted_speedup", "prediction", "alpha", "mean_drafted", "cost_ratio")


def _prediction(plain: RunRecord, assisted: RunRecord) -> dict:
    """`compare_runs`'s prediction: the figure, the model it comes from, and Leviathan et al.'s
    terms solved from the run."""
    c = cost_ratio(plain, assisted)
    rate = acceptance_rate(assisted)
    gamma = mean_drafted(assisted)
    alpha = predicted = None
    if rate is not None and gamma:
        alpha = alpha_from_acceptance_rate(rate, gamma)
        if c is not None:
            predicted = predicted_speedup(alpha, gamma, c)
    model = LEVIATHAN if predicted is not None else None
    by_policy = policy_predicted_speedup(assisted)
    if by_policy is not None:
        predicted, model = by_policy, POLICY
    return {
        "predicted_speedup": rounded(predicted),
        "prediction": model,
        "alpha": rounded(alpha),
        "mean_drafted": rounded(gamma),
        "cost_ratio": rounded(c),
    }


def verify_cost_ratio(curve: Sequence[tuple[int, float]], rows: int) -> float | None:
    """T(rows) / T(1) from `verify_cost_s`; None where the curve lacks either."""
    seconds = dict(curve)
    if rows not in seconds or not seconds.get(1):
        return None
    return seconds[rows] / seconds[1]


REFERENCE_ROWS = 4  # γ = 3 + the target's own row: the embedded pair's default draft


def reference_rows(chosen: Sequence[int], curve: Sequence[tuple[int, float]]) -> int | None:
    """The rows at which to quote the verify cost ratio of an `auto` run: the median γ the
    policy chose, + 1, where that is a draft at all (it prices what the policy bought);
    otherwise `REFERENCE_ROWS` (it prices the draft the policy turned down). Kept within the
    curve; None without one."""
    largest = max((k for k, _ in curve), default=0)
    if largest < 2:
        return None
    picked = math.ceil(median(chosen)) + 1 if chosen else 0
    return min(picked if picked >= 2 else REFERENCE_ROWS, largest)


def geometric_mean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def report(
    pair: str,
    device: str,
    dtype: str,
    plain: RunRecord | None,
    assisted: RunRecord | None,
    steps: bool = True,
    pooled: Sequence[RunRecord] = (),
) -> dict:
    """The comparison as one JSON-ready dict: the CLI's `--json` line and the API's result;
    each run's `per_step` only with `steps`; the oracle's T(k) priced from the steps of
    `pooled` too (`assisted.analysis.oracle.report`). `analysis_errors` names each analysis that
    failed, with its fault (`assisted.core.record`): the runs' figures are there all
    the same."""
    any_run = plain or assisted
    failures = {
        part: message
        for run in (plain, assisted)
        if run is not None
        for part, message in run.analysis_errors.items()
    }
    result = {
        "pair": pair,
        "device": device,
        "dtype": dtype,
        "prompt_tokens": any_run.prompt_tokens if any_run else None,
        "plain": summarize(plain, steps) if plain else None,
        "assisted": summarize(assisted, steps) if assisted else None,
        "speedup": None,
        "predicted_speedup": None,
        "prediction": None,
        "identical": None,
        "first_divergence": None,
        "divergence": None,
        "oracle": None,
        "analysis_errors": failures,
    }
    if plain and assisted:
        result.update(compare_runs(plain, assisted, failures))
    if assisted:
        with attempted(ORACLE, failures) as finding:
            result["oracle"] = oracle.report(plain, assisted, pooled)
        if finding.failure is not None:
            result["oracle"] = oracle.failed(finding.failure)
    return result
