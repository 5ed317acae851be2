"""The benchmark: speedup and acceptance by prompt kind, theory beside measurement.

One job per module:
- `planning`: the prompts and drafting variants to compare, checked before a model loads;
- `measuring`: `benchmark()`, the timed runs on a loaded pair;
- `reporting`: runs in, figures (each run's share of the oracle, modelled and measured,
  among them), text tables and the chart of speedup per category out (no models);
- `journal`: a benchmark's files: its `--out` folder kept as it runs and read back to make
  the report again, or written at once (`write_out`);
- `shootout`: every drafter the target has on this device, raced on one prompt against
  one plain baseline, ranked, and why the winner won;
- `sampling_check/`: sampled assisted output held against plain sampling, in distribution
  (`run_check`), and its command, `python -m assisted.bench.sampling_check` (its `__main__`);
- `__main__`: `python -m assisted.bench`, its options and progress bar.

The app calls `benchmark()` (a generator of Progress events ending with Finished) on a
loaded pair, then `render()` and `draw_chart()` on the report. What the app and the tests
use is imported here; the command's own functions stay in `__main__`, which importing this
package does not run.

May import: `core`, `policy`, `analysis`, `models`, `engine`; its entry points also read
the CLI's options (`assisted.arguments`).
"""

from assisted.bench.journal import write_out
from assisted.bench.measuring import REPEATS, Finished, Progress, benchmark
from assisted.bench.planning import (
    EARLY_EXIT_LAYER,
    SWEEPS,
    BenchError,
    Variant,
    check_drafter,
    parse_variant,
    plan_variants,
    quant_sweep,
    select_examples,
    with_drafter,
)
from assisted.bench.reporting import (
    Run,
    draw_chart,
    render,
    report,
    summarize_group,
    summarize_prompt,
)

__all__ = [
    "EARLY_EXIT_LAYER",
    "REPEATS",
    "SWEEPS",
    "BenchError",
    "Finished",
    "Progress",
    "Run",
    "Variant",
    "benchmark",
    "check_drafter",
    "draw_chart",
    "parse_variant",
    "plan_variants",
    "quant_sweep",
    "render",
    "report",
    "select_examples",
    "summarize_group",
    "summarize_prompt",
    "with_drafter",
    "write_out",
]
