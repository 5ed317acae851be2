"""The Benchmark tab's components, laid out: what to benchmark, how much, and the outputs.
`benchmark.tab.build_benchmark_tab` wires their events."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from assisted.analysis.sampling_evidence import SAMPLES
from assisted.core.settings import ASSISTANT_QUANTS, MAX_NEW_TOKENS_CAP
from assisted.ui.benchmark.format import CATEGORY_HEADERS, PROMPT_HEADERS
from assisted.ui.benchmark.outputs import BenchmarkOutputs
from assisted.ui.pair_access import Config
from assisted.ui.tabs import by_field, folded_json, tokens_and_rounds, whole_slider

BENCH_MAX_NEW_TOKENS = 64  # default: a CPU takes about a minute per plain run of 128 tokens
BENCH_MAX_PROMPTS = 3  # prompts per category (examples/ has three)
BENCH_MAX_REPEATS = 3
# The sampling check's samples per set: its default takes 6.5 minutes on a busy 2-core CPU
# (docs/benchmarks.md#sampling-check), so four times as many take the better part of half an
# hour there.
BENCH_MAX_CHECK_SAMPLES = 4 * SAMPLES


def choices(
    config: Config, drafters: list[str], categories: list[str]
) -> tuple[gr.Dropdown, gr.CheckboxGroup, gr.CheckboxGroup, gr.CheckboxGroup]:
    """The pair, categories, drafters and assistant precisions to benchmark: `drafters` are
    the default pair's choices."""
    spec = config.registry[config.default_pair]
    pair = gr.Dropdown(
        list(config.registry),
        value=config.default_pair,
        label="Model pair",
        info="custom pairs: python -m assisted.bench --target … --assistant …",
        elem_id="bench-pair",
    )
    chosen = gr.CheckboxGroup(
        categories, value=categories, label="Categories", elem_id="bench-categories"
    )
    drafted = gr.CheckboxGroup(
        drafters,
        value=[spec.drafter.value],
        label="Drafters (each compared with the same plain runs)",
        elem_id="bench-drafters",
    )
    quants = gr.CheckboxGroup(
        list(ASSISTANT_QUANTS),
        value=[spec.draft.assistant_quant],
        label="Assistant precisions (each compared with the same plain runs)",
        info="none: the pair's dtype · int8: weights and activations · "
        "int8-wo: int8 weights only · int4-wo: 4-bit weights only · auto: int4-wo on a bf16 "
        "CPU, int8 on an fp32 one",
        visible=spec.drafter.has_model,
        elem_id="bench-quants",
    )
    return pair, chosen, drafted, quants


def sizes() -> tuple[gr.Slider, gr.Slider, gr.Slider]:
    """Prompts per category, new tokens per run and repeats."""
    prompts = whole_slider(BENCH_MAX_PROMPTS, 1, "Prompts per category", elem_id="bench-prompts")
    rounds = "Repeats (the median of three shrugs off one outlier)"
    sizes = tokens_and_rounds(
        MAX_NEW_TOKENS_CAP, BENCH_MAX_NEW_TOKENS, BENCH_MAX_REPEATS, rounds, "bench"
    )
    return prompts, *sizes


def outputs() -> dict[str, gr.components.Component]:
    """The tab's outputs, laid out, by their names in `BenchmarkOutputs`."""
    status = gr.Markdown(
        "Press **Run benchmark**; progress shows here.", elem_id="bench-status", label="status"
    )
    overall = gr.Markdown(elem_id="bench-overall", label="overall")
    categories = gr.Dataframe(
        pd.DataFrame(columns=CATEGORY_HEADERS),
        label="Per category",
        interactive=False,
        wrap=True,
        elem_id="bench-categories-table",
    )
    chart = gr.Plot(label="Speedup per category", elem_id="bench-chart")
    prompts = gr.Dataframe(
        pd.DataFrame(columns=PROMPT_HEADERS),
        label="Per prompt",
        interactive=False,
        wrap=True,
        # Wide enough that no header breaks inside a word.
        column_widths=["13%", "14%", "11%", "8%", "9%", "9%", "9%", "8%", "9%", "10%"],
        elem_id="bench-prompts-table",
    )
    report = folded_json("Report as JSON (python -m assisted.bench's)", "report")
    return by_field(BenchmarkOutputs, locals())


def check_samples() -> gr.Slider:
    """The sampling check's samples per set; 0, the default, runs no check."""
    return gr.Slider(
        0,
        BENCH_MAX_CHECK_SAMPLES,
        value=0,
        step=1,
        precision=0,
        label="Sampling check: samples per set (0: none)",
        info=f"after the timed runs, whether assisted sampling follows the target's "
        f"distribution ({SAMPLES} samples: 6.5 minutes on a busy 2-core CPU)",
        elem_id="bench-sampling-check",
    )
