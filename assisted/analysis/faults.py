"""An analysis never destroys a run: a figure derived after both runs finished (the
divergence verdict, the prediction, the oracle and its hindsight, the charts) that fails
is marked failed, and the runs' outputs, measured figures and raw records are returned all
the same.

`attempt` runs one analysis; where it raises, the fault is logged as an error, with its
traceback, once per distinct fault (the app rebuilds its report at every streamed update,
and a fault would otherwise repeat in the log as often), and its message is kept under the
analysis's name in `failures`, which the JSON carries as `analysis_errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# The analyses' names, as `analysis_errors` keys them (docs/json.md).
HINDSIGHT = "hindsight"
DIVERGENCE = "divergence"
PREDICTION = "prediction"
ORACLE = "oracle"
CHARTS = "charts"

_log = logging.getLogger("assisted.analysis")
_LOGGED_MAX = 256  # distinct faults remembered, so a long-lived app does not grow without end
_logged: set[tuple[str, str]] = set()


def attempt(
    part: str, analyse: Callable[[], T], failed: Callable[[str], T], failures: dict[str, str]
) -> T:
    """`analyse()`, or where it raises, `failed(message)`, the fault logged and its
    message kept in `failures[part]`."""
    try:
        return analyse()
    except Exception as error:
        message = describe(error)
        failures[part] = message
        if (part, message) not in _logged:
            if len(_logged) >= _LOGGED_MAX:
                _logged.clear()
            _logged.add((part, message))
            _log.exception("%s could not be computed after the runs finished: %s", part, message)
        return failed(message)


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
