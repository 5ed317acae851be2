"""Observing a run: Transformers' own `generate()` loop, turned into one Step per target step.

We never reimplement speculative decoding; we watch it. `StepObserver` composes:
- the stream: a streamer receives each step's committed tokens (`put` is called once with
  the prompt, then once per step: one token in plain decoding, accepted + 1 in assisted
  generation), and a forward pre-hook on the target sees the positions each step verifies,
  which gives the draft: the candidates' ids, hence the drafted and accepted counts
  (Transformers reports neither); the text of each step and of its draft is decoded
  incrementally (`Detokenizer`);
- the drafting timing: forward hooks on the assistant (on the target's first layers under
  early exit) time each drafting pass, which gives each step's drafting time and the cost
  ratio c;
- the verification timing, under the `auto` schedule: hooks on the target time each
  verification to refine the policy's cost model (in a plain run, each step's pass, whose
  median sets the pair's T(1));
- the target's scores: a forward hook on the target keeps its latest pass's logits, and
  each step reads the target's top two tokens at the positions it committed, the evidence
  for a divergence from the plain run (`assisted.analysis.divergence`).
- under sampling, each drafted token's p and q, kept where Transformers computes them
  (`DraftProbabilities`), from which `assisted.analysis.stats` derives why a draft
  was accepted.

On a GPU, passes are timed with CUDA events read once per step, not by synchronising the
device around each pass, which would stall the very runs being compared.

The engine's clock: the device synchronised before the host reads the time.

Work on a GPU is queued: a clock read right after a call measures its launch, not its
work. Every timing the engine makes (a run's, the calibration's, the hindsight's) waits
for the device first.

Incremental detokenisation of a run's steps, and of each step's draft (`Detokenizer`).

The target's p and the drafter's q of each drafted token, taken where a sampled
assisted run computes them.

Under sampling, Transformers accepts a drafted token x with probability min(1, p(x)/q(x))
(`_speculative_sampling`: Leviathan et al. 2023, "Fast Inference from Transformers via
Speculative Decoding", algorithm 1). p is the target's distribution at x's position and q
the assistant's, both after the run's logits processors (temperature, top-p). Transformers
reports neither, and computing them again could only approximate what it used, so both are
kept as it computes them:

- q: the candidate generator returns the draft with `candidate_logits`, the assistant's
  processed scores (its `generate()` samples with the target's warpers). The generator
  Transformers builds for the run gets a `get_candidates` that keeps them. A prompt-lookup
  draft has none: its q is a point mass on the drafted token, q = 1, and Transformers
  accepts the token where the target's own sample equals it, with probability p.
- p: the target's loop runs its logits processors on each row of the verification's
  logits; one more processor, appended to that same list, keeps each processed row as it
  passes and returns it unchanged. Transformers' prompt lookup runs the same list on fake
  logits while it searches for a match, inside `get_candidates`, so rows are kept only
  once `get_candidates` has returned.

Greedy runs install none of this: their accepted tokens are the target's top tokens, and
p and q say nothing more. Reading a step costs two softmaxes over its drafted rows, the
ones Transformers computes too (measured in docs/app.md, "Sampling").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import torch
from transformers.generation.logits_process import LogitsProcessor
from transformers.generation.streamers import BaseStreamer

from assisted.core.record import HeldBack, Mode, RunRecord, Step, common_prefix_length
from assisted.core.settings import DrafterKind
from assisted.engine.drafters import draft_graphs
from assisted.policy.estimates import PlainSteps

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.generation.candidate_generator import CandidateGenerator

    from assisted.models.pairs import LoadedPair
    from assisted.policy.choice import DraftPolicy, Expectation
    from assisted.policy.estimates import CostModel


def synchronize(device: torch.device) -> None:
    """Wait until `device` has done the work queued on it, before reading the clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Detokenizer:
    """Incremental text: the new characters of each step, never half a multi-byte character.

    Each step decodes a short window of the ids, not the whole output, which would make a
    run's detokenisation quadratic in its length. As in TGI and vLLM, the window starts
    with ids whose text was emitted a step before, so that the new ids decode as they do
    in context (some decoders drop the leading space of a sequence's first token), and the
    new characters are those past the window's emitted text. A decoder writes U+FFFD for
    an incomplete UTF-8 sequence: while the window's text ends with it, the text before it
    is emitted and the window grows until a token completes the character. Then it moves
    on, keeping only the ids added since it last moved: the next window's context."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self.tokenizer = tokenizer
        self.window: list[int] = []  # the ids of the output from the window's start on
        self.read = 0  # window[:read]: the ids whose text began the window, already emitted
        self.emitted = 0  # characters of the window's text emitted so far

    def add(self, token_ids: tuple[int, ...]) -> str:
        """The text that `token_ids` add to the output, up to its last whole character."""
        self.window.extend(token_ids)
        text = self._decode(self.window)
        whole = text.rstrip("\ufffd")
        delta = whole[self.emitted :]
        if len(whole) < len(text):
            # A character split across tokens waits for the rest; the text before it does not.
            self.emitted = len(whole)
        else:
            self.window = self.window[self.read :]
            self.read = len(self.window)
            self.emitted = len(self._decode(self.window))
        return delta

    def add_step(
        self, token_ids: tuple[int, ...], draft_ids: tuple[int, ...], accepted: int
    ) -> tuple[str, str, str]:
        """The step's text, and its draft's text split into the accepted part and the
        rejected remainder.

        The draft is decoded after everything committed before it (in the window before the
        step), as the step's text is, so a token's leading space or a character spread over
        tokens comes out as it would have in the output. The accepted part is what the
        step's text and the draft both begin with (the accepted candidates' text); a
        character that the boundary splits goes to the remainder."""
        before, emitted = list(self.window), self.emitted
        text = self.add(token_ids)
        if not draft_ids:
            return text, "", ""
        draft = self._decode(before + list(draft_ids)).rstrip("\ufffd")[emitted:]
        if accepted == len(draft_ids):
            head = draft
        else:
            head = self._decode(before + list(draft_ids[:accepted])).rstrip("\ufffd")[emitted:]
        cut = min(common_prefix_length(text, head), common_prefix_length(head, draft))
        return text, text[:cut], draft[cut:]

    def finish(self) -> str:
        """The text held back at the end: an incomplete character, as the decoder marks it."""
        text = self._decode(self.window)
        delta = text[self.emitted :]
        self.emitted = len(text)
        return delta

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


class DraftProbabilities:
    """Keeps the q and the processed target rows of the step under way, and reads each
    drafted token's p and q from them once the step has committed (`read`)."""

    def __init__(self) -> None:
        self.q_logits: torch.Tensor | None = None  # the step's candidate_logits
        self.rows: list[torch.Tensor] = []  # the step's processed target rows, in order
        self.keeping = False  # between the step's get_candidates and its commit

    @contextmanager
    def watching(self, target: PreTrainedModel) -> Iterator[None]:
        """Within the block, `target.generate()`'s assisted loop shows us its candidate
        logits and its processed rows. Wraps whatever builds the candidate generator now
        (Transformers' own, or a drafting seam's, `assisted.engine.drafters.seam.drafting_policy`),
        on this instance only, and puts it back afterwards."""
        previous = vars(target).get("_get_candidate_generator")
        build = target._get_candidate_generator

        def get_candidate_generator(*args, **kwargs) -> CandidateGenerator:
            generator = build(*args, **kwargs)
            # The very list the assisted loop runs on each verification row.
            kwargs["logits_processor"].append(_KeepRows(self))
            candidates = generator.get_candidates

            def get_candidates(input_ids: torch.LongTensor, **more):
                candidate_ids, candidate_logits = candidates(input_ids, **more)
                self.q_logits, self.rows, self.keeping = candidate_logits, [], True
                return candidate_ids, candidate_logits

            # On the instance: the generator keeps its type, which the loop checks.
            generator.get_candidates = get_candidates
            return generator

        target._get_candidate_generator = get_candidate_generator
        try:
            yield
        finally:
            if previous is None:
                del target._get_candidate_generator
            else:
                target._get_candidate_generator = previous

    def read(self, draft: tuple[int, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """p and q of each token of `draft`, the candidates the step verified; empty where
        the step drafted nothing or its rows were not seen whole. Clears the step."""
        rows, q_logits = self.rows, self.q_logits
        self.rows, self.q_logits, self.keeping = [], None, False
        count = len(draft)
        # The target verifies the candidates and adds a row of its own after them.
        if not count or len(rows) != count + 1:
            return (), ()
        p = _probabilities(torch.cat(rows[:count]), draft)
        if q_logits is None:  # prompt lookup: a point mass on each drafted token
            return p, (1.0,) * count
        if q_logits.shape[1] != count:
            return (), ()
        return p, _probabilities(q_logits[0], draft)


class _KeepRows(LogitsProcessor):
    """The last of the target's logits processors: keeps each processed row of a step's
    verification, unchanged."""

    def __init__(self, probabilities: DraftProbabilities):
        self.probabilities = probabilities

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if self.probabilities.keeping:
            self.probabilities.rows.append(scores)
        return scores


def _probabilities(scores: torch.Tensor, tokens: tuple[int, ...]) -> tuple[float, ...]:
    """The probability of `tokens[i]` under the softmax of row i of `scores`, as
    Transformers takes it (`_speculative_sampling`)."""
    ids = torch.tensor(tokens, device=scores.device)
    chosen = scores.float().softmax(dim=-1)[torch.arange(len(tokens), device=scores.device), ids]
    return tuple(chosen.tolist())


class StepObserver(BaseStreamer):
    """Streamer plus hooks: turns Transformers' callbacks into Steps, appended to `record`
    and handed to `on_step` (with their index) as they happen."""

    def __init__(
        self,
        pair: LoadedPair,
        record: RunRecord,
        on_step: Callable[[int, Step], None],
        prompt_len: int,
        policy: DraftPolicy | None = None,
        plain_steps: PlainSteps | None = None,
    ):
        """`policy` times the verifications of an `auto` run; `plain_steps`, where given,
        gathers a plain run's one-row passes."""
        self.target = pair.target
        self.record = record
        self.on_step = on_step
        self.policy = policy
        self.start = 0.0  # perf_counter() when generate() started, set by the caller
        self.stream = _Stream(pair, prompt_len)
        # Forward hooks time drafting, so only for drafters that run a model.
        self.times_drafting = record.drafter is not None and record.drafter.times_drafting
        self.drafting = _DraftTiming(pair, record.draft_forward_s)
        costs = policy.costs if policy else plain_steps
        self.verifying = _VerifyTiming(pair.device, costs) if costs else None
        self.scores = _TargetScores(pair, record.top2)
        # Greedy runs keep no probabilities: nothing is installed, nothing is computed.
        sampled = record.sampled and record.mode == "assisted"
        self.probabilities = DraftProbabilities() if sampled else None

    def put(self, value: torch.Tensor) -> None:
        token_ids = self.stream.tokens(value)
        if token_ids is None:
            return
        t_s = time.perf_counter() - self.start
        # On a GPU, one wait for the step's last timed pass instead of one per pass.
        draft_s = self.drafting.read()
        if self.verifying is not None:
            self.verifying.read()
        self.scores.read(self.stream.committed, len(token_ids))
        draft_p, draft_q = (
            self.probabilities.read(self.stream.draft) if self.probabilities else ((), ())
        )
        policy = self.policy
        step = self.stream.step(
            token_ids,
            t_s,
            draft_s=draft_s if self.times_drafting else None,
            chosen=policy.choice.gamma if policy else None,
            source=policy.choice.source if policy else self.record.drafter,
            expected=policy.expected if policy else None,
            draft_p=draft_p,
            draft_q=draft_q,
            held_back=policy.choice.held_back if policy else None,
        )
        if policy and self.times_drafting:
            # A replayed draft computes every token it was asked for, whatever the rules
            # cut after: its time is per token computed, not per token kept.
            computed = max(step.drafted, self.drafting.replayed)
            policy.observe_draft(policy.choice, computed, draft_s)
        if policy and self.record.steps:
            # The first step holds the target's read of the prompt, which plain pays too.
            policy.observe_step_s(t_s - self.record.steps[-1].t_s, len(token_ids))
        self.record.steps.append(step)
        self.on_step(len(self.record.steps) - 1, step)

    def end(self) -> None:
        pass

    def flush(self) -> None:
        """Attach text held back for an incomplete character to the last step."""
        rest = self.stream.finish()
        if rest and self.record.steps:
            last = self.record.steps[-1]
            self.record.steps[-1] = replace(last, text=last.text + rest)

    def hooks(self, mode: Mode, assistant: PreTrainedModel | None) -> _Hooks:
        """The forward hooks of a run in `mode`, removed when the block ends."""
        handles = self.stream.hooks()
        handles += self.scores.hooks()
        handles += self.drafting.hooks(mode, assistant)
        if self.verifying is not None:
            handles += self.verifying.hooks(self.target)
        return _Hooks(handles)

    def watching_drafts(self) -> AbstractContextManager:
        """Within the block, a sampled assisted run's p and q are kept
        (`DraftProbabilities`). Entered inside any drafting seam, whose candidate
        generator it wraps; nothing for greedy and plain runs."""
        if self.probabilities is None:
            return nullcontext()
        return self.probabilities.watching(self.target)


class _Stream:
    """The ids of each step, the draft the target verified and the tokens it committed, and
    their text."""

    def __init__(self, pair: LoadedPair, prompt_len: int):
        self.pair = pair
        self.committed = prompt_len  # sequence length the target has accepted so far
        self.draft: tuple[int, ...] = ()  # the candidates of the step under way
        self.seen_prompt = False
        self.detokenizer = Detokenizer(pair.tokenizer)

    def hooks(self) -> list:
        return [self.pair.target.register_forward_pre_hook(self._before_target, with_kwargs=True)]

    def tokens(self, value: torch.Tensor) -> tuple[int, ...] | None:
        """The ids that `put` received; None for the prompt, which generate() puts first."""
        if not self.seen_prompt:
            self.seen_prompt = True
            return None
        return tuple(value.reshape(-1).tolist())

    def step(
        self,
        token_ids: tuple[int, ...],
        t_s: float,
        draft_s: float | None,
        chosen: int | None,
        source: DrafterKind | None,
        expected: Expectation | None,
        draft_p: tuple[float, ...] = (),
        draft_q: tuple[float, ...] = (),
        held_back: HeldBack | None = None,
    ) -> Step:
        """The step that committed `token_ids`, with the draft it verified (from `source`),
        the text of both, what the `auto` policy `expected` of it and why it `held_back`
        the assistant, and under sampling the draft's p and q; its tokens then count as
        committed."""
        draft = self.draft
        # Counted from the ids, not as len(token_ids) - 1: where EOS or the length limit
        # ends a step, the target's own token may be missing and every token a candidate.
        accepted = common_prefix_length(draft, token_ids)
        text, accepted_text, rejected_text = self.detokenizer.add_step(token_ids, draft, accepted)
        self.committed += len(token_ids)
        self.draft = ()
        return Step(
            token_ids=token_ids,
            text=text,
            drafted=len(draft),
            accepted=accepted,
            t_s=t_s,
            draft_ids=draft,
            accepted_text=accepted_text,
            rejected_text=rejected_text,
            draft_s=draft_s,
            chosen=chosen,
            source=source if draft else None,
            **(asdict(expected) if expected else {}),
            draft_p=draft_p,
            draft_q=draft_q,
            held_back=held_back,
        )

    def finish(self) -> str:
        """Text held back for an incomplete character at the end of the output."""
        return self.detokenizer.finish()

    def _before_target(self, module, args, kwargs) -> None:
        input_ids = kwargs.get("input_ids")
        if input_ids is None or _early_exit_drafting(self.pair):
            return
        cached = _cached_length(kwargs)
        # The target verifies every position past what it has committed: the candidates.
        # They follow the prompt in the first step (prefill and verification are fused),
        # and the last committed token, which the cache does not hold yet, in later ones.
        first = self.committed - cached
        if input_ids.shape[1] > first:
            self.draft = tuple(input_ids[0, first:].tolist())


class _DraftTiming:
    """Times the drafter's forward passes: the assistant's, or the target's own first layers
    under early exit. Each pass after the first (the assistant's prefill) goes to
    `forward_s`; a replay of captured graphs (`assisted.engine.drafters.draft_graphs`), which runs
    γ passes in one call, goes there as γ passes of a γth of its time each."""

    def __init__(self, pair: LoadedPair, forward_s: list[float]):
        self.pair = pair
        self.timer = _PassTimer(pair.device)
        self.forward_s = forward_s
        self.prefilled = False
        self.tokens: list[int] = []  # the passes each timing since the last read holds
        self.replayed = 0  # tokens the replays read at the last read computed, cut or not

    def hooks(self, mode: Mode, assistant: PreTrainedModel | None) -> list:
        if self.pair.spec.drafter is DrafterKind.EARLY_EXIT:
            target = self.pair.target
            return [
                target.register_forward_pre_hook(self._before_early_exit),
                target.register_forward_hook(self._after_early_exit),
            ]
        if mode == "assisted" and assistant is not None:
            handles = [
                assistant.register_forward_pre_hook(lambda *_: self._start(1)),
                assistant.register_forward_hook(lambda *_: self.timer.stop()),
            ]
            replay = draft_graphs.replay_module(assistant)
            if replay is not None:
                handles += [
                    replay.register_forward_pre_hook(lambda _, args: self._start(args[0])),
                    replay.register_forward_hook(lambda *_: self.timer.stop()),
                ]
            return handles
        return []

    def _start(self, passes: int) -> None:
        self.tokens.append(passes)
        self.timer.start()

    def read(self) -> float:
        """Seconds of the drafting passes timed since the last read: a step's drafting
        time, the assistant's prefill included."""
        seconds = 0.0
        timed = self.timer.read()
        passes_each, self.tokens = self.tokens[: len(timed)], self.tokens[len(timed) :]
        self.replayed = sum(passes for passes in passes_each if passes > 1)
        for elapsed, passes in zip(timed, passes_each, strict=True):
            seconds += elapsed
            if self.prefilled:
                self.forward_s.extend([elapsed / passes] * passes)
            self.prefilled = True
        return seconds

    def _before_early_exit(self, module, args) -> None:
        if _early_exit_drafting(self.pair):
            self._start(1)

    def _after_early_exit(self, module, args, output) -> None:
        if _early_exit_drafting(self.pair):
            self.timer.stop()


class _VerifyTiming:
    """Times the target's verifications and feeds them to the `auto` policy's T(k)."""

    def __init__(self, device: torch.device, costs: CostModel | PlainSteps):
        self.timer = _PassTimer(device)
        self.costs = costs
        self.rows: list[int] = []  # rows of each verification timed since the last read

    def hooks(self, target: PreTrainedModel) -> list:
        return [
            target.register_forward_pre_hook(self._before_verify, with_kwargs=True),
            target.register_forward_hook(lambda *_: self.timer.stop()),
        ]

    def read(self) -> None:
        for rows, elapsed in zip(self.rows, self.timer.read(), strict=True):
            self.costs.observe_verify(rows, elapsed)
        self.rows = []

    def _before_verify(self, module, args, kwargs) -> None:
        # The first step's pass is fused with the prompt's prefill: not a verification time.
        input_ids = kwargs.get("input_ids")
        if _cached_length(kwargs) and input_ids is not None:
            self.rows.append(input_ids.shape[1])
            self.timer.start()


class _TargetScores:
    """The target's two best tokens, and their logits, at each position a step commits.

    A forward hook keeps a reference to the latest target pass's logits (the pass that
    verified the step, or decoded it in plain decoding), and each step reads the top two of
    the rows it committed only: rejected rows are never read. Nothing vocabulary-sized is
    copied or kept past the step."""

    def __init__(self, pair: LoadedPair, top2: list):
        self.pair = pair
        self.top2 = top2  # the record's list, one entry per committed token
        self.ends_at = 0  # the sequence length after the pass under way
        self.logits: torch.Tensor | None = None  # the latest pass's kept rows
        self.first = 0  # the position the first kept row predicts

    def hooks(self) -> list:
        target = self.pair.target
        return [
            target.register_forward_pre_hook(self._before_target, with_kwargs=True),
            target.register_forward_hook(self._after_target),
        ]

    def read(self, committed: int, count: int) -> None:
        """Record the top two at positions committed … committed + count − 1."""
        start = committed - self.first
        logits, self.logits = self.logits, None
        if logits is None or start < 0 or start + count > logits.shape[1]:
            self.top2.extend([None] * count)
            return
        values, ids = logits[0, start : start + count].topk(2, dim=-1)
        for (first, second), (first_id, second_id) in zip(
            values.tolist(), ids.tolist(), strict=True
        ):
            if first == second and second_id < first_id:
                # Greedy decoding takes the lowest id among equal logits; topk may not.
                first_id, second_id = second_id, first_id
            self.top2.append((first_id, first, second_id, second))

    def _before_target(self, module, args, kwargs) -> None:
        input_ids = kwargs.get("input_ids")
        if input_ids is None or _early_exit_drafting(self.pair):
            return
        self.ends_at = _cached_length(kwargs) + input_ids.shape[1]

    def _after_target(self, module, args, output) -> None:
        logits = getattr(output, "logits", None)
        if logits is None or _early_exit_drafting(self.pair):
            return
        # The kept rows are the pass's last ones; the row at position p predicts p + 1.
        self.logits = logits.detach()
        self.first = self.ends_at - logits.shape[1] + 1


def _cached_length(kwargs: dict) -> int:
    """Tokens the cache of the target pass under way holds already (`kwargs` of a forward
    pre-hook)."""
    cache = kwargs.get("past_key_values")
    return cache.get_seq_length() if cache is not None else 0


def _early_exit_drafting(pair: LoadedPair) -> bool:
    """Whether the target's pass under way is an early-exit draft: Transformers runs its
    first layers alone by lowering the layer count of its config for the pass."""
    if pair.spec.drafter is not DrafterKind.EARLY_EXIT:
        return False
    base = getattr(pair.target, pair.target.base_model_prefix)
    return base.config.num_hidden_layers == pair.spec.early_exit_layer


class _PassTimer:
    """Times forward passes on `device`: CUDA events recorded around each pass and read
    together once per step, or the CPU's clock."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.started: torch.cuda.Event | float | None = None
        self.timed: list = []  # CUDA: (start, end) event pairs; CPU: seconds

    def start(self) -> None:
        if self.cuda:
            self.started = torch.cuda.Event(enable_timing=True)
            self.started.record()
        else:
            self.started = time.perf_counter()

    def stop(self) -> None:
        if self.started is None:
            return
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.timed.append((self.started, end))
        else:
            self.timed.append(time.perf_counter() - self.started)
        self.started = None

    def read(self) -> list[float]:
        """Seconds of each pass timed since the last read, in order."""
        timed, self.timed = self.timed, []
        if not self.cuda or not timed:
            return timed
        timed[-1][1].synchronize()  # the last pass's end: every earlier event has happened
        return [start.elapsed_time(end) / 1000 for start, end in timed]


@dataclass
class _Hooks:
    handles: list

    def __enter__(self) -> _Hooks:
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()
