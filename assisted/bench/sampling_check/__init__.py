"""The sampling check: assisted sampling follows the target's distribution, measured.
`check` runs it on a loaded pair (the benchmark's `--sampling-check` calls it after its
timed runs); `python -m assisted.bench.sampling_check` is its command (`__main__`).

Speculative sampling (Leviathan et al. 2023, arXiv:2211.17192, algorithm 1) keeps a draft
token x, drawn from the assistant's q, with probability min(1, p(x)/q(x)); after a rejection
the target's token is drawn from (p − q)+, normalised. Every committed token then follows
the target's p: the output of assisted sampling is distributed as plain sampling's.
Transformers applies it in `_speculative_sampling` where an assistant model drafts; drafts
without probabilities (prompt lookup) are kept where they equal the target's own sample,
which is lossless too. The check measures it on one prompt:

1. Draw N samples of the first k new tokens with plain sampling, twice (two independent
   sets), and N with assisted sampling, each set with its own seeds
   (`assisted.engine.decoding`: the product's own paths).
2. The TV between the assisted set and the first plain set, held against a permutation
   test's bound at α = 5% (`assisted.analysis.two_sample`: exact, so at most 5% false alarms); the
   TV between the two plain sets beside it, as the finite-sample baseline. **passed**: the
   assisted TV is within the bound.
3. The negative control: N more assisted samples with a verifier that keeps every draft
   (`decoding.biased_verifier`), through the same test; it must be **flagged**.
4. The check's power: the TV from the target's distribution it detects with 80%
   probability, among distributions between the plain and the control's.

The assisted runs draft a constant k candidates a step with no confidence threshold
(`check_draft`): the pair's `auto` policy drafts nothing at all in runs this short on the
embedded pair, and a threshold cuts drafts short, so the verifier would check little.

Defaults (measured on the embedded pair, docs/benchmarks.md#sampling-check): a question
whose one-word answers spread over a few fruits, in 1 to 3 tokens ending in end of
sequence, so the first K = 3 tokens have real spread on few outcomes, where the test has
power; temperature 1 and top-p 1, the model's own distribution; N = 100 per set, at
which the TV the check detects with 80% probability is far below the control's.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Generator
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace

from assisted.analysis import two_sample
from assisted.analysis.sampling import CheckSettings
from assisted.core.settings import DraftSettings
from assisted.models.pairs import LoadedPair
from assisted.models.registry import PairSpec

TOP_OUTCOMES = 8  # the most frequent outcomes the card and the JSON show


@dataclass(frozen=True)
class CheckProgress:
    """`done` of `total` samples drawn; `label` names what is being drawn."""

    done: int
    total: int
    label: str


def check_draft(spec: PairSpec, tokens: int) -> DraftSettings:
    """The pair's draft settings, made to draft at every step they can (the module's note):
    a constant schedule of `tokens` candidates (Transformers leaves the last of the k
    positions to the target) and no confidence threshold."""
    return replace(
        spec.draft, schedule="constant", num_assistant_tokens=tokens, confidence_threshold=0.0
    ).validate_for(spec.drafter)


def run_check(
    pair: LoadedPair,
    settings: CheckSettings | None = None,
    draft: DraftSettings | None = None,
    stop: threading.Event | None = None,
) -> Generator[CheckProgress, None, dict | None]:
    """Run the check (the module's note) on `pair`, drafting with `draft` (default:
    `check_draft`); yields progress, returns the result, or None if `stop` was set."""
    from assisted.engine import decoding
    from assisted.engine.engine import encode_prompt

    started = time.perf_counter()
    settings = (settings or CheckSettings()).validate()
    draft = (draft or check_draft(pair.spec, settings.tokens)).validate_for(pair.spec.drafter)
    run = settings.run_settings()
    ids = encode_prompt(pair, settings.prompt)
    decoding.check_length(pair, ids, run)
    n, total = settings.samples, settings.draws()
    yield CheckProgress(0, total, "sampling check: warming up")
    decoding.warm_up(pair, ("plain", "assisted"), draft)
    plain = []
    for index in range(2):
        yield CheckProgress(index * n, total, f"sampling check: plain set {index + 1}")
        seeded = run.with_(seed=settings.seed + index)
        plain.append(decoding.plain_samples(pair, ids, seeded, n))
    first = settings.seed + 2
    runs = {"assisted": range(first, first + n)}
    if settings.control:
        runs["control"] = range(first + n, first + 2 * n)
    drawn, verifications = {}, []
    with pair.learnt.acceptance_apart():
        for index, (name, seeds) in enumerate(runs.items()):
            done, label = (2 + index) * n, f"sampling check: {name}"
            yield CheckProgress(done, total, label)
            verifier = decoding.biased_verifier() if name == "control" else nullcontext()
            with verifier as calls:
                samples = decoding.assisted_samples(pair, ids, run, draft, seeds, stop)
                drawn[name] = yield from _counted(samples, done, total, label)
            if drawn[name] is None:
                return None
            if name == "control":
                verifications = calls
    return _result(pair, settings, draft, ids, plain, drawn, verifications, started)


def _counted(samples: Generator, done: int, total: int, label: str) -> Generator:
    """`samples`' counts as CheckProgress after `done` draws; returns what it returns."""
    while True:
        try:
            count = next(samples)
        except StopIteration as finished:
            return finished.value
        yield CheckProgress(done + count, total, label)


