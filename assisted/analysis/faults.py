"""An analysis never destroys a run: a figure derived after both runs finished (the
divergence verdict, the prediction, the oracle and its hindsight, the charts) that fails
is marked failed, and the runs' outputs, measured figures and raw records are returned all
the same.

`attempted` guards one analysis, the `with` block it runs in; where it raises, the fault
is logged as an error, with its traceback, once per distinct fault (the app rebuilds its
report at every streamed update, and a fault would otherwise repeat in the log as often),
and its message is kept under the analysis's name in `failures`, which the JSON carries as
`analysis_errors`. The analysis runs in its caller's frame, not as a callback: a module of
this low layer never calls back up into the engine, the bench or the app that use it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

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
