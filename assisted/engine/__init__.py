"""Decoding runs: Transformers' own `generate()`, prepared once and watched step by step.

The flow of one run, each stage a module, in gpt-fast's manner:

    encode     prompt.encode_prompt     text -> ids (the chat template); the engine's only
                                        tokenizing: past it everything takes ids
    check      running.check            settings, draft and length refused with words
    prepare    prepare.prepare          once per process and pair: drafting copies,
                                        calibration, graphs, the template's facts
    plan       plan.make_plan           generate()'s arguments, the seam, the policy
    generate   decoding.generate_watched    one watched generate(): a StepEvent per step
    keep       running.keep             off the clock: hindsight, what the run learnt
    report     comparison.report        every figure, from the records (`analysis.stats`)

`running.run` is a run's whole life (check, prepare, plan, generate, keep), yielding
`events.StepEvent`s then `events.RunDone`; `comparison.compare` checks once, warms up and
runs each mode in turn through it, with its `comparison.Phase`s between. The engine takes a
prompt's text (with its template) or its ids; the way back to text is the
`detokenizer.Detokenizer` the observer applies to each step. Its other modules:

- `events`: what a run yields, and `drain` to its record;
- `clock`: the device synchronised before the host reads the time;
- `observe`, `detokenizer`, `draft_probs`: watching a run (streamer, hooks, timers); its
  text as it streams; a sampled run's p and q;
- `calibration`: the `auto` policy's costs, timed once per pair before any run;
- `learning`: the policy's life across runs: made from what the pair learnt, and what a
  run learnt kept for the next;
- `drafters/`: the project's own drafting: the seam into `generate()` (it overrides the
  target's private `_get_candidate_generator` for one run), the per-step drafters
  Transformers calls, the suffix lookup, the lean drafting loop and its CUDA graphs;
- `hindsight`: what the drafters would have proposed at every position, after the run;
- `sampling_draws`: samples of a prompt's first tokens, drawn as a run draws them.

What callers use is exported here (`from assisted.engine import run, compare, ...`),
imported on first use so that `import assisted.engine.X` loads only what X needs; the
preparation, which shares its module's name, is `assisted.engine.prepare.prepare`.

May import: `core`, `policy`, `analysis`, `models`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each exported name and the module that defines it.
_EXPORTS = {
    "encode_prompt": "prompt",
    "check": "running",
    "run": "running",
    "run_bare": "running",
    "compare": "comparison",
    "warm_up": "comparison",
    "report": "comparison",
    "Phase": "comparison",
    "Event": "comparison",
    "StepEvent": "events",
    "RunDone": "events",
    "drain": "events",
    "synchronize": "clock",
}

__all__ = [
    "Event",
    "Phase",
    "RunDone",
    "StepEvent",
    "check",
    "compare",
    "drain",
    "encode_prompt",
    "report",
    "run",
    "run_bare",
    "synchronize",
    "warm_up",
]

if TYPE_CHECKING:
    from assisted.engine.clock import synchronize
    from assisted.engine.comparison import Event, Phase, compare, report, warm_up
    from assisted.engine.events import RunDone, StepEvent, drain
    from assisted.engine.prompt import encode_prompt
    from assisted.engine.running import check, run, run_bare


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
