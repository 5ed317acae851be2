"""How fast each pair decodes here, as this app process has measured it: seconds per plain
token, for the Benchmark tab's time estimate. Imports neither torch nor gradio.

A comparison and a benchmark make plain runs, and the latest one on a pair sets its pace:
the run's seconds per token after its first step (`stats.target_s_per_token`; the first
step holds the prefill). Plain decoding runs the target alone, so paces are kept by
target: pairs that share one (`embedded` and `embedded-prompt-lookup`) share a pace.
Until a pair has that figure (a comparison stopped within two steps of plain decoding), an
`auto` run's T(1), the target's measured time to verify one row (`verify_cost_s`, the
policy's calibration refined by the run), stands in for it. Before either, the pair has no
pace, and the estimate says it is guessing.

The figures come from the results the tabs receive, not from the loaded pair, so they are
there on ZeroGPU too, where the runs happen in another process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from assisted.analysis import stats
from assisted.core.record import RunRecord


@dataclass(frozen=True)
class Pace:
    """Seconds per plain token on one pair, and how they were measured (for the estimate's
    wording: "measured in …")."""

    s_per_token: float
    source: str


class Paces:
    """The latest pace of each target (a model id or folder, `PairSpec.target`); shared by
    the tabs' handlers (threads). `pair` names the pair a figure was measured on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paces: dict[str, Pace] = {}

    def of(self, target: str) -> Pace | None:
        with self._lock:
            return self._paces.get(target)

    def note(self, target: str, s_per_token: float | None, source: str) -> None:
        if s_per_token is not None and s_per_token > 0:
            with self._lock:
                self._paces[target] = Pace(s_per_token, source)

    def note_plain_run(self, target: str, pair: str, record: RunRecord) -> None:
        """A run on `pair` (the benchmark's); only plain runs set the pace."""
        if record.mode == "plain":
            pace = stats.target_s_per_token(record)
            self.note(target, pace, f"measured in the latest plain run on {pair} here")

    def note_comparison(self, target: str, pair: str, result: dict) -> None:
        """A finished comparison on `pair`: `stats.report(...)`'s dict."""
        rate = (result.get("plain") or {}).get("decode_tokens_per_s")
        if rate:
            self.note(target, 1 / rate, f"measured in the latest plain run on {pair} here")
            return
        curve = (result.get("assisted") or {}).get("verify_cost_s") or []
        one_row = dict((int(k), s) for k, s in curve).get(1)
        if self.of(target) is None:  # a plain run's figure is the better one
            source = f"the target's measured time for one row on {pair} (auto)"
            self.note(target, one_row, source)