def _result(
    pair: LoadedPair,
    settings: CheckSettings,
    draft: DraftSettings,
    ids: list[int],
    plain: list[list[tuple[int, ...]]],
    drawn: dict,
    verifications: list[int],
    started: float,
) -> dict:
    """The check's JSON object (docs/json.md#the-sampling-check)."""
    n, alpha, seed = settings.samples, settings.alpha, settings.seed
    assisted = drawn["assisted"]
    verdict = two_sample.permutation_test(assisted.samples, plain[0], alpha, seed=seed)
    result = {
        "pair": pair.spec.name,
        "device": str(pair.device),
        "dtype": pair.dtype_name,
        "prompt": settings.prompt,
        "prompt_tokens": len(ids),
        "n": n,
        "k": settings.tokens,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "seed": seed,
        "drafter": pair.spec.drafter.value,
        "draft": asdict(draft),
        "tv": verdict.tv,
        "tv_plain": two_sample.tv_distance(plain[1], plain[0]),
        "bound": verdict.bound,
        "p_value": verdict.p_value,
        "alpha": alpha,
        "permutations": two_sample.PERMUTATIONS,
        "passed": not verdict.flagged,
        "assisted": _drafting(assisted),
        "control": None,
        "power": None,
    }
    named = {"plain": plain[0], "plain_2": plain[1], "assisted": assisted.samples}
    if settings.control:
        control = drawn["control"]
        biased = two_sample.permutation_test(control.samples, plain[0], alpha, seed=seed)
        result["control"] = {
            "verifier": "accept-every-draft",
            "tv": biased.tv,
            "bound": biased.bound,
            "p_value": biased.p_value,
            "flagged": biased.flagged,
            "verifications": len(verifications),
            **_drafting(control),
        }
        detected = two_sample.detectable_tv(plain[0] + plain[1], control.samples, n, alpha)
        result["power"] = {"tv": detected, "probability": two_sample.POWER, "toward": "control"}
        named["control"] = control.samples
    result["outcomes"] = len(set().union(*named.values()))
    result["top"] = _top_outcomes(pair, named)
    result["seconds"] = time.perf_counter() - started
    return result


def _drafting(drawn) -> dict:
    rate = drawn.accepted / drawn.drafted if drawn.drafted else None
    return {
        "drafted": drawn.drafted,
        "accepted": drawn.accepted,
        "acceptance_rate": rate,
        "steps": drawn.steps,
    }


def _top_outcomes(pair: LoadedPair, named: dict[str, list[tuple[int, ...]]]) -> list[dict]:
    """The most frequent outcomes over every set, with their text and count in each."""
    counts = {name: Counter(samples) for name, samples in named.items()}
    overall = sum(counts.values(), Counter())
    return [
        {"text": pair.tokenizer.decode(list(outcome)), **{n: c[outcome] for n, c in counts.items()}}
        for outcome, _ in overall.most_common(TOP_OUTCOMES)
    ]
