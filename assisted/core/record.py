"""The raw record of one decoding run: what happened at each target step, nothing derived.

Plain data only (no torch), so the UI, the CLI, the benchmark and `stats` can all read it.
Every number shown anywhere is computed from these fields by `assisted.analysis.stats`.

Why the `auto` policy kept the assistant from drafting at a step: the one place that names
the reasons and says them in words (`assisted.policy.choice` decides them; a step's record
keeps its reason, `Step.held_back`).

- FIRST_DRAFT: the assistant has not drafted in this run, and its read of the context (the
  prompt and what was committed since) costs more than drafting could be expected to save
  over the tokens the run can expect yet.
- WAITING: only in records written before the policy's wait rule (once the read could pay,
  wait until the time drafting would have saved reached half its cost) was folded into the
  first-draft rule; kept so that they still read (a benchmark's runs.jsonl, replayed by
  `python -m lab.policy_fit`).
- CATCH_UP: the assistant skipped steps, and its read of their tokens costs more than
  drafting could save over the tokens left.
- FLOOR: the run's latest steps with the assistant ran slower per committed token than
  plain decoding does.

Each value is its name in the JSON and the API; the enum is a `str`, so it serialises as
it and pickles across ZeroGPU's process boundary.

Every figure derived from a record is made with the one rounding (`rounded`, to `DIGITS`
decimals in the JSON) and the one median (`median`) defined here.

**An analysis never destroys a run**: a figure derived after both runs finished (the
divergence verdict, the prediction, the oracle and its hindsight, the charts) that fails
is marked failed, and the runs' outputs, measured figures and raw records are returned all
the same. `attempted` guards one analysis, the `with` block it runs in; where it raises,
the fault is logged as an error, with its traceback, once per distinct fault (the app
rebuilds its report at every streamed update, and a fault would otherwise repeat in the
log as often), and its message is kept under the analysis's name in `failures`, the
record's `analysis_errors` (the JSON carries them so). The analysis runs in its caller's
frame, not as a callback: a module of this low layer never calls back up into the engine,
the bench or the app that use it.

No torch here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Literal

from assisted.core.settings import DrafterKind


class HeldBack(StrEnum):
    FIRST_DRAFT = "first-draft"
    WAITING = "waiting"
    CATCH_UP = "catch-up"
    FLOOR = "floor"

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        """The reason for people, completing "the assistant did not draft because …"."""
        return {
            HeldBack.FIRST_DRAFT: "its first read of the prompt could not pay over the tokens left",
            HeldBack.WAITING: "its first read of the prompt had not yet paid for itself",
            HeldBack.CATCH_UP: "its catch-up on skipped steps could not pay over the tokens left",
            HeldBack.FLOOR: "the run's steps with it ran slower than plain decoding",
        }[self]


Mode = Literal["plain", "assisted"]
CalibrationSource = Literal["timed", "disk"]


def common_prefix_length(a: Sequence, b: Sequence) -> int:
    """How many leading items `a` and `b` share: a step's accepted count, of its draft and
    the ids it committed (also used on text and on a cache's ids)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


@dataclass(frozen=True)
class Step:
    """One target forward pass and the tokens it committed.

    `t_s` is seconds since the run started (prompt encoded, clock read after a device
    synchronisation). `text` is what the step committed, as it streamed.

    `draft_ids` are the candidates the target verified in this pass, in the target's token
    ids (empty in plain decoding); `drafted` is their count and `accepted` how many of them
    the step committed: the common prefix of `draft_ids` and `token_ids`. The step emits
    `accepted + 1` tokens unless EOS or the length limit cuts it.

    The draft's text, decoded after the text committed before this step, is
    `accepted_text + rejected_text`: the first part is also the start of `text`, the second
    is the remainder the step did not commit ("" when it committed every candidate).
    `draft_s` is the seconds the drafter's forward passes took for this step; None where
    drafting is not timed apart (plain decoding, prompt lookup).
    `chosen` is the γ the `auto` policy asked for at this step (None under other schedules);
    `drafted` can fall short of it where the assistant's confidence or cumulative threshold
    stops it, prompt lookup finds a shorter match, or the length limit is near.
    `source` is where the step's candidates came from, a `DrafterKind`; under `auto` it can
    change from step to step (a prompt-lookup match instead of the assistant's draft); None
    for a step that drafted nothing.
    `expected_tokens`, `expected_s` and `plain_step_s` are what the `auto` policy expected
    of its choice when it made it (`assisted.policy.choice.Expectation`): the tokens the step would
    commit, the seconds it would take, and the seconds a plain step would have taken then;
    None under other schedules.
    `held_back` is why the `auto` policy kept the assistant from drafting at this step, though
    it could have (`HeldBack`: its first read of the prompt could not pay, or
    had not yet; its catch-up could not pay; the run's steps with it fell behind plain);
    None where it did not, and under other schedules.
    `draft_p` and `draft_q` are, in a sampled run, each drafted token's probability under
    the target (p) and under the drafter (q), as Transformers accepted it with probability
    min(1, p/q): both after the run's temperature and top-p, q = 1 for a prompt-lookup
    draft (`assisted.engine.observe`). Empty in greedy runs and for steps that drafted nothing.

    The fields after `t_s` default to empty, so records made before drafts were kept load.
    """

    token_ids: tuple[int, ...]
    text: str
    drafted: int
    accepted: int
    t_s: float
    draft_ids: tuple[int, ...] = ()
    accepted_text: str = ""
    rejected_text: str = ""
    draft_s: float | None = None
    chosen: int | None = None
    source: DrafterKind | None = None
    expected_tokens: float | None = None
    expected_s: float | None = None
    plain_step_s: float | None = None
    draft_p: tuple[float, ...] = ()
    draft_q: tuple[float, ...] = ()
    held_back: HeldBack | None = None


# The drafting paths (`DraftingPath.path`).
CUDA_GRAPHS = "cuda-graphs"
EAGER = "eager"
GENERATE = "generate"
# The graphs' self-check verdicts (`DraftingPath.check`,
# `assisted.engine.drafters.static_draft.self_check`): every replay bit for bit as eager
# passes; within the last bits of them (the dtype's bound; graphs kept); a wrong replay;
# too few positions judged.
PASSED = "passed"
LAST_BIT = "last-bit"
FAILED = "failed"
INCONCLUSIVE = "inconclusive"
TRUSTED = frozenset({PASSED, LAST_BIT})  # the verdicts whose graphs draft


@dataclass(frozen=True)
class Verdict:
    """The graphs' self-check's outcome (`assisted.engine.drafters.static_draft.self_check`):
    "passed", "last-bit", "failed" or "inconclusive"; the positions its comparison with the
    DynamicCache loop judged; what differed, or why it could not judge ("" for a pass); the
    largest probability gap against eager passes and where (None where the check ended
    before one was known)."""

    check: str
    judged: int
    detail: str = ""
    gap: float | None = None
    gap_at: str = ""


@dataclass(frozen=True)
class DraftingPath:
    """How an assisted run's assistant drafted, and why (`assisted.engine.drafters.static_draft`):
    "cuda-graphs" (its draft replayed as captured CUDA graphs, read back once), "eager"
    (the lean loop, a pass and a read a token) or "generate" (the assistant's own
    `generate()` through Transformers' generator). `capture_s`: what capturing the graphs
    and their self-check took, once per process and assistant; None where none were
    captured. `check`: the graphs' self-check verdict, "passed", "last-bit", "failed" or
    "inconclusive", and `judged` the positions its comparison with the DynamicCache loop
    judged; `gap` the largest gap between a replay's probabilities and eager passes' on
    its cache, and `gap_at` where it was; None where no self-check ran."""

    path: str
    reason: str
    capture_s: float | None = None
    check: str | None = None
    judged: int | None = None
    gap: float | None = None
    gap_at: str | None = None


@dataclass(frozen=True)
class Calibration:
    """Where an `auto` run's costs came from. "timed": this process timed some the pair
    lacked, when it prepared the pair (for a comparison, before its warm-up). "disk": an
    earlier process on this machine did, and they were read from its file. `seconds`: all
    this process spent timing, the checks included. `checked`: the costs read from the
    file that this process timed again ("T(1)", "T(9)", "drafting int8"), once per process;
    `corrected`: those whose new time was lower, and replaced the file's
    (`assisted.engine.engine.calibrate`). `file` is where the pair's learnt state is kept; None
    where nothing is kept on disk (`assisted.models.learnt_store`)."""

    source: CalibrationSource
    seconds: float = 0.0
    file: str | None = None
    checked: tuple[str, ...] = ()
    corrected: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # JSON turns tuples into lists (`RunRecord.from_dict`).
        object.__setattr__(self, "checked", tuple(self.checked))
        object.__setattr__(self, "corrected", tuple(self.corrected))


@dataclass(frozen=True)
class Hindsight:
    """What a greedy assisted run's drafters would have proposed at every output position,
    found after the run and off its clock (`assisted.engine.hindsight`), with the costs the run
    measured: what `assisted.analysis.oracle` needs to find the best schedule in hindsight.

    `assistant_runs[i]`: how many output tokens in a row, from position i, the assistant's
    greedy draft from the true prefix agrees with (None without an assistant model), and
    `assistant_confidence[i]` the probability it gives its own next token there.
    `lookup_drafts[i]`: the prompt-lookup source's proposal at position i, up to `cap`
    tokens (empty: no match), and `lookup_lengths[i]` how many tokens its match shares with
    the context (0: unknown, as with Transformers' search). The costs are the run's cost
    model at its end (`assisted.policy.estimates`): T(k) as (k, seconds), the assistant's
    seconds per drafted token, per drafting call beyond its passes, per catch-up and per
    token of a prefill. `seconds` is what finding all this took."""

    assistant_runs: tuple[int, ...] | None
    lookup_drafts: tuple[tuple[int, ...], ...]
    verify_s: tuple[tuple[int, float], ...]
    cap: int
    assistant_confidence: tuple[float, ...] | None = None
    lookup_lengths: tuple[int, ...] = ()
    drafting_s: float = 0.0
    call_s: float = 0.0
    catch_up_s: float = 0.0
    prefill_s: float = 0.0
    seconds: float = 0.0

    @classmethod
    def from_dict(cls, data: dict) -> Hindsight:
        # JSON turns tuples into lists.
        runs, confidence = data.get("assistant_runs"), data.get("assistant_confidence")
        return cls(
            **{
                **data,
                "assistant_runs": None if runs is None else tuple(runs),
                "assistant_confidence": None if confidence is None else tuple(confidence),
                "lookup_lengths": tuple(data.get("lookup_lengths", ())),
                "lookup_drafts": tuple(tuple(d) for d in data["lookup_drafts"]),
                "verify_s": tuple((int(k), s) for k, s in data["verify_s"]),
            }
        )


@dataclass
class RunRecord:
    """Everything recorded about one run of one prompt in one mode."""

    mode: Mode
    drafter: DrafterKind | None
    prompt_tokens: int
    steps: list[Step] = field(default_factory=list)
    # Seconds from start to the end of generate(), device synchronised.
    total_s: float = 0.0
    # Wall time of each drafter forward pass after its prefill (assistant models only);
    # used to measure the cost ratio c of the speculative-decoding model.
    draft_forward_s: list[float] = field(default_factory=list)
    stopped: bool = False
    # What the assistant model computed in ("int8", "bfloat16", ...); None without one.
    assistant_precision: str | None = None
    # Under the `auto` schedule: the target's seconds to verify k rows, as (k, seconds) for
    # k = 1 … cap + 1, calibrated before the run and refined by its timed steps.
    verify_cost_s: list[tuple[int, float]] = field(default_factory=list)
    # Under the `auto` schedule: where those costs came from. None under other schedules.
    calibration: Calibration | None = None
    # Under the `auto` schedule: the temperature band whose acceptance history seeded the
    # run and received what it saw (`assisted.core.settings`). None under other schedules.
    acceptance_band: str | None = None
    # The target's two best tokens at each committed token, with their logits, as (first,
    # first_logit, second, second_logit); None where a position was not seen. They are the
    # evidence for a divergence from the plain run (assisted.analysis.divergence).
    top2: list[tuple[int, float, int, float] | None] = field(default_factory=list)
    # What the target computed in ("bfloat16", ...), and whether tokens were sampled.
    dtype: str | None = None
    sampled: bool = False
    # A greedy assisted run's drafters' proposals at every position, found after it, and
    # its costs (`assisted.engine.hindsight`); None where no oracle can be found.
    hindsight: Hindsight | None = None
    # How the assistant drafted (`DraftingPath`); None without an assistant model.
    drafting_path: DraftingPath | None = None
    # The analyses found with the run, off its clock, that failed (its hindsight), by name,
    # with their fault (`attempted`): the run itself is whole.
    analysis_errors: dict[str, str] = field(default_factory=dict)

    @property
    def token_ids(self) -> list[int]:
        return [t for step in self.steps for t in step.token_ids]

    @property
    def text(self) -> str:
        return "".join(step.text for step in self.steps)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RunRecord:
        steps = [_step_from_dict(s) for s in data.get("steps", [])]
        curve = [(int(k), s) for k, s in data.get("verify_cost_s", [])]
        drafter = _kind(data.get("drafter"))
        top2 = [None if row is None else tuple(row) for row in data.get("top2", [])]
        calibration = Calibration(**data["calibration"]) if data.get("calibration") else None
        hindsight = Hindsight.from_dict(data["hindsight"]) if data.get("hindsight") else None
        path = DraftingPath(**data["drafting_path"]) if data.get("drafting_path") else None
        return cls(
            **{
                **data,
                "steps": steps,
                "verify_cost_s": curve,
                "drafter": drafter,
                "top2": top2,
                "calibration": calibration,
                "hindsight": hindsight,
                "drafting_path": path,
            }
        )


def _step_from_dict(data: dict) -> Step:
    # JSON turns tuples into lists; a step keeps its ids and probabilities as tuples.
    keys = ("token_ids", "draft_ids", "draft_p", "draft_q")
    ids = {key: tuple(data[key]) for key in keys if key in data}
    held_back = data.get("held_back")
    return Step(
        **{
            **data,
            **ids,
            "source": _kind(data.get("source")),
            "held_back": None if held_back is None else HeldBack(held_back),
        }
    )


def _kind(name: str | None) -> DrafterKind | None:
    return None if name is None else DrafterKind(name)


DIGITS = 4  # decimals a figure keeps in the JSON


def rounded(value: float | None, digits: int = DIGITS) -> float | None:
    """`value` to `digits` decimals; None stays None."""
    return None if value is None else round(value, digits)


def median(values: Sequence[float | None]) -> float | None:
    """The median of the values that are not None (the mean of the two middle ones for an
    even count); None where there are none."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


# The analyses' names, as `analysis_errors` keys them (docs/json.md).
HINDSIGHT = "hindsight"
DIVERGENCE = "divergence"
PREDICTION = "prediction"
ORACLE = "oracle"
CHARTS = "charts"

_log = logging.getLogger("assisted.analysis")
_LOGGED_MAX = 256  # distinct faults remembered, so a long-lived app does not grow without end
_logged: set[tuple[str, str]] = set()


class Attempt:
    """What `attempted` found: `failure`, the fault's message where the analysis raised
    (None: it ran)."""

    def __init__(self) -> None:
        self.failure: str | None = None


@contextmanager
def attempted(part: str, failures: dict[str, str]) -> Iterator[Attempt]:
    """Run the `with` block, one analysis; where it raises, the block ends there, the fault
    is logged, its message kept in `failures[part]` and in the `Attempt` yielded, from
    which the caller sets the figures' failed form."""
    found = Attempt()
    try:
        yield found
    except Exception as error:
        found.failure = message = describe(error)
        failures[part] = message
        if (part, message) not in _logged:
            if len(_logged) >= _LOGGED_MAX:
                _logged.clear()
            _logged.add((part, message))
            _log.exception("%s could not be computed after the runs finished: %s", part, message)


def describe(error: BaseException) -> str:
    """A fault in one line: its type and message."""
    return f"{type(error).__name__}: {error}"


def sentence(failures: dict[str, str]) -> str | None:
    """What could not be computed, in one line for people; None where everything was."""
    if not failures:
        return None
    parts = "; ".join(f"the {part} ({message})" for part, message in failures.items())
    return f"Could not be computed: {parts}. The runs and their measured figures are kept."


def card_lines(prompts: list[dict]) -> list[str]:
    """The benchmark card's line per prompt whose analyses failed (its row's
    `analysis_errors`), then a blank; none where every analysis was computed."""
    lines = [
        f"{row['category']}/{row['question_id']}, {row['drafter']}: "
        + sentence(row["analysis_errors"])
        for row in prompts
        if row.get("analysis_errors")
    ]
    return [*lines, ""] if lines else []
