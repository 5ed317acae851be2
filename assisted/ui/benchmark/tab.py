"""The Benchmark tab: `assisted.bench` on the example prompts, category by category, with
progress; its last output is the report that `python -m assisted.bench` prints.

`build_benchmark_tab` lays the tab out and wires its events; its handlers are
`BenchmarkHandlers`' methods.

The Benchmark tab's components, laid out: what to benchmark, how much, and the outputs.
`benchmark.tab.build_benchmark_tab` wires their events.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Generator, Iterator

import gradio as gr
import pandas as pd

from assisted import bench
from assisted.analysis.sampling import SAMPLES, CheckSettings
from assisted.core.settings import (
    ASSISTANT_QUANTS,
    MAX_NEW_TOKENS_CAP,
    DrafterKind,
    RunSettings,
    SettingsError,
)
from assisted.models.pairs import PairSpec
from assisted.ui.benchmark.format import (
    CATEGORY_HEADERS,
    PROMPT_HEADERS,
    BenchmarkOutputs,
    BenchmarkRequest,
    bench_category_rows,
    bench_overall_markdown,
    bench_plan_markdown,
    bench_progress_markdown,
    bench_prompt_rows,
    bench_warning,
    device_note,
    split,
)
from assisted.ui.benchmark.gpu import stream_benchmark
from assisted.ui.errors import refusal
from assisted.ui.gpu_calls import GpuEvents, GpuTurn, TabHandlers, gpu_turn, stop_key
from assisted.ui.pair_access import Config
from assisted.ui.tabs import (
    Tab,
    TabState,
    by_field,
    folded_json,
    int_if_whole,
    on_device,
    on_stop,
    tokens_and_rounds,
    updating_only,
    whole_slider,
)

BENCH_MAX_NEW_TOKENS = 64  # default: a CPU takes about a minute per plain run of 128 tokens
BENCH_MAX_PROMPTS = 3  # prompts per category (examples/ has three)
BENCH_MAX_REPEATS = 3
# The sampling check's samples per set: its default takes 6.5 minutes on a busy 2-core CPU
# (docs/benchmarks.md#sampling-check), so four times as many take the better part of half an
# hour there.
BENCH_MAX_CHECK_SAMPLES = 4 * SAMPLES


def pair_choices(
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


def size_sliders() -> tuple[gr.Slider, gr.Slider, gr.Slider]:
    """Prompts per category, new tokens per run and repeats."""
    prompts = whole_slider(BENCH_MAX_PROMPTS, 1, "Prompts per category", elem_id="bench-prompts")
    rounds = "Repeats (the median of three shrugs off one outlier)"
    sizes = tokens_and_rounds(
        MAX_NEW_TOKENS_CAP, BENCH_MAX_NEW_TOKENS, BENCH_MAX_REPEATS, rounds, "bench"
    )
    return prompts, *sizes


def output_components() -> dict[str, gr.components.Component]:
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


NOTE = """
Times the example prompts, category by category: each prompt runs plain and with each chosen
drafter, and the **speedup** is assisted tokens/s ÷ plain tokens/s (greedy decoding). Runs
are **sequential** on one device, after a short untimed warm-up per prompt, and they
**alternate** which goes first (plain then the drafters, next time the reverse), so a slow
drift of the machine falls on both sides alike.
"""

NAME = "benchmark"  # its id: its element's, its GPU call's key, its requests' Stop key

StreamBenchmark = Callable[[BenchmarkRequest], GpuEvents[bench.Progress | bench.Finished]]
"""`app.stream_benchmark`, the GPU work: one call's request → Progress events and
Finished, within the call's events (`assisted.ui.gpu_calls`)."""


def _no_report(status: str) -> BenchmarkOutputs:
    """Every output's value without a report: before one exists, or when none will."""
    return BenchmarkOutputs(
        status=status,
        categories=pd.DataFrame(columns=CATEGORY_HEADERS),
        prompts=pd.DataFrame(columns=PROMPT_HEADERS),
        overall="The overall speedup appears here once every run has finished.",
        chart=None,
        report=None,
    )


def _finished(report: dict, total: int, elapsed_s: float) -> BenchmarkOutputs:
    """Every output's value once the report is in."""
    return BenchmarkOutputs(
        status=f"**Done**: {total} timed runs in {elapsed_s:.0f} s, one after the other on "
        "one device.",
        categories=pd.DataFrame(bench_category_rows(report), columns=CATEGORY_HEADERS),
        prompts=pd.DataFrame(bench_prompt_rows(report), columns=PROMPT_HEADERS),
        overall=bench_overall_markdown(report),
        chart=bench.draw_chart(report),
        report=report,
    )


