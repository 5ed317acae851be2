"""The `auto` policy's life across runs: a fresh policy for each run, seeded by what the
pair learnt (`assisted.policy.learnt`), and what a run learnt kept for the next ones, in
memory and in the pair's learnt file (`assisted.models.learnt_store`).

A run itself reads and writes none of this: its callers make the policy before it
(`assisted.engine.running`) and keep what it learnt after its clock stops. On ZeroGPU
a worker's memory ends with its call, so the file is where the next process finds it
(`refresh` reads it back in).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from assisted.core.bands import GREEDY, Band
from assisted.core.drafters import DrafterKind
from assisted.core.record import RunRecord
from assisted.core.settings import WARMUP_TOKENS, DraftSettings, RunSettings
from assisted.engine.calibration import calibrated
from assisted.engine.drafters import draft_graphs
from assisted.models import learnt_store
from assisted.policy.answers import Answer
from assisted.policy.choice import DraftPolicy
from assisted.policy.costs import PlainSteps

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from assisted.models.pairs import LoadedPair


def new_policy(
    pair: LoadedPair,
    draft: DraftSettings,
    precision: str,
    band: Band,
    assistant: PreTrainedModel | None = None,
    max_length: int | None = None,
    prompt_ids: Sequence[int] = (),
) -> DraftPolicy:
    """A fresh policy for one `auto` run in temperature `band` (`assisted.core.bands`), seeded by
    the pair's costs (calibrated when the pair was prepared, `assisted.engine.prepare`, and refined
    by its runs since) and by the acceptance its earlier runs in `precision` and `band` saw.
    A sampled run's assistant is priced at its sampled drafting time; a greedy run's of at
    most `max_length` tokens (prompt and answer), where the `assistant` drafts through
    captured CUDA graphs in a run that long, each draft length at its own replay's time
    (`assisted.engine.drafters.draft_graphs.draft_costs`), or on the loop on a
    DynamicCache after their self-check failed, at that loop's; else at its eager time
    per token. Times nothing.

    The answers it expects are the pair's, less one to this very prompt that a run just
    before it left (a comparison's plain run, a shoot-out's other lanes): a run never knows
    its own answer's length in advance.

    A pair with an assistant drafts from two sources: the assistant, and prompt-lookup
    matches, which cost no drafting. A prompt-lookup pair drafts from matches only."""
    cap = draft.length_for(pair.spec.drafter)
    sampled = band != GREEDY
    shape = None  # the assistant's time per token by draft length, where timed by length
    if pair.spec.drafter is DrafterKind.PROMPT_LOOKUP:
        verify_s, _, _ = calibrated(pair, precision, cap, model=False)
        drafter_s, model, prefill_s = {DrafterKind.PROMPT_LOOKUP: 0.0}, None, 0.0
    else:
        verify_s, per_token_s, prefill_s = calibrated(pair, precision, cap, True, sampled)
        timed = None
        if assistant is not None and max_length is not None and not sampled:
            timed = draft_graphs.draft_costs(assistant, max_length, cap)
        if timed is not None:
            # Priced per token at the longest draft, each length shaped to its own time.
            per_token_s = timed[cap] / cap
            shape = {gamma: seconds / (gamma * per_token_s) for gamma, seconds in timed.items()}
        model = DrafterKind.ASSISTANT
        drafter_s = {model: per_token_s, DrafterKind.PROMPT_LOOKUP: 0.0}
    history = pair.learnt.precision(precision).acceptance_in(band)
    learnt = pair.learnt
    # Never this very prompt's answer, left by a run just before (the note above).
    just_answered = learnt.answered == hash(tuple(prompt_ids))
    answers = learnt.answers[:-1] if just_answered else learnt.answers
    return DraftPolicy(cap, verify_s, drafter_s, model, prefill_s, history, answers, shape)


def keep_learnt(pair: LoadedPair, precision: str, policy: DraftPolicy, band: Band) -> None:
    """What an `auto` run in temperature `band` learnt, for the pair's next runs: acceptance
    per source (for runs in the same band), T(k) for the rows it verified (each the median
    of its timings, never a row fitted between them), and the assistant's time per token of
    the reads it timed (the price of the next reads: the median of the latest, each at its
    run's T(1), `PrecisionLearnt.keep_read`). Kept in memory; `keep_on_disk` writes it."""
    learnt = pair.learnt
    drafting = learnt.precision(precision)
    drafting.keep_acceptance(band, policy.acceptance.counts())
    for rows, (seconds, timings) in policy.costs.measured_verify().items():
        learnt.keep_verify(rows, seconds, timings)
    read_s = policy.costs.measured_read_s()
    if policy.model_source is not None and read_s is not None:
        drafting.keep_read(read_s, policy.costs.verify_s[1])


def keep_answer(
    pair: LoadedPair, prompt_ids: Sequence[int], record: RunRecord, settings: RunSettings
) -> bool:
    """The length of any run's answer (`record`, under `settings`), plain or drafted by any
    schedule, for the pair's record of answers (`assisted.policy.answers`): one per prompt
    in a row, so a comparison's two runs and a shoot-out's lanes count once. Not a stopped
    run's, nor a warm-up's, cut short by design. Whether it kept one."""
    tokens = len(record.token_ids)
    if record.stopped or not tokens or settings.max_new_tokens <= WARMUP_TOKENS:
        return False
    answer = Answer(tokens, ended=tokens < settings.max_new_tokens)
    pair.learnt.keep_answer(answer, prompt=hash(tuple(prompt_ids)))
    return True


def keep_on_disk(pair: LoadedPair) -> None:
    """What the pair's runs kept, into its learnt file for the next process: a small write,
    made once a run's clock has stopped (on ZeroGPU a worker's memory ends with its call)."""
    learnt_store.save(pair.learnt_file, pair.learnt)


def keep_plain_steps(pair: LoadedPair, steps: PlainSteps | None) -> bool:
    """A plain run's T(1), the median of its timed passes (`assisted.engine.observe`), kept for
    the pair's runs, once the run's clock has stopped; nothing for other runs (`steps`
    None). Whether it kept it. Plain steps are T(1)'s only direct timings, and
    an `auto` run seldom takes one; T(1) prices every plain step the policy and the oracle
    weigh (`assisted.policy.costs`)."""
    t1_s = steps.t1_s() if steps is not None else None
    if t1_s is None:
        return False
    pair.learnt.keep_verify(1, t1_s, len(steps.seconds))
    return True


def refresh(pair: LoadedPair) -> None:
    """Bring in what other processes kept in the pair's learnt file since it loaded: a
    ZeroGPU worker is forked from a main process that read the file once, at load, and
    earlier workers have written to it since (`learnt_store.refresh` merges, keeping what
    this process holds and has not written)."""
    learnt_store.refresh(pair.learnt_file, pair.learnt)
