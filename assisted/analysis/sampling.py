"""Speculative sampling, read from a sampled assisted run's record: why each draft was
accepted, what each committed token is, and the acceptance that the drafts' p and q lead
one to expect. Numbers in, numbers out (no torch); the terms are defined in
`assisted.analysis.stats`'s docstring.

Transformers accepts drafted token i with probability a_i = min(1, p_i/q_i), keeps the
draft up to its first rejection, and then draws the target's own token: from
max(0, p − q), renormalised, after a rejection (a *corrected* token), or from p after a
fully accepted draft (a *bonus* token). Given the draft, the accepted count A of a step
has P(A ≥ k) = a_1 ⋯ a_k, so E[A] = Σ_k a_1 ⋯ a_k and E[A²] = Σ_k (2k − 1) a_1 ⋯ a_k.
Summed over the steps, E[A] is the acceptance the run should show; its spread, from
the steps' variances, says how far chance alone moves the observed count from it (the
draws of different steps are independent given their drafts). A prompt-lookup draft has
q = 1: the target's own sample must equal the drafted token, with probability p.

The sampling check's settings, and its result in words: numbers in, numbers out.

The check itself, which draws the samples, is `assisted.bench.sampling_check`; its JSON
object is described in docs/json.md#the-sampling-check. No torch or numpy here, so the figures
and the verdicts that quote a check's sentence import neither.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from assisted.core.record import RunRecord, Step, rounded
from assisted.core.settings import RunSettings, SettingsError, validate_prompt

# What each committed token of a sampled assisted step is.
ACCEPTED = "accepted"  # a drafted token the target accepted
CORRECTED = "corrected"  # the target's, after a rejection: drawn from max(0, p − q)
BONUS = "bonus"  # the target's, after a fully accepted draft: drawn from p
TARGET = "target"  # the target's, in a step that drafted nothing: drawn from p
KINDS = (ACCEPTED, CORRECTED, BONUS, TARGET)


def accept_prob(p: float, q: float) -> float:
    """min(1, p/q): the probability that Transformers accepts a token drafted with
    probability q that the target gives probability p."""
    return 1.0 if q <= p else p / q


def accept_probs(step: Step) -> list[float] | None:
    """min(1, p/q) of each drafted token of `step`; None where its p and q were not
    recorded (a greedy run, or a record saved without them)."""
    if len(step.draft_p) != step.drafted or len(step.draft_q) != step.drafted:
        return None
    return [accept_prob(p, q) for p, q in zip(step.draft_p, step.draft_q, strict=True)]


def kinds(step: Step) -> list[str]:
    """The kind of each token `step` committed: its accepted candidates, then the target's
    own token where EOS or the length limit did not end the step first."""
    own = []
    if len(step.token_ids) > step.accepted:
        if step.drafted == 0:
            own = [TARGET]
        else:
            own = [BONUS if step.accepted == step.drafted else CORRECTED]
    return [ACCEPTED] * step.accepted + own


def expected_accepted(probs: Sequence[float]) -> tuple[float, float]:
    """The mean and variance of a step's accepted count, given each drafted token's
    acceptance probability, in draft order (the module's docstring)."""
    mean = second = 0.0
    reached = 1.0  # P(the first k candidates are all accepted)
    for k, prob in enumerate(probs, start=1):
        reached *= prob
        mean += reached
        second += (2 * k - 1) * reached
    return mean, second - mean * mean


def expected_acceptance(record: RunRecord) -> tuple[float | None, float | None]:
    """The expected acceptance rate of the run, Σ E[accepted] / Σ drafted over its steps,
    and its standard deviation, √(Σ Var[accepted]) / Σ drafted; (None, None) where a step
    that drafted lacks its p and q, or nothing was drafted."""
    mean = variance = 0.0
    drafted = 0
    for step in record.steps:
        if not step.drafted:
            continue
        probs = accept_probs(step)
        if probs is None:
            return None, None
        step_mean, step_variance = expected_accepted(probs)
        mean, variance = mean + step_mean, variance + step_variance
        drafted += step.drafted
    if not drafted:
        return None, None
    return mean / drafted, math.sqrt(max(variance, 0.0)) / drafted


def step_fields(step: Step) -> dict:
    """What a sampled assisted step's `per_step` entry adds: `drafts`, each drafted token
    with its p, q, min(1, p/q) and whether it was accepted (p, q and accept_prob null where
    not recorded), and `kinds`, one per committed token."""
    probs = accept_probs(step)
    drafts = []
    for i, token in enumerate(step.draft_ids):
        recorded = probs is not None
        drafts.append(
            {
                "token": token,
                "p": _significant(step.draft_p[i]) if recorded else None,
                "q": _significant(step.draft_q[i]) if recorded else None,
                "accept_prob": _significant(probs[i]) if recorded else None,
                "accepted": i < step.accepted,
            }
        )
    return {"drafts": drafts, "kinds": kinds(step)}


def run_fields(record: RunRecord) -> dict:
    """What a sampled assisted run's summary adds: `expected_acceptance_rate` and
    `expected_acceptance_sd` (`expected_acceptance`)."""
    rate, sd = expected_acceptance(record)
    return {"expected_acceptance_rate": rounded(rate), "expected_acceptance_sd": rounded(sd)}


# Observed and expected acceptance agree where they are at most this many standard
# deviations apart: chance alone puts about 1 run in 20 beyond 2 (near a normal spread).
AGREE_SDS = 2.0


def describe_acceptance(assisted: dict) -> str | None:
    """The observed acceptance rate beside the one the drafts' p and q lead one to expect,
    in a sentence, from a sampled run's summary (`stats.summarize`); None without both."""
    observed = assisted.get("acceptance_rate")
    expected, sd = assisted.get("expected_acceptance_rate"), assisted.get("expected_acceptance_sd")
    if observed is None or expected is None or sd is None:
        return None
    apart = abs(observed - expected)
    if apart <= AGREE_SDS * sd:
        verdict = "they agree within chance: each draft was accepted as min(1, p/q) says"
    else:
        verdict = (
            f"more than {AGREE_SDS:g} standard deviations apart: the acceptances do not follow "
            "min(1, p/q), which looks like a bug"
        )
    return (
        f"observed {observed:.1%}, expected {expected:.1%} ± {sd:.1%} from each draft's p and "
        f"q (a candidate is accepted with probability min(1, p/q) if every one before it "
        f"was); {verdict}"
    )


def _significant(value: float) -> float:
    """`value` to 4 significant digits: a rejected draft's p can be 1e-6, not 0."""
    return float(f"{value:.4g}")


PROMPT = "Name one fruit. Answer with a single word."
SAMPLES = 100  # N per set: minutes of a busy 2-core CPU (docs/benchmarks.md#sampling-check)
TOKENS = 3  # k
MAX_SAMPLES = 2000
ALPHA = 0.05  # the false-alarm rate the bound allows


@dataclass(frozen=True)
class CheckSettings:
    """What the check draws: `samples` (N) per set of the first `tokens` (k) new tokens of
    `prompt`, at `temperature` and `top_p`; seeds from `seed` on. `control`: also run the
    negative control (and estimate the power from it)."""

    samples: int = SAMPLES
    tokens: int = TOKENS
    prompt: str = PROMPT
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    alpha: float = ALPHA
    control: bool = True

    def validate(self) -> CheckSettings:
        if not 2 <= self.samples <= MAX_SAMPLES:
            raise SettingsError(f"samples must be 2 to {MAX_SAMPLES}, not {self.samples}")
        if not 0.0 < self.alpha < 1.0:
            raise SettingsError(f"alpha must be in (0, 1), not {self.alpha}")
        if self.tokens < 2:
            # With one new token Transformers drafts nothing: the target's own token is all.
            raise SettingsError("tokens must be at least 2, so that drafts get verified")
        validate_prompt(self.prompt)
        self.run_settings().validate()
        return self

    def run_settings(self) -> RunSettings:
        return RunSettings(
            max_new_tokens=self.tokens,
            sample=True,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=self.seed,
        )

    def draws(self) -> int:
        """Samples drawn in all: two plain sets, the assisted one and the control's."""
        return self.samples * (4 if self.control else 3)


def sentence(result: dict) -> str:
    """The check's result in one sentence, for people (the app's summary uses it)."""
    verdict = "within" if result["passed"] else "beyond"
    text = (
        f"Checked on {result['n']} samples of the first {result['k']} tokens: TV "
        f"{result['tv']:.3f} between assisted and plain samples against {result['tv_plain']:.3f} "
        f"between two plain sets, {verdict} the bound {result['bound']:.3f} "
        f"(α = {result['alpha']:.0%})"
    )
    control = result.get("control")
    if control is not None:
        caught = "flagged" if control["flagged"] else "NOT flagged"
        text += f"; a verifier that keeps every draft was {caught} (TV {control['tv']:.3f})"
    return text + "."


def card(result: dict) -> str:
    """The result as a few lines of text."""
    drafting = result["assisted"]
    rate = drafting["acceptance_rate"]
    lines = [
        f"Sampling check: {result['pair']} on {result['device']} ({result['dtype']}), "
        f"{result['n']} samples per set of the first {result['k']} tokens, temperature "
        f"{result['temperature']:g}, top-p {result['top_p']:g}",
        f"prompt: {result['prompt']!r} ({result['prompt_tokens']} tokens); "
        f"{result['outcomes']} distinct outcomes",
        f"{'TV assisted vs plain':26}{result['tv']:.3f}   bound {result['bound']:.3f}   "
        f"p = {result['p_value']:.3f}   {'passed' if result['passed'] else 'FAILED'}",
        f"{'TV plain vs plain':26}{result['tv_plain']:.3f}",
        f"{'assisted drafted':26}{drafting['drafted']} in {drafting['steps']} steps, "
        f"accepted {drafting['accepted']}" + (f" ({rate:.0%})" if rate is not None else ""),
    ]
    control, power = result["control"], result["power"]
    if control is not None:
        lines.append(
            f"{'control (keeps drafts)':26}{control['tv']:.3f}   bound {control['bound']:.3f}   "
            f"p = {control['p_value']:.3f}   {'flagged' if control['flagged'] else 'NOT flagged'}"
        )
        detected = power["tv"]
        lines.append(
            f"{'power':26}"
            + (
                f"TV {detected:.3f} detected with {power['probability']:.0%} probability"
                if detected is not None
                else "not even the control's distribution is detected "
                f"with {power['probability']:.0%} probability"
            )
        )
    lines.append(f"{'seconds':26}{result['seconds']:.0f}")
    lines.append("top outcomes (counts per set):")
    names = [name for name in result["top"][0] if name != "text"] if result["top"] else []
    lines.append(f"  {'':24}" + "".join(f"{name:>10}" for name in names))
    for row in result["top"]:
        lines.append(f"  {row['text']!r:24}" + "".join(f"{row[name]:>10}" for name in names))
    return "\n".join(lines)
