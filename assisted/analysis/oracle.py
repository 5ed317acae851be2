"""The oracle: the fastest schedule a greedy assisted run could have had, found in hindsight.

After a greedy run every committed token is known, so what each choice would have bought
is known too (`assisted.engine.hindsight` finds it, off the run's clock):
- the assistant, drafting at output position i from the true prefix, agrees with the output
  for `assistant_runs[i]` tokens in a row, so a draft of γ commits min(γ, that) + 1;
- the lookup's proposal at i, `lookup_drafts[i]`, is a pure function of the ids; cut to L
  tokens it commits min(L, its agreement with the output) + 1.

With the costs the run's steps measured (`priced`: T(k) from
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
alike. Priced by the run's own steps (`priced`), the oracle is then at or above the
measured run, up to the noise between its own steps.

No torch here: the run's record in, seconds and a schedule out.

The oracle's finding in words (`describe`): for the CLI's card, the app's
summary and the shoot-out's ranking.

The costs a run paid, read back from its steps: what the oracle and the shoot-out's γ sweep
are priced by (`priced`), beside the costs the policy believed.

The policy's costs are a model: what the calibration timed, refined by the run. Priced by
them, the oracle is wrong in the same way the policy is, so its share flatters a policy
whose costs are wrong (a learnt file written under a busy neighbour priced γ = 8 at 0.80x
where it measured 1.67x, and the oracle agreed). The steps themselves say what each kind
of step cost, the run's machinery in:
- **T(k)**: a step's wall time (from the step before it) less its drafting, for the steps
  that verified k rows (drafted + 1), the run's first step aside (it holds the target's
  read of the prompt); fitted monotone in k with medians (`assisted.core.cost_curve`), and
  rows no step verified set from the policy's curve at the level the measured rows set.
  A row is priced from the nearest runs that timed it (`NEAREST_TIMINGS` steps or more):
  the lane's assisted run itself, else the plain run of its round, else the pool. A
  step's wall time holds the lane's own machinery (Transformers' candidate generator, or
  the lean loop) and the machine's load while it ran, which a pool of other lanes' and
  rounds' steps would average away (a γ = 8 lane measured at 2.07x was modelled at 1.35x
  from such a pool, on a 2-core EPYC whose load changed between rounds), and which even
  its round's plain run, a minute apart, need not share (a prompt-lookup lane measured in
  4.66 s was priced at 5.54 s for its oracle from the one-row steps of a plain run that
  had slowed to 2.5 tokens a second). The target's rows are the same whatever drafted
  them, so the rows the lane never verified come from the other runs' steps (`pooled`: a
  shoot-out's other lanes, a benchmark prompt's other runs): what the oracle needs to
  price lengths the lane never tried.
- **drafting**: an assistant's seconds per drafted token, from its steps whose cache was
  current (the step before drafted too): the median of their drafting time per token.
- **its first read** per token of context: the first assistant step's drafting time beyond
  its tokens' drafting, over the context it read; **a catch-up**: the median such excess
  of a step after steps the assistant skipped.
Drafting figures come from the run's own steps only (each lane's assistant runs in its own
precision). A figure no step measured keeps the policy's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from itertools import pairwise

from assisted.core import cost_curve
from assisted.core.record import HINDSIGHT, Hindsight, RunRecord, Step, median, rounded
from assisted.core.settings import DrafterKind

# The timings of a row one run must hold to price it alone: fewer are one or two steps,
# which a slow pass moves as much as a changed round does.
NEAREST_TIMINGS = 3


def step_seconds(records: Iterable[RunRecord]) -> dict[int, list[float]]:
    """Each step's wall time less its drafting, by the rows it verified, over `records`
    (their first steps aside)."""
    rows: dict[int, list[float]] = {}
    for record in records:
        for earlier, step in pairwise(record.steps):
            seconds = step.t_s - earlier.t_s - (step.draft_s or 0.0)
            if seconds > 0:
                rows.setdefault(step.drafted + 1, []).append(seconds)
    return rows


def rows_measured(
    own: Sequence[RunRecord], pooled: Sequence[RunRecord] = ()
) -> dict[int, list[float]]:
    """The steps' seconds by rows (the module's note): each row from the nearest runs that
    timed it at least `NEAREST_TIMINGS` times, `own` taken from the last (the lane's
    assisted run) to the first (its round's plain run), then `pooled`; a row no one run
    timed that often, from all of them."""
    others = [r for r in pooled if not any(r is mine for mine in own)]
    layers = [step_seconds(others), *(step_seconds([run]) for run in own)]
    rows: dict[int, list[float]] = {}
    for layer in layers:  # the farthest first, each nearer one over it
        for k, seconds in layer.items():
            if len(seconds) >= NEAREST_TIMINGS:
                rows[k] = seconds
            elif len(rows.get(k, ())) < NEAREST_TIMINGS:
                rows[k] = rows.get(k, []) + seconds
    return rows


def priced(h: Hindsight, own: Sequence[RunRecord], pooled: Sequence[RunRecord] = ()) -> Hindsight:
    """`h` with its costs replaced by those the steps of `own` (a lane's plain and assisted
    runs, in that order) measured, the rows of T(k) they never verified from the steps of
    `pooled` (the module's note)."""
    measured = rows_measured(own, pooled)
    if not measured:
        return h
    policy_curve = dict(h.verify_s)
    curve = cost_curve.fit(measured, policy_curve, policy_curve)
    drafting, read, catch_up = _drafting(own, h.drafting_s)
    return replace(
        h,
        verify_s=tuple(sorted(curve.items())),
        drafting_s=drafting,
        call_s=0.0,  # in the steps' wall time, which T(k) is read from
        prefill_s=h.prefill_s if read is None else read,
        catch_up_s=h.catch_up_s if catch_up is None else catch_up,
    )


def _drafting(
    records: Sequence[RunRecord], policy_s: float
) -> tuple[float, float | None, float | None]:
    """The assistant's seconds per drafted token (`policy_s` where no step measured it),
    and per token of its first read, and a catch-up's excess (None where none was)."""
    current, reads, catch_ups = [], [], []
    for record in records:
        started, position, before = False, 0, None
        for step in record.steps:
            if step.source is DrafterKind.ASSISTANT and step.drafted and step.draft_s:
                if not started:
                    reads.append((step, record.prompt_tokens + position))
                elif before is DrafterKind.ASSISTANT:
                    current.append(step.draft_s / step.drafted)
                else:
                    catch_ups.append(step)
                started = True
            before = step.source if step.drafted else None
            position += len(step.token_ids)
    per_token = median(current)
    per_token = policy_s if per_token is None else per_token
    read = median([max(s.draft_s - per_token * s.drafted, 0.0) / n for s, n in reads if n])
    catch_up = median([max(s.draft_s - per_token * s.drafted, 0.0) for s in catch_ups])
    return per_token, read, catch_up


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
    """The run's own cost model (`assisted.policy.estimates`), priced per step.

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
    found = _priced_by(plain, assisted, priced(assisted.hindsight, own, pooled))
    by_policy = _priced_by(plain, assisted, assisted.hindsight)
    found["policy_priced"] = {key: by_policy[key] for key in _POLICY_KEYS}
    speedup = found["speedup_modelled"]
    differ = abs(by_policy["speedup_modelled"] / speedup - 1.0) if speedup else None
    found["prices_differ"] = differ is not None and differ > PRICES_DIFFER
    found["measured_rows"] = sorted(rows_measured(own, pooled))
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
    """The JSON's `oracle` where finding it raised (`assisted.core.record`): every key
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


def describe(found: dict | None) -> str:
    """The oracle's finding in words, for the CLI's card and the app's summary."""
    if not found:
        return "No oracle: there is no assisted run."
    if found["reason"] is not None:
        return f"No oracle: {found['reason']}."
    steps = found["steps"]
    line = (
        f"In hindsight the best schedule would take {steps} step{'s' * (steps != 1)} and "
        f"{found['oracle_s']:.2f} s, modelled from the costs this run's steps measured "
        f"({found['speedup_modelled']:.2f}x over the plain run). The run's own choices, "
        "modelled: "
        f"{found['auto_modelled_s']:.2f} s "
        f"({found['policy_share']:.0%} of the oracle's speed); measured: "
        f"{found['measured_s']:.2f} s, so {_overhead(found['overhead_s'])}."
    )
    if found["measured_share"] is not None:
        share = share_text(found["measured_share"])
        line += f" The measured speedup, as a share of the oracle's: {share}."
    if found.get("prices_differ"):
        line += (
            f" Priced by the policy's cost model instead, the oracle would be "
            f"{found['policy_priced']['speedup_modelled']:.2f}x: the policy decided on costs "
            "the run did not pay."
        )
    if found["best_constant_gamma"] is not None:
        line += (
            f" The best constant draft length would have been γ = "
            f"{found['best_constant_gamma']} ({found['best_constant_speedup']:.2f}x)."
        )
    if found["agreement"] is not None:
        line += (
            f" The hindsight reproduces the run's acceptance at {found['agreeing_steps']} of "
            f"its {found['drafting_steps']} drafting steps"
        )
    else:
        line += " The run drafted nothing to check the hindsight against"
    return line + f"; found in {found['seconds']:.1f} s after the run, off its clock."


def share_text(share: float) -> str:
    """A measured speedup's share of the oracle's, as it reads: a percentage up to 100%.
    The oracle is modelled from the run's own costs, so a run measured faster than it shows
    where the model undershot, not a share: it reads "above the oracle", with how many
    times the oracle's speedup it measured, never as a percentage."""
    return f"{share:.0%}" if share <= 1.0 else f"above the oracle (×{share:.2f})"


def _overhead(seconds: float) -> str:
    if seconds >= 0:
        return f"{seconds:.2f} s of overhead the model does not price"
    return f"{-seconds:.2f} s less than modelled"
