"""The sampling check's settings, and its result in words: numbers in, numbers out.

The check itself, which draws the samples, is `assisted.bench.sampling_check`; its JSON
object is described in docs/json.md#the-sampling-check. No torch or numpy here, so the figures
and the verdicts that quote a check's sentence import neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from assisted.core.settings import RunSettings, SettingsError, validate_prompt

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
