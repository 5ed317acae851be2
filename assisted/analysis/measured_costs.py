"""The costs a run paid, read back from its steps: what the oracle and the shoot-out's γ sweep
are priced by (`assisted.analysis.oracle`), beside the costs the policy believed.

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

No torch here: records in, costs out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from itertools import pairwise

from assisted.core import cost_curve
from assisted.core.drafters import DrafterKind
from assisted.core.figures import median
from assisted.core.record import Hindsight, RunRecord

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
