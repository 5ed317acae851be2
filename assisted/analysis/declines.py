"""When and why an `auto` run kept its assistant from drafting, from its record's steps
(`Step.held_back`; the reasons are `assisted.core.held_back`'s): the figures of the JSON, and
the sentence the app's summary, the CLI and the benchmark's card say.

The first-draft rule's outcome in a run is one of:
- "at once": the assistant drafted at the first step it was weighed, its read of the prompt
  priced and paid for;
- "waited": it drafted after steps where that read could not pay yet (`first-draft`: the
  answer, running on, came to be expected to run long enough);
- "declined": it never drafted, because the read could not pay over the tokens the run had
  left (`first-draft`): the reason is the run's last such step's.
Records written before the wait rule was folded into the first-draft rule also hold
`waiting` steps (`assisted.core.held_back`), counted as the rule's.

Numbers in, words out: no torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from assisted.core.drafters import DrafterKind
from assisted.core.held_back import HeldBack
from assisted.core.record import RunRecord

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
