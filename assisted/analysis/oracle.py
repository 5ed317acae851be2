"""The oracle: the fastest schedule a greedy assisted run could have had, found in hindsight.

After a greedy run every committed token is known, so what each choice would have bought
is known too (`assisted.engine.hindsight` finds it, off the run's clock):
- the assistant, drafting at output position i from the true prefix, agrees with the output
  for `assistant_runs[i]` tokens in a row, so a draft of γ commits min(γ, that) + 1;
- the lookup's proposal at i, `lookup_drafts[i]`, is a pure function of the ids; cut to L
  tokens it commits min(L, its agreement with the output) + 1.

With the costs the run's steps measured (`assisted.analysis.measured_costs`: T(k) from
the steps' wall times, the assistant's seconds per drafted token, its catch-up after
skipped steps, its first read), a dynamic programme over (position, the assistant's
state) finds the fastest schedule: at each step none, the assistant with γ = 1 … cap, or
the lookup's match cut to any length. The same costs applied to the choices the run made
give its **modelled** time, and the run's clock its **measured** time.

The oracle is priced twice. **Measured-priced** (the report's figures): what the steps
cost, so a policy whose cost model is wrong cannot make the oracle wrong with it.
**Policy-priced** (`policy_priced`): the cost model the run decided by (`Hindsight`'s
costs), which tells the policy (modelled run ÷ oracle) from the machinery (measured −
modelled), as the HF blog on dynamic speculation did offline for one figure
(huggingface.co/blog/dynamic_speculation_lookahead). Where the two oracles differ by more
than `PRICES_DIFFER` (30%), `prices_differ` flags the run: the policy decided on costs
the run did not pay.

Its speedups are the run's own frame: every schedule pays the target's prefill of the
prompt, taken from the run's first step (its seconds beyond what its choice costs in the
model), and is set against **the plain run it is compared with**, measured (tokens/s over
the whole run), as the run's measured speedup is: `plain_modelled_s` (the prefill and T(1)
a token) stands in only where there is no plain run. So the oracle's speedup and the run's
measured one share their baseline, and the share of the oracle a run reached is its
oracle's modelled seconds over its measured ones: the noise of a plain run a minute apart,
which moved a lane's measured speedup by a quarter on a shared 2-core EPYC, moves both
alike. Priced by the run's own steps (`measured_costs`), the oracle is then at or above the
measured run, up to the noise between its own steps.

No torch here: the run's record in, seconds and a schedule out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from assisted.analysis import measured_costs
from assisted.analysis.faults import HINDSIGHT
from assisted.core.drafters import DrafterKind
from assisted.core.figures import rounded
from assisted.core.record import Hindsight, RunRecord, Step

ASSISTANT = DrafterKind.ASSISTANT
LOOKUP = DrafterKind.PROMPT_LOOKUP
# The share by which the policy-priced oracle may differ from the measured-priced one
# before a run is flagged (the module's note).
PRICES_DIFFER = 0.30


class Model(IntEnum):
    """Where the assistant's cache stands before a step: it has not drafted yet (a draft
    first prefills the whole context), it drafted at the step before, or it skipped steps
    since it last drafted (a draft first reads what they committed)."""

    UNSTARTED = 0
    CURRENT = 1
    BEHIND = 2


@dataclass(frozen=True)
class Move:
    """One step of a schedule: `gamma` candidates from `source` (None: a plain step) at
    output position `position`, committing `committed` tokens in `seconds` (modelled)."""

    position: int
    source: DrafterKind | None
    gamma: int
    committed: int
    seconds: float


class Costs:
    """The run's own cost model (`assisted.policy.costs`), priced per step.

    T(k) is the hindsight's curve: timed, or interpolated between timed rows, up to the
    cap + 1 and past it to the longest draft the run verified where that could be timed
    (`assisted.engine.hindsight`: Transformers' heuristic schedule grows a draft past the
    cap). A row beyond the curve, from a record whose costs stop short of its drafts, is
    extrapolated along the curve's last segment (never below its last row) and kept in
    `extrapolated`, which the JSON reports."""

    def __init__(self, hindsight: Hindsight, prompt_tokens: int):
        self.verify_s = dict(hindsight.verify_s)
        self.h = hindsight
        self.prompt_tokens = prompt_tokens
        self.extrapolated: set[int] = set()

    def verify(self, rows: int) -> float:
        """T(rows): from the curve, else extrapolated from it (the class's note)."""
        if rows in self.verify_s:
            return self.verify_s[rows]
        self.extrapolated.add(rows)
        return extrapolate(self.verify_s, rows)

    def step_s(self, source: DrafterKind | None, gamma: int, state: Model, position: int) -> float:
        """Seconds of a step at output `position` drafting `gamma` from `source`, the
        assistant's cache standing at `state`."""
        seconds = self.verify(gamma + 1)
        if source is not ASSISTANT:
            return seconds
        seconds += self.h.call_s + self.h.drafting_s * gamma
        if state is Model.UNSTARTED:
            seconds += self.h.prefill_s * (self.prompt_tokens + position)
        elif state is Model.BEHIND:
            seconds += self.h.catch_up_s
        return seconds


def extrapolate(curve: dict[int, float], rows: int) -> float:
    """T(rows) past the last row of `curve`, along the line through its last two rows,
    never below the last (a verification of more rows costs no less)."""
    top, *rest = sorted(curve, reverse=True)
    if not rest or rows <= top:
        return curve[top]
    below = rest[0]
    slope = max((curve[top] - curve[below]) / (top - below), 0.0)
    return curve[top] + slope * (rows - top)


def after(source: DrafterKind | None, state: Model) -> Model:
    """The assistant's state after a step drafted from `source`."""
    if source is ASSISTANT:
        return Model.CURRENT
    return Model.UNSTARTED if state is Model.UNSTARTED else Model.BEHIND


def agreement(draft: Sequence[int], output: Sequence[int], position: int) -> int:
    """How many of `draft`'s tokens agree with `output` from `position` on, in a row."""
    agreed = 0
    for drafted, token in zip(draft, output[position:], strict=False):
        if drafted != token:
            break
        agreed += 1
    return agreed


def options(
    h: Hindsight, output: Sequence[int], position: int
) -> list[tuple[DrafterKind | None, int, int]]:
    """(source, γ, tokens committed) for every choice at `position`. A step commits at most
    the tokens left; it may draft past them, as a run does (it cannot know where the answer
    ends), and a measured T(k) need not grow with k."""
    left = len(output) - position
    choices: list[tuple[DrafterKind | None, int, int]] = [(None, 0, 1)]
    if h.assistant_runs is not None:
        run = h.assistant_runs[position]
        choices += [(ASSISTANT, g, min(g, run, left - 1) + 1) for g in range(1, h.cap + 1)]
    draft = h.lookup_drafts[position][: h.cap]
    agreed = min(agreement(draft, output, position), left - 1)
    choices += [(LOOKUP, g, min(g, agreed) + 1) for g in range(1, len(draft) + 1)]
    return choices


def best_schedule(h: Hindsight, output: Sequence[int], prompt_tokens: int) -> list[Move]:
    """The fastest schedule over the run's `output`, by dynamic programming from its end."""
    costs = Costs(h, prompt_tokens)
    n = len(output)
    # best[i][state]: the least seconds to commit tokens i … n − 1, and its first move.
    best: list[list[tuple[float, Move | None]]] = [[(0.0, None)] * len(Model) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for state in Model:
            candidates = []
            for source, gamma, committed in options(h, output, i):
                seconds = costs.step_s(source, gamma, state, i)
                rest = best[i + committed][after(source, state)][0]
                candidates.append((seconds + rest, Move(i, source, gamma, committed, seconds)))
            best[i][state] = min(candidates, key=lambda pair: pair[0])
    moves, i, state = [], 0, Model.UNSTARTED
    while i < n:
        move = best[i][state][1]
        moves.append(move)
        i, state = i + move.committed, after(move.source, state)
    return moves


def constant_schedule(
    h: Hindsight,
    output: Sequence[int],
    prompt_tokens: int,
    gamma: int,
    source: DrafterKind = ASSISTANT,
    threshold: float = 0.0,
    runs_on: float = 1.0,
) -> list[Move]:
    """`source` drafting `gamma` at every step (fewer where the output ends): the
    assistant, or the lookup's match cut to `gamma` (a plain step where it has none).
    The assistant's draft also ends after a token it gives less than `threshold`
    (Transformers' confidence criteria, as a constant lane drafts: `_drafted`); past its
    first wrong token, whose confidence is unknown, it goes on past each candidate at the
    chance `runs_on` (`runs_on_past_a_rejection`; 1: to `gamma`), priced over the lengths
    it may end at (its `gamma` the nearest to their mean)."""
    costs, n = Costs(h, prompt_tokens), len(output)
    moves, i, state = [], 0, Model.UNSTARTED
    while i < n:
        if source is ASSISTANT:
            drafted, agreed = _drafted(h, i, gamma, threshold), h.assistant_runs[i]
            unknown = threshold and drafted == gamma and agreed + 1 < gamma  # its end
            ends = _ends(agreed + 1, gamma, runs_on) if unknown else {drafted: 1.0}
            seconds = sum(p * costs.step_s(ASSISTANT, d, state, i) for d, p in ends.items())
            step = (ASSISTANT, round(sum(d * p for d, p in ends.items())))
        else:
            draft = h.lookup_drafts[i][:gamma]
            step, agreed = (LOOKUP if draft else None, len(draft)), agreement(draft, output, i)
            seconds = costs.step_s(*step, state, i)
        committed = min(step[1], agreed, n - i - 1) + 1
        moves.append(Move(i, *step, committed, seconds))
        i, state = i + committed, after(step[0], state)
    return moves


def _drafted(h: Hindsight, i: int, gamma: int, threshold: float) -> int:
    """How many of `gamma` candidates the assistant drafts from position `i` where its draft
    ends after a token it gives less than `threshold`. Its confidence is known on the true
    prefix, so along the draft up to and including its first wrong token: past it, `gamma`
    (`constant_schedule` prices where it ends)."""
    confidence = h.assistant_confidence
    if not threshold or confidence is None:
        return gamma
    known = min(gamma, h.assistant_runs[i] + 1, len(confidence) - i)
    for j in range(known):
        if confidence[i + j] < threshold:
            return j + 1
    return gamma


def _ends(wrong: int, gamma: int, runs_on: float) -> dict[int, float]:
    """The lengths, up to `gamma`, a draft whose first wrong candidate is its `wrong`-th
    may end at, with their chances: past it, it goes on at each candidate at `runs_on`."""
    ends, reach = {}, 1.0
    for drafted in range(wrong, gamma):
        ends[drafted] = reach * (1.0 - runs_on)
        reach *= runs_on
    ends[gamma] = reach
    return ends


def runs_on_past_a_rejection(record: RunRecord, h: Hindsight, threshold: float) -> float:
    """The chance that the record's assistant drafts went on past a candidate beyond their
    first wrong one, where its confidence (known: drafted on the true prefix) did not end
    them at `threshold`: candidates drafted past it, over those and the drafts that ended
    short of their γ (the cap where a step does not say); 1 where none tells."""
    confidence = h.assistant_confidence or ()
    went_on = ended = position = 0
    for step in record.steps:
        wrong = position + step.accepted
        position += len(step.token_ids)
        if step.source is not ASSISTANT or step.accepted >= step.drafted:
            continue
        if wrong < len(confidence) and confidence[wrong] >= threshold:
            went_on += step.drafted - step.accepted - 1
            ended += step.drafted < (step.chosen or h.cap)
    return went_on / (went_on + ended) if went_on + ended else 1.0


def replay(record: RunRecord, h: Hindsight) -> tuple[list[Move], int, int, list[int]]:
    """The run's own choices priced by its cost model; how many of its drafting steps the
    hindsight reproduces (the accepted count of an assistant step; the very candidates of a
    lookup step), of how many; and the rows of T(k) extrapolated past the curve to price
    them (`Costs`)."""
    costs = Costs(h, record.prompt_tokens)
    moves, i, state = [], 0, Model.UNSTARTED
    agreeing = drafting = 0
    for step in record.steps:
        source = step.source if step.drafted or step.source is ASSISTANT else None
        seconds = costs.step_s(source, step.drafted, state, i)
        moves.append(Move(i, source, step.drafted, len(step.token_ids), seconds))
        if step.drafted:
            drafting += 1
            agreeing += _reproduced(step, h, i)
        i, state = i + len(step.token_ids), after(source, state)
    return moves, agreeing, drafting, sorted(costs.extrapolated)


def _reproduced(step: Step, h: Hindsight, position: int) -> bool:
    """Whether the hindsight at `position` predicts what the step saw: as many accepted
    candidates from the assistant, the very candidates from the lookup."""
    if step.source is ASSISTANT and h.assistant_runs is not None:
        return min(step.drafted, h.assistant_runs[position]) == step.accepted
    if step.source is LOOKUP:
        return tuple(step.draft_ids) == tuple(h.lookup_drafts[position][: step.drafted])
    return False


def seconds(moves: Sequence[Move]) -> float:
    return sum(move.seconds for move in moves)


def why_not(record: RunRecord, needs_hindsight: bool = True) -> str | None:
    """Why a run gets no oracle, or None where it can (its hindsight aside where not
    `needs_hindsight`: `assisted.engine.hindsight` asks before finding it)."""
    if record.sampled:
        return (
            "sampled: another schedule would have drawn other tokens, so no schedule's "
            "outcome can be known in hindsight"
        )
    if record.drafter not in (ASSISTANT, LOOKUP):
        return f"the {record.drafter} drafter's drafts cannot be replayed from the output"
    if record.stopped:
        return "the run was stopped"
    if record.total_s <= 0:
        return "the run has not finished"
    if HINDSIGHT in record.analysis_errors:
        return f"its hindsight could not be found ({record.analysis_errors[HINDSIGHT]})"
    if needs_hindsight and record.hindsight is None:
        return "no costs were measured for this pair's drafting (the `auto` schedule times them)"
    return None


def report(plain: RunRecord | None, assisted: RunRecord, pooled: Sequence[RunRecord] = ()) -> dict:
    """The JSON's `oracle`: the best schedule in hindsight against the run's choices, both
    modelled with the costs the runs' steps measured (T(k) pooled with the steps of
    `pooled`, a shoot-out's other lanes), and the run's clock; beside it the same priced by
    the run's cost model (`policy_priced`), and whether the two differ (the module's note).
    Every key is there; where no oracle can be found, the figures are None and `reason`
    says why."""
    reason = why_not(assisted)
    if reason is not None:
        return {key: None for key in _KEYS} | {"reason": reason}
    own = [run for run in (plain, assisted) if run is not None]
    found = _priced_by(plain, assisted, measured_costs.priced(assisted.hindsight, own, pooled))
    by_policy = _priced_by(plain, assisted, assisted.hindsight)
    found["policy_priced"] = {key: by_policy[key] for key in _POLICY_KEYS}
    speedup = found["speedup_modelled"]
    differ = abs(by_policy["speedup_modelled"] / speedup - 1.0) if speedup else None
    found["prices_differ"] = differ is not None and differ > PRICES_DIFFER
    found["measured_rows"] = sorted(measured_costs.rows_measured(own, pooled))
    return found


def _priced_by(plain: RunRecord | None, assisted: RunRecord, h: Hindsight) -> dict:
    """The oracle's figures with the costs of `h`."""
    output = assisted.token_ids
    best = best_schedule(h, output, assisted.prompt_tokens)
    ran, agreeing, drafting, extrapolated = replay(assisted, h)
    prefill = _prefill_s(assisted, ran, h)
    modelled_plain_s = prefill + len(output) * dict(h.verify_s)[1]
    measured_plain_s = _plain_s(plain, len(output))
    plain_s = measured_plain_s or modelled_plain_s
    oracle_s, run_s = prefill + seconds(best), prefill + seconds(ran)
    constant = _best_constant(h, output, assisted.prompt_tokens)
    return {
        "speedup_modelled": rounded(plain_s / oracle_s),
        "oracle_s": rounded(oracle_s),
        "plain_modelled_s": rounded(modelled_plain_s),
        "auto_modelled_s": rounded(run_s),
        "auto_speedup_modelled": rounded(plain_s / run_s),
        "measured_s": rounded(assisted.total_s),
        "overhead_s": rounded(assisted.total_s - run_s),
        "policy_share": rounded(oracle_s / run_s),
        # The measured speedup over the oracle's: both over the plain run (the module's note).
        "measured_share": rounded(oracle_s / assisted.total_s) if measured_plain_s else None,
        "best_constant_gamma": constant[0] if constant else None,
        "best_constant_speedup": rounded(plain_s / (prefill + constant[1])) if constant else None,
        "steps": len(best),
        "run_steps": len(ran),
        "agreement": rounded(agreeing / drafting) if drafting else None,
        "agreeing_steps": agreeing,
        "drafting_steps": drafting,
        "schedule": [
            {"position": m.position, "source": m.source, "gamma": m.gamma, "committed": m.committed}
            for m in best
        ],
        "verify_rows": max(k for k, _ in h.verify_s),
        "extrapolated_rows": extrapolated,
        "seconds": rounded(h.seconds),
        "reason": None,
    }


def failed(message: str) -> dict:
    """The JSON's `oracle` where finding it raised (`assisted.analysis.faults`): every key
    there, the figures None, `reason` and `error` saying why."""
    return {key: None for key in _KEYS} | {
        "reason": f"it could not be computed ({message})",
        "error": message,
    }


_KEYS = (
    "speedup_modelled",
    "oracle_s",
    "plain_modelled_s",
    "auto_modelled_s",
    "auto_speedup_modelled",
    "measured_s",
    "overhead_s",
    "policy_share",
    "measured_share",
    "best_constant_gamma",
    "best_constant_speedup",
    "steps",
    "run_steps",
    "agreement",
    "agreeing_steps",
    "drafting_steps",
    "schedule",
    "verify_rows",
    "extrapolated_rows",
    "seconds",
    "policy_priced",
    "prices_differ",
    "measured_rows",
)
# What `policy_priced` keeps of the oracle priced by the run's cost model.
_POLICY_KEYS = (
    *_KEYS[:5],
    "overhead_s",
    "policy_share",
    "best_constant_gamma",
    "best_constant_speedup",
)


def _prefill_s(assisted: RunRecord, ran: list[Move], h: Hindsight) -> float:
    """The target's prefill of the prompt beyond a one-row step, which every schedule pays:
    the assisted run's first step less what its choice costs in the model (the module's
    note)."""
    first = assisted.steps[0].t_s if assisted.steps else 0.0
    return max(first - (ran[0].seconds if ran else dict(h.verify_s)[1]), 0.0)


def _plain_s(plain: RunRecord | None, tokens: int) -> float | None:
    """The plain run's measured seconds for `tokens` tokens, at its tokens/s (the module's
    note); None without one."""
    if plain is None or plain.total_s <= 0 or not plain.token_ids:
        return None
    return plain.total_s * tokens / len(plain.token_ids)


def _best_constant(
    h: Hindsight, output: Sequence[int], prompt_tokens: int
) -> tuple[int, float] | None:
    """The constant γ whose schedule would have been fastest, and its modelled seconds
    (prefill aside); None without an assistant."""
    if h.assistant_runs is None or not output:
        return None
    times = {
        g: seconds(constant_schedule(h, output, prompt_tokens, g)) for g in range(1, h.cap + 1)
    }
    gamma = min(times, key=times.get)
    return gamma, times[gamma]