class BenchmarkHandlers(TabHandlers):
    """The tab's handlers: run and stop a benchmark, and keep its choices consistent."""

    tab = NAME

    def _checked(
        self, pair: str, categories: list[str], drafters: list[str], prompts: float, repeats: float
    ) -> tuple[PairSpec, int, int]:
        """The pair, prompts per category and repeats; a gr.Error names what is wrong."""
        registry = self.shared.pairs.config.registry
        if pair not in registry:
            known = ", ".join(registry)
            raise refusal(f"Unknown pair {pair!r}; choose one of {known}.", title="Pair")
        if not categories:
            raise refusal("Choose at least one category: nothing was run.", title="Benchmark")
        if not drafters:
            raise refusal("Choose at least one drafter: nothing was run.", title="Benchmark")
        limit, repeats = int_if_whole(prompts), int_if_whole(repeats)
        if not isinstance(limit, int) or not 1 <= limit <= BENCH_MAX_PROMPTS:
            raise refusal(
                f"Prompts per category must be 1 to {BENCH_MAX_PROMPTS}, not {limit}.",
                title="Benchmark",
            )
        if not isinstance(repeats, int) or not 1 <= repeats <= BENCH_MAX_REPEATS:
            raise refusal(
                f"Repeats must be 1 to {BENCH_MAX_REPEATS}, not {repeats}.", title="Benchmark"
            )
        return registry[pair], limit, repeats

    def run_benchmark(
        self,
        pair: str,
        categories: list[str],
        prompts_per_category: int,
        max_new_tokens: int,
        repeats: int,
        drafters: list[str],
        assistant_quants: list[str],
        request: gr.Request,
        sampling_check: float = 0,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (Gradio's injection idiom)
    ) -> Iterator[BenchmarkOutputs]:
        """Time the chosen examples plain and with each drafter (an assistant model once in
        each chosen precision); stream progress. With `sampling_check` samples per set (0:
        none), the sampling check follows (`assisted.bench.sampling_check`).

        The last yield carries the tables, the chart and the report (the JSON that
        `python -m assisted.bench` prints)."""
        spec, limit, repeats = self._checked(
            pair, categories, drafters, prompts_per_category, repeats
        )
        try:
            settings = RunSettings(max_new_tokens=int_if_whole(max_new_tokens)).validate()
            chosen = bench.select_examples(self.shared.examples, categories, limit)
            sweep = {"assistant_quant": bench.quant_sweep(drafters, assistant_quants)}
            variants = bench.plan_variants(spec, drafters, sweep)
            samples = int_if_whole(sampling_check)
            check = CheckSettings(samples=samples).validate() if samples else None
        except (SettingsError, bench.BenchError) as error:
            raise refusal(str(error), title="Benchmark") from error
        pace = self.shared.paces.of(spec.target)
        gr.Warning(
            bench_warning(len(chosen), len(variants), repeats, settings.max_new_tokens, pace),
            title="Benchmark started",
        )
        access = self.shared.pairs
        for variant in variants:  # before a GPU is asked for
            access.check_for_device(spec, variant.draft)
        yield _no_report(f"**Loading** `{spec.name}`…")
        with gpu_turn(self.shared, spec, True, stop_key(request, NAME)) as turn:
            if not (yield from turn.waited(progress, _no_report, "no report")):
                return
            examples, planned = tuple(chosen), tuple(variants)
            whole = BenchmarkRequest(
                turn.place, examples, planned, settings, repeats, turn.stop, check=check
            )
            yield from self._timed(turn, whole)

    def _timed(self, turn: GpuTurn, whole: BenchmarkRequest) -> Iterator[BenchmarkOutputs]:
        """The timed runs, in one GPU call, or on ZeroGPU in as many as its limit needs,
        each starting from the acceptance the one before it left; then the report. The
        sampling check, if any, runs in the last call; its samples count as runs."""
        access = self.shared.pairs
        calls = [whole]
        if access.config.zerogpu:
            preloaded = whole.pair.spec.name in access.preloaded
            calls = split(whole, self.shared.gpu_times, preloaded)
        settings, repeats, variants = whole.settings, whole.repeats, list(whole.variants)
        timed = len(whole.examples) * repeats * (1 + len(variants))
        total = timed + (whole.check.draws() if whole.check else 0)
        start = time.perf_counter()
        done, runs, finished = 0, [], None
        for number, call in enumerate(calls, 1):
            acceptance = finished.acceptance if finished else None
            call = dataclasses.replace(call, acceptance=acceptance)

            def status(line: str, number: int = number) -> BenchmarkOutputs:
                return updating_only(
                    BenchmarkOutputs, status=f"Call {number} of {len(calls)}. {line}"
                )

            items = turn.call(self.stream, call, BenchmarkOutputs, status)
            done, finished = yield from self._followed(items, whole.pair.spec, done, total, start)
            if finished is None:
                break
            runs += finished.runs
        if finished is None:
            if turn.stopped:
                yield _no_report(f"**Stopped** after {done} of {total} timed runs: no report.")
            else:
                yield _no_report("The benchmark ended without a report.")
            return
        report = finished.report
        if len(calls) > 1:  # one report of every call's runs
            info = {name: report[name] for name in ("pair", "device", "dtype")}
            checked = report.get("sampling_check")
            report = bench.report(runs, variants, info, settings, repeats)
            if checked is not None:
                report["sampling_check"] = checked
        yield _finished(report, timed, time.perf_counter() - start)

    def _followed(
        self, items: Iterator, spec: PairSpec, before: int, total: int, start: float
    ) -> Generator[BenchmarkOutputs, None, tuple[int, bench.Finished | None]]:
        """One GPU call's yields (`GpuTurn.call`) as status lines, after `before` of
        `total` runs done; returns the runs done and the call's Finished (None: it ended
        without one)."""
        done, finished = before, None
        for item in items:
            if isinstance(item, BenchmarkOutputs):  # a status line (`GpuTurn.call`)
                yield item
            elif isinstance(item, bench.Finished):
                finished = item
            else:
                done = before + item.done
                if item.record is not None:  # the pair's pace, for the next estimate
                    self.shared.paces.note_plain_run(spec.target, spec.name, item.record)
                elapsed = time.perf_counter() - start
                status = bench_progress_markdown(done, total, item.label, elapsed)
                yield updating_only(BenchmarkOutputs, status=status)
        return done, finished

    def drafters_for(self, pair: str) -> tuple[dict, dict]:
        """The pair's own drafter, and prompt lookup beside an assistant model; the
        precisions where the pair has an assistant model."""
        spec = self.shared.pairs.config.registry.get(pair)
        if spec is None:
            return gr.update(choices=[], value=[]), gr.update(visible=False)
        lookup = DrafterKind.PROMPT_LOOKUP
        choices = [spec.drafter.value] + ([lookup.value] if spec.drafter is not lookup else [])
        quants = gr.update(visible=spec.drafter.has_model, value=[spec.draft.assistant_quant])
        return gr.update(choices=choices, value=[spec.drafter.value]), quants

    def plan(
        self,
        pair: str,
        chosen: list[str],
        prompts: float,
        max_new_tokens: float,
        repeats: float,
        drafters: list,
        quants: list,
    ) -> str:
        """What the chosen benchmark runs, and about how long it takes at the pair's
        measured pace."""
        try:
            limit = max(1, int(prompts))
            count = len(bench.select_examples(self.shared.examples, chosen, limit)) if chosen else 0
            variants = sum(
                len(quants or []) if DrafterKind(d).has_model else 1 for d in drafters or []
            )
            spec = self.shared.pairs.config.registry.get(pair)
            pace = self.shared.paces.of(spec.target) if spec else None
            return bench_plan_markdown(count, variants, int(repeats), int(max_new_tokens), pace)
        except (TypeError, ValueError):  # a field being typed into
            return gr.skip()


def build_benchmark_tab(
    demo: gr.Blocks, tab: gr.Tab, shared: TabState, stream: StreamBenchmark
) -> None:
    """The tab's components and events, inside the caller's `tab` (`tabs.BuildTab`).
    Opening the tab updates the time estimate, from the plain runs measured since (a
    comparison's or a benchmark's)."""
    handlers = BenchmarkHandlers(shared, stream)
    config = shared.pairs.config
    categories = list(dict.fromkeys(example.category for example in shared.examples))
    spec = config.registry[config.default_pair]
    gr.Markdown(NOTE + device_note(shared.pairs.device_type(), config.zerogpu))
    with gr.Row(equal_height=False):
        with gr.Column():
            default_drafters = handlers.drafters_for(config.default_pair)[0]["choices"]
            pair, chosen, drafters, quants = pair_choices(config, default_drafters, categories)
        with gr.Column():
            prompts, max_new_tokens, repeats = size_sliders()
            check = check_samples()
    plan_inputs = [pair, chosen, prompts, max_new_tokens, repeats, drafters, quants]
    first_plan = handlers.plan(
        spec.name,
        categories,
        1,
        BENCH_MAX_NEW_TOKENS,
        1,
        [spec.drafter],
        [spec.draft.assistant_quant],
    )
    plan = gr.Markdown(first_plan, elem_id="bench-plan")
    with gr.Row():
        run = gr.Button("Run benchmark", variant="primary", elem_id="bench-run")
        stop = gr.Button("Stop", variant="stop", elem_id="bench-stop")
    outputs = output_components()
    # The estimate refreshes without a queue or a spinner: it reads no model.
    refresh_plan = {
        "inputs": plan_inputs,
        "outputs": plan,
        "api_visibility": "private",
        "queue": False,
        "show_progress": "hidden",
    }
    # The sampling check last: API users who leave it out get today's benchmark.
    inputs = [pair, chosen, prompts, max_new_tokens, repeats, drafters, quants, check]
    benchmark = on_device(
        run.click, handlers.run_benchmark, inputs, BenchmarkOutputs, outputs, "benchmark"
    )
    benchmark.then(handlers.plan, **refresh_plan)  # at the pace its plain runs measured
    on_stop(stop, handlers.request_stop)
    pair.change(
        handlers.drafters_for,
        inputs=pair,
        outputs=[drafters, quants],
        api_visibility="private",
        queue=False,
    )
    gr.on(
        [tab.select] + [component.change for component in plan_inputs],
        handlers.plan,
        **refresh_plan,
    )


# What `app.py`'s registry finds (`assisted.ui.tabs.registry`).
TAB = Tab("Benchmark", NAME, build_benchmark_tab, stream_benchmark)
