"""Statistics of decoding runs: numbers in, numbers out (imports neither torch nor gradio).

Every figure the product shows is derived here from a `RunRecord`, never accumulated ad hoc.

Terms (one definition each, used everywhere):

- **step**: one target forward pass that verifies candidates. Plain decoding makes one
  step per token.
- **draft**: the candidates the target verified in a step, as the target's token ids (for
  universal assisted generation, already translated from the assistant's tokens).
- **drafted** (γ): candidates the drafter proposed in a step. **accepted**: those the
  step committed, the common prefix of the draft and the step's tokens. A step emits
  accepted + 1 tokens (the +1 is the target's own token) unless EOS or the length limit
  cuts it.
- **rejected**: drafted − accepted, the candidates a step did not commit: the target
  disagreed with the first of them, or EOS or the length limit ended the step before it.
- **accepted text**, **rejected text**: the draft's text, decoded after the text committed
  before the step, split at the first rejection. The accepted text is also the start of
  the step's text.
- **new tokens**: tokens generated after the prompt.
- **ttft_s** (time to first token): seconds from the start of the run to the first step's
  tokens; it includes the prompt's prefill.
- **total_s**: seconds from the start of the run to the end of generation.
- **step_s** (step time): seconds from the previous step's tokens to this step's; for the
  first step, from the start of the run, so it includes the prefill.
- **draft_s** (drafting time): seconds of the drafter's forward passes in a step, the
  assistant's prefill and catch-up included. Timed for assistant models and early exit;
  not for prompt lookup, whose drafting is a search of the token ids.
- **target_s** (target time): step time − drafting time, the target's forward pass and
  the loop around it; the whole step where drafting is not timed apart.
- **tokens_per_s**: new tokens / total_s (end to end, prefill included).
- **decode_tokens_per_s**: tokens after the first step / (total_s − ttft_s): the steady
  decoding rate with the prefill left out.
- **acceptance rate**: Σaccepted / Σdrafted.
- **tokens per step**: new tokens / steps (1.0 for plain decoding).
- **accept histogram**: entry k counts the steps that accepted exactly k candidates.
- **position acceptance**: entry i is the share of steps that drafted at least i + 1
  candidates in which candidate i + 1 was accepted: it shows where in a draft the first
  rejection falls.
- **speedup**: assisted tokens_per_s / plain tokens_per_s. For runs of equal length this is
  plain total_s / assisted total_s.
- **cost ratio c**: time of one drafter forward pass per token / time of one plain target
  step per token (from the plain run's decode rate). 0 for prompt lookup.
- **fitted speedup** (Leviathan et al. 2023, "Fast Inference from Transformers via
  Speculative Decoding", arXiv:2211.17192): with per-token acceptance probability α, γ
  drafted per step and cost ratio c, expected tokens per step = (1 − α^(γ+1)) / (1 − α) and
  speedup = (1 − α^(γ+1)) / ((1 − α)(γc + 1)). The measured acceptance rate is *not* α:
  under the paper's i.i.d. model it equals α(1 − α^γ) / (γ(1 − α)). We solve that for α,
  with γ the mean drafted per step (an approximation when the draft length varies).
  The model ignores verification cost growing with γ, which is real on CPUs. α and c are
  solved from the very run it is set beside, so it is a fit to that run, not a forecast:
  it says how far the run's own acceptance and drafting cost explain its speedup. It is
  what the constant and heuristic schedules carry (JSON: `predicted_speedup`, kept for its
  readers, with `prediction`: "leviathan-fitted"; reports made before the rename say
  "leviathan").
- **predicted speedup**, the policy's prediction (`auto` schedule only; `prediction`:
  "policy"), a forecast made step by step before each step ran: a step there may
  draft from the assistant, from a prompt-lookup match or not at all, so one α and one γ
  describe nothing. Instead, at each step i the policy records what it expected of its
  choice when it made it (`assisted.policy.Expectation`): E_i, the tokens the step would
  commit (its acceptance estimates, not the optimistic ones it chooses with; 1 for a plain
  step), cost_i, the seconds the step would take (catch-up, call overhead and, where the
  choice starts the assistant model, its prefill included), and T1_i, the seconds of a
  plain step then. predicted speedup = Σ E_i·T1_i / Σ cost_i: the time plain decoding
  would need for the tokens the policy expected, over the time it expected to spend. It
  covers decoding steps only: the first step's cost leaves out the target's prefill of the
  prompt (fused with its verification), which plain and assisted runs both pay, and which
  pulls the measured speedup of a short answer towards 1.
- **chosen** (`auto` schedule only): the γ the drafting policy asked for at a step;
  drafted can fall short of it (confidence threshold, a shorter prompt-lookup match).
- **expected_tokens**, **expected_s**, **plain_step_s** (`auto` schedule only): a step's
  E_i, cost_i and T1_i of the policy prediction.
- **verify_cost_s** (`auto` schedule only): T(k), the target's seconds to verify k rows
  (the last committed token + k − 1 candidates), as [k, seconds] for k = 1 … cap + 1:
  calibrated before the run, refined by its timed steps (see assisted.costs).
- **calibration** (`auto` schedule only): where those costs came from, `"timed"` by this
  process or read from `"disk"`, where an earlier process on this machine left them
  (`file`; see assisted.learnt_store); `checked`, the costs read from disk that this
  process timed again ("T(1)", "T(9)", "drafting int8"), and `corrected`, those whose
  new time was lower and replaced the file's (see assisted.auto.calibrate); `seconds`,
  how long this process spent timing, the checks included.
- **source**: where a step's candidates came from, a drafter kind (`assisted.drafters`);
  under `auto` it can change from step to step. None for a step that drafted nothing.
- **identical**: the assisted run committed exactly the plain run's tokens. Sampled runs
  are two draws, which need not match: `sampling_check` is what a check of them found.
  **first divergence**: the index of the first new token where they differ.
  **divergence**: that token with the evidence, each run's top two tokens and logits
  there, and a verdict, **near-tie** (rounding can explain it) or **unexplained** (it
  looks like a bug); defined in `assisted.divergence`.
- **p**, **q** (sampled assisted runs): a drafted token's probability under the target and
  under the drafter, after the run's temperature and top-p, as Transformers used them
  (q = 1 for a prompt-lookup draft). **accept_prob**: min(1, p/q), the probability that
  the token is accepted. **kinds**: what each committed token is: "accepted" (a drafted
  token), "corrected" (the target's after a rejection, drawn from max(0, p − q)),
  "bonus" (the target's after a fully accepted draft, drawn from p) or "target" (the
  target's in a step that drafted nothing). **expected acceptance rate**: Σ E[accepted] /
  Σ drafted, E[accepted] = Σ_k accept_prob_1 ⋯ accept_prob_k of each step's draft; it
  compares with the acceptance rate, within its standard deviation (`assisted.sampling`).
- **verify cost ratio** at k rows: T(k) / T(1), what verifying k rows costs in one-row
  (plain) steps. Near 1, drafts are nearly free to verify (a GPU, bf16 on a CPU with
  native bf16); near k, each candidate costs as much as a plain step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from assisted import oracle, sampling
from assisted.divergence import explain as explain_divergence
from assisted.drafters import DrafterKind
from assisted.record import RunRecord

# Which model a `predicted_speedup` comes from (the `prediction` key), what the cards call
# it, and the word for the figure: the policy predicts; Leviathan et al.'s model, fed with
# α and c from the same run, is fitted to it.
LEVIATHAN = "leviathan-fitted"  # Leviathan et al. 2023, from the run's own α, γ and c
LEVIATHAN_BEFORE = "leviathan"  # the same, in reports made before it was named a fit
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
    draft = sorted(assisted.draft_forward_s)[len(assisted.draft_forward_s) // 2]
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
        row = {"text": step.text, "t_s": _round(step.t_s), "step_s": _round(seconds)}
        if record.mode == "assisted":
            row.update(
                drafted=step.drafted,
                accepted=step.accepted,
                accepted_text=step.accepted_text,
                rejected_text=step.rejected_text,
                draft_s=_round(step.draft_s),
                source=step.source,
            )
            if step.chosen is not None:
                row["chosen"] = step.chosen
            if step.expected_s is not None:
                row.update(
                    expected_tokens=_round(step.expected_tokens),
                    expected_s=_round(step.expected_s, 6),
                    plain_step_s=_round(step.plain_step_s, 6),
                )
            if record.sampled:
                row.update(sampling.step_fields(step))
        rows.append(row)
    return rows


def summarize(record: RunRecord) -> dict:
    """The per-run figures of the CLI's and the API's JSON. `steps` is the count of steps;
    `per_step` lists them."""
    summary = {
        "text": record.text,
        "new_tokens": new_tokens(record),
        "ttft_s": _round(ttft_s(record)),
        "total_s": _round(record.total_s),
        "tokens_per_s": _round(tokens_per_s(record)),
        "decode_tokens_per_s": _round(decode_tokens_per_s(record)),
        "steps": len(record.steps),
        "per_step": per_step(record),
        "stopped": record.stopped,
    }
    if record.mode == "assisted":
        summary.update(
            drafter=record.drafter,
            assistant_precision=record.assistant_precision,
            drafted=drafted(record),
            accepted=accepted(record),
            acceptance_rate=_round(acceptance_rate(record)),
            tokens_per_step=_round(tokens_per_step(record)),
            accept_histogram=accept_histogram(record),
            position_acceptance=[_round(r) for r in position_acceptance(record)],
        )
        if record.sampled:
            summary.update(sampling.run_fields(record))
        if record.verify_cost_s:
            summary["verify_cost_s"] = [[k, _round(s, 6)] for k, s in record.verify_cost_s]
        if record.calibration:
            calibration = record.calibration
            summary["calibration"] = {
                "source": calibration.source,
                "seconds": _round(calibration.seconds, 2),
                "file": calibration.file,
                "checked": list(calibration.checked),
                "corrected": list(calibration.corrected),
            }
        if record.acceptance_band is not None:
            summary["acceptance_band"] = record.acceptance_band
    return summary


def compare(plain: RunRecord, assisted: RunRecord) -> dict:
    """Speedup, theory beside measurement, and losslessness of one plain/assisted pair.
    The prediction is the `auto` policy's own where its steps carry one, else Leviathan et
    al.'s; `prediction` names it (None without a prediction)."""
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
    divergence = explain_divergence(plain, assisted)
    return {
        "speedup": _round(speedup(plain, assisted)),
        "predicted_speedup": _round(predicted),
        "prediction": model,
        "alpha": _round(alpha),
        "mean_drafted": _round(gamma),
        "cost_ratio": _round(c),
        "identical": divergence is None,
        "first_divergence": divergence["index"] if divergence else None,
        "divergence": divergence,
        # Sampled runs are two draws: what a check of their distributions found, null where
        # none was made in this run (`assisted.divergence.describe_sampled`).
        **({"sampling_check": None} if plain.sampled or assisted.sampled else {}),
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
    picked = sorted(chosen)[len(chosen) // 2] + 1 if chosen else 0
    return min(picked if picked >= 2 else REFERENCE_ROWS, largest)


def geometric_mean(values: Sequence[float]) -> float | None:
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def median(values: Sequence[float]) -> float | None:
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def report(
    pair: str,
    device: str,
    dtype: str,
    plain: RunRecord | None,
    assisted: RunRecord | None,
) -> dict:
    """The comparison as one JSON-ready dict: the CLI's `--json` line and the API's result."""
    any_run = plain or assisted
    result = {
        "pair": pair,
        "device": device,
        "dtype": dtype,
        "prompt_tokens": any_run.prompt_tokens if any_run else None,
        "plain": summarize(plain) if plain else None,
        "assisted": summarize(assisted) if assisted else None,
        "speedup": None,
        "predicted_speedup": None,
        "prediction": None,
        "identical": None,
        "first_divergence": None,
        "divergence": None,
        "oracle": None,
    }
    if plain and assisted:
        result.update(compare(plain, assisted))
    if assisted:
        result["oracle"] = oracle.report(plain, assisted)
    return result
