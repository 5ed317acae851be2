"""Plain and assisted decoding of one prompt, side by side, streamed live (Gradio app); a
Benchmark tab times the examples set by category (`assisted.bench`).

`python app.py` loads the embedded pair and serves the app (GRADIO_SERVER_NAME, default
127.0.0.1; GRADIO_SERVER_PORT). This file is the UI only: `assisted/` loads pairs, decodes
and computes every figure; `assisted.ui.format` turns them into HTML, text and chart rows.

Environment:
- ASSISTED_DEVICE, ASSISTED_DTYPE: where and in what precision pairs load (default "auto").
- ASSISTED_ALLOW_LOCAL=1: accept local model folders as custom ids. Off by default, so a
  public Space never loads files from its own disk on a visitor's request.
- ASSISTED_ALLOW_CUSTOM=0: offer no custom pairs (the inputs are hidden, the API refuses them).
- ASSISTED_PAIRS: the registry pairs to offer, as a comma list (default: all of them).
- SPACE_ID (set by Hugging Face Spaces): load the default pair at import, as ZeroGPU wants.
"""

import spaces  # first: on ZeroGPU it must patch CUDA before anything touches it

# isort: split
import itertools
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import gradio as gr
import pandas as pd

from assisted import bench, decoding, pairs, stats
from assisted.device_queue import DeviceQueue, Turn
from assisted.examples import Example, load_folder
from assisted.pairs import PairError, PairSpec
from assisted.record import RunRecord, Step
from assisted.settings import (
    ASSISTANT_MODEL_DRAFTERS,
    ASSISTANT_QUANTS,
    MAX_DRAFT_TOKENS,
    MAX_NEW_TOKENS_CAP,
    DraftSettings,
    RunSettings,
    SettingsError,
    validate_prompt,
)
from assisted.ui.format import (
    CATEGORY_HEADERS,
    LEGEND_HTML,
    PROMPT_HEADERS,
    Chunk,
    StepSplitter,
    bench_category_rows,
    bench_overall_markdown,
    bench_plan_markdown,
    bench_progress_markdown,
    bench_prompt_rows,
    bench_warning,
    chunks_from_dicts,
    histogram_rows,
    race_timeline,
    run_html,
    stat_card_html,
    summary_markdown,
    timeline_rows,
)

CUSTOM = "custom"  # the dropdown's choice for user-supplied target/assistant ids
MODES = ("plain", "assisted")
DEFAULT_MAX_NEW_TOKENS = 64
QUEUE_MAX_SIZE = 16  # requests waiting for the device; more are turned away
# Requests past Gradio's queue at once. Each fetches its pair's files, then waits for its
# turn on the device (`_device`), so a download holds up no one whose pair is in memory.
VISITORS_AT_ONCE = 8
YIELD_EVERY_S = 0.08  # stream at most this often while steps arrive (phases always stream)
REPLAY_FRAME_S = 0.05
GPU_MAX_S = 240  # ZeroGPU budget for one comparison
BENCH_GPU_MAX_S = 600  # ZeroGPU budget for one benchmark
BENCH_MAX_NEW_TOKENS = 64  # default: a CPU takes about a minute per plain run of 128 tokens
BENCH_MAX_PROMPTS = 2  # prompts per category (examples/ has two)
BENCH_MAX_REPEATS = 3


@dataclass(frozen=True)
class AppConfig:
    """What one app instance serves. Registry pairs are trusted (the operator chose them);
    custom ids come from visitors and may name local folders only with `allow_local`."""

    registry: dict[str, PairSpec] = field(default_factory=lambda: dict(pairs.PAIRS))
    default_pair: str = pairs.DEFAULT_PAIR
    device: str = "auto"
    dtype: str = "auto"
    allow_local: bool = False
    allow_custom: bool = True

    @classmethod
    def from_env(cls) -> "AppConfig":
        registry = offered_pairs(os.environ.get("ASSISTED_PAIRS", ""))
        default = pairs.DEFAULT_PAIR if pairs.DEFAULT_PAIR in registry else next(iter(registry))
        return cls(
            registry=registry,
            default_pair=default,
            device=os.environ.get("ASSISTED_DEVICE", "auto"),
            dtype=os.environ.get("ASSISTED_DTYPE", "auto"),
            allow_local=os.environ.get("ASSISTED_ALLOW_LOCAL", "") == "1",
            allow_custom=os.environ.get("ASSISTED_ALLOW_CUSTOM", "1") != "0",
        )


def offered_pairs(names: str) -> dict[str, PairSpec]:
    """The registry pairs named in a comma list (ASSISTED_PAIRS), in its order; empty: all."""
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in pairs.PAIRS]
    if unknown:
        raise ValueError(
            f"ASSISTED_PAIRS names unknown pairs: {', '.join(unknown)}; "
            f"known pairs: {', '.join(pairs.PAIRS)}"
        )
    return {name: pairs.PAIRS[name] for name in chosen} if chosen else dict(pairs.PAIRS)


# Stop requests, by session: the Stop button sets the event of its session's running
# comparison, and the backend ends the run within one step.
_stops: dict[str, threading.Event] = {}
# One request at a time uses the device, in order of arrival: timed runs, and loading pairs
# into memory, which would slow a timed run down. Requests join only once their files are
# fetched.
_device = DeviceQueue()

EXPLANATION = """
**Assisted generation** (speculative decoding) pairs the large *target* model with a small
*assistant*. Each step, the assistant drafts a few tokens (γ) one by one; the target then
checks all of them in **one** forward pass, keeps the longest prefix it agrees with
(*accepted*) and adds one token of its own. With greedy decoding the output is exactly the
target's own output; with sampling it follows the target's distribution.

**Why it helps.** Generating one token with a large model is limited by memory bandwidth:
every step streams all the weights through the processor to do little arithmetic. Checking
γ + 1 positions at once costs about the same as one step, so each accepted token is nearly
free, and the small assistant drafts cheaply.

**When it does not.** When the assistant guesses badly (low acceptance rate: open chat,
creative text), the drafting time is wasted. On CPUs, verification of several positions is
*not* free: compute, not bandwidth, dominates, so long drafts cost real time. Prompts whose
answers copy from the input (editing given code, summarising or answering from a passage)
accept the most. The stat cards and the predicted speedup (Leviathan et al. 2023) show
which case a run is in.

**Quantize the assistant, not the target.** The target checks every drafted token, so an
int8 assistant can only change how many drafts are accepted and how fast they come, never
the output: it stays the target's own. Quantizing the target would change the answer
itself, because its rounding decides which token wins; on a CPU an int8 assistant drafts
about twice as fast as a bf16 one, and the cost ratio c shows it.
"""
BENCH_NOTE = """
Times the example prompts, category by category: each prompt runs plain and with each chosen
drafter, and the **speedup** is assisted tokens/s ÷ plain tokens/s (greedy decoding). Runs
are **sequential** on one device, after a short untimed warm-up per prompt, and they
**alternate** which goes first (plain then the drafters, next time the reverse), so a slow
drift of the machine falls on both sides alike. On this 2-core CPU the full set takes many
minutes: start with one category. The device is busy for Compare until the benchmark ends.
"""

CSS = """
.run-text { white-space: pre-wrap; word-break: break-word; font-family: var(--font-mono);
  font-size: 0.9rem; line-height: 1.7; min-height: 12rem; max-height: 28rem; overflow-y: auto;
  padding: 0.6rem 0.8rem; border: 1px solid var(--border-color-primary);
  border-radius: var(--radius-md); background: var(--background-fill-secondary); }
.run-text.empty { color: var(--body-text-color-subdued); font-family: var(--font); }
.run-text .step { border-radius: 3px; box-shadow: inset 0 0 0 1px rgba(16, 122, 87, 0.35);
  margin-right: 1px; }
.run-text .acc, .legend .acc { background: rgba(16, 185, 129, 0.30); }
.run-text .own, .legend .own { background: rgba(99, 102, 241, 0.16); }
.legend { font-size: 0.8rem; color: var(--body-text-color-subdued); margin: 0.2rem 0 0.4rem;
  min-height: 2.6em; }
.legend .tok { padding: 0 0.3rem; border-radius: 3px; color: var(--body-text-color); }
.cursor { animation: blink 1s steps(1) infinite; color: var(--color-accent); }
@keyframes blink { 50% { opacity: 0; } }
.badge { display: inline-block; font-size: 0.7rem; font-family: var(--font); font-weight: 600;
  padding: 0.05rem 0.45rem; border-radius: 999px; margin-left: 0.4rem;
  background: var(--neutral-200); color: var(--neutral-800); }
.badge.stopped { background: #fde68a; color: #78350f; }
.badge.running { background: #c7d2fe; color: #312e81; }
.badge.done { background: #bbf7d0; color: #14532d; }
.stat-card { position: relative; padding: 0.2rem 0; }
.stat-card .badge { position: absolute; right: 0; top: -1.6rem; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(7.5rem, 1fr));
  gap: 0.4rem; }
.stat { border: 1px solid var(--border-color-primary); border-radius: var(--radius-md);
  padding: 0.35rem 0.55rem; background: var(--background-fill-primary); }
.stat .value { font-size: 1.05rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.stat .label { font-size: 0.72rem; color: var(--body-text-color-subdued); }
.stat-empty { color: var(--body-text-color-subdued); font-size: 0.85rem; }
"""


# -- the streamed comparison (the GPU work) ------------------------------------------------


class _Live:
    """Chunks and records of one comparison as it streams, rendered to every output."""

    def __init__(
        self,
        pair: pairs.LoadedPair,
        prompt_tokens: int,
        settings: RunSettings,
        stop: threading.Event,
    ):
        decode = lambda ids: pair.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
        self.pair = pair
        self.prompt_tokens = prompt_tokens
        self.settings = settings
        self.stop = stop
        self.splitters = {mode: StepSplitter(decode) for mode in MODES}
        self.chunks: dict[str, list[Chunk]] = {mode: [] for mode in MODES}
        self.steps: dict[str, list[Step]] = {mode: [] for mode in MODES}
        self.records: dict[str, RunRecord] = {}
        self.phase = "warmup"

    def add(self, event: decoding.Event) -> None:
        if isinstance(event, decoding.Phase):
            self.phase = event.name
        elif isinstance(event, decoding.StepEvent):
            self.steps[event.mode].append(event.step)
            self.chunks[event.mode].append(self.splitters[event.mode].add(event.step))
        elif isinstance(event, decoding.RunDone):
            record = event.record
            self.records[record.mode] = record
            # The record's final steps may carry text held back for a split character.
            splitter = StepSplitter(self.splitters[record.mode].decode)
            self.chunks[record.mode] = [splitter.add(step) for step in record.steps]

    def record(self, mode: str) -> RunRecord | None:
        """The finished record, or a snapshot of the run so far (timed to its last step)."""
        if mode in self.records:
            return self.records[mode]
        steps = self.steps[mode]
        if not steps:
            return None
        drafter = self.pair.spec.drafter if mode == "assisted" else None
        return RunRecord(mode, drafter, self.prompt_tokens, list(steps), total_s=steps[-1].t_s)

    @property
    def stopped(self) -> bool:
        """Whether Stop cut the comparison short (the run it ended is marked in its record)."""
        cut = self.stop.is_set() and len(self.records) < len(MODES)
        return cut or any(record.stopped for record in self.records.values())

    def frame(self, done: bool = False) -> tuple:
        runs = {mode: self.record(mode) for mode in MODES}
        result = stats.report(
            self.pair.spec.name,
            str(self.pair.device),
            self.pair.dtype_name,
            runs["plain"],
            runs["assisted"],
        )
        return (
            self._status(done),
            self._text("plain", done),
            self._text("assisted", done),
            self._card("plain", result, done),
            self._card("assisted", result, done),
            self._summary(result, done),
            _timeline_frame(self.chunks),
            _histogram_frame(stats.accept_histogram(runs["assisted"]) if runs["assisted"] else []),
            result,
            self._race() if done else None,
        )

    def _status(self, done: bool) -> str:
        where = f"{self.pair.device} · {self.pair.dtype_name}"
        if done and self.stopped and not self.records:
            return "**Stopped** before the timed runs started."
        if done and self.stopped:
            return f"**Stopped** during the {self.phase} run; what was produced is kept ({where})."
        if done:
            return (
                f"**Done** on {where}. Plain ran first, then assisted, one after the other, "
                "so each was timed alone. **Replay race** shows both at their recorded pace."
            )
        return {
            "warmup": "**Warming up** (one short untimed run per mode, once per pair)… "
            "Then plain decoding runs first and assisted second, one after the other on one "
            "device, so each is timed alone.",
            "plain": "**Running plain decoding** (1 of 2). Assisted generation runs next, "
            "on its own, so the timings stay honest.",
            "assisted": "**Running assisted generation** (2 of 2). Plain decoding has finished.",
        }.get(self.phase, "")

    def _text(self, mode: str, done: bool) -> str:
        record = self.records.get(mode)
        waiting = {
            "plain": "Plain decoding runs first…",
            "assisted": "Assisted generation runs after plain decoding…",
        }[mode]
        if done and not self.chunks[mode]:
            waiting = "Not run: the comparison was stopped." if self.stopped else "No tokens."
        return run_html(
            self.chunks[mode],
            mode,
            running=self.phase == mode and record is None and not done,
            stopped=bool(record and record.stopped),
            placeholder=waiting,
        )

    def _card(self, mode: str, result: dict, done: bool) -> str:
        summary = result[mode]
        record = self.records.get(mode)
        if record is not None:
            return stat_card_html(summary, state="stopped" if record.stopped else "done")
        if summary is not None or (self.phase == mode and not done):
            return stat_card_html(summary, state="running", empty="waiting for the first step…")
        return stat_card_html(None, empty="not run" if done else "runs after plain decoding")

    def _summary(self, result: dict, done: bool) -> str:
        if done:
            return summary_markdown(result, sample=self.settings.sample)
        return "The comparison appears here once both runs have finished."

    def _race(self) -> dict:
        return {
            mode: {
                "chunks": [chunk.to_dict() for chunk in self.chunks[mode]],
                "stopped": bool(self.records.get(mode) and self.records[mode].stopped),
            }
            for mode in MODES
        }


def _timeline_frame(chunks: dict[str, list[Chunk]]) -> pd.DataFrame:
    # Typed columns even when empty: the chart fixes its axis types from the first value.
    frame = pd.DataFrame(timeline_rows(chunks), columns=["run", "t_s", "tokens"])
    return frame.astype({"run": str, "t_s": float, "tokens": int})


def _histogram_frame(histogram: list[int]) -> pd.DataFrame:
    frame = pd.DataFrame(histogram_rows(histogram), columns=["accepted", "steps"])
    return frame.astype({"accepted": str, "steps": int})


def _idle_frame(status: str) -> tuple:
    """Every output's value before the runs start (files fetched, or waiting for the device)."""
    return (
        status,
        run_html([], "plain", placeholder="Plain decoding runs first…"),
        run_html([], "assisted", placeholder="Assisted generation runs after plain decoding…"),
        stat_card_html(None, empty="runs once the device is free"),
        stat_card_html(None, empty="runs after plain decoding"),
        "The comparison appears here once both runs have finished.",
        _timeline_frame({mode: [] for mode in MODES}),
        _histogram_frame([]),
        None,
        None,
    )


def _waiting_status(ahead: int) -> str:
    requests = "request" if ahead == 1 else "requests"
    return (
        f"**Waiting for the device:** {ahead} {requests} ahead of yours. Runs take turns, "
        "so each is timed alone."
    )


def _gpu_duration(spec, device, dtype, allow_local, prompt, settings, draft, stop_key) -> int:
    # Warm-up plus two runs; a generous per-token allowance for a shared GPU.
    return min(GPU_MAX_S, 30 + int(0.25 * 2 * settings.max_new_tokens))


@spaces.GPU(duration=_gpu_duration)
def stream_comparison(
    spec: PairSpec,
    device: str,
    dtype: str,
    allow_local: bool,
    prompt: str,
    settings: RunSettings,
    draft: DraftSettings,
    stop_key: str,
) -> Iterator[tuple]:
    """Plain then assisted, yielding every output's value (picklable) as steps arrive."""
    pair = pairs.load_pair(spec, device, dtype, allow_local=allow_local)  # cached: loaded
    stop = _stops.setdefault(stop_key, threading.Event())
    try:
        prompt_ids = decoding.encode_prompt(pair, prompt, settings.chat_template)
        live = _Live(pair, len(prompt_ids), settings, stop)
        last_yield = 0.0
        for event in decoding.compare(pair, prompt, settings, draft, stop=stop):
            live.add(event)
            now = time.perf_counter()
            if not isinstance(event, decoding.StepEvent) or now - last_yield >= YIELD_EVERY_S:
                last_yield = now
                yield live.frame()
    except SettingsError as error:
        raise gr.Error(str(error), title="Settings") from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"Generation failed: {type(error).__name__}: {error}") from error
    yield live.frame(done=True)


def _bench_gpu_duration(
    spec, device, dtype, allow_local, examples, variants, settings, repeats, stop_key
) -> int:
    # The same per-token allowance as a comparison, for every timed run.
    runs = len(examples) * repeats * (1 + len(variants))
    return min(BENCH_GPU_MAX_S, 30 + int(0.25 * runs * settings.max_new_tokens))


@spaces.GPU(duration=_bench_gpu_duration)
def stream_benchmark(
    spec: PairSpec,
    device: str,
    dtype: str,
    allow_local: bool,
    examples: list[Example],
    variants: list[bench.Variant],
    settings: RunSettings,
    repeats: int,
    stop_key: str,
) -> Iterator[bench.Progress | dict]:
    """`assisted.bench.benchmark` on the loaded pair: its Progress events, then the report.

    Stop ends the run in progress within one step, and the benchmark without a report."""
    pair = pairs.load_pair(spec, device, dtype, allow_local=allow_local)  # cached: loaded
    stop = _stops.setdefault(stop_key, threading.Event())
    events = bench.benchmark(pair, examples, variants, settings, repeats, stop=stop)
    try:
        for event in events:
            if isinstance(event, bench.Finished):
                yield event.report
                return
            yield event
    except (bench.BenchError, SettingsError) as error:
        raise gr.Error(str(error), title="Benchmark") from error
    except Exception as error:  # a failure inside generation: say so, never hang
        raise gr.Error(f"Benchmark failed: {type(error).__name__}: {error}") from error
    finally:
        events.close()


# -- the app -------------------------------------------------------------------------------


def _whole(value):
    """Sliders and the client send floats; whole ones become ints, others fail validation."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _quant_sweep(drafters: list[str], quants: list[str] | None) -> list[str]:
    """The assistant precisions to compare: none chosen means the pair's own; drafters
    without a model of their own take none."""
    if not any(d in ASSISTANT_MODEL_DRAFTERS for d in drafters):
        return []
    return list(dict.fromkeys(quants or []))


def _draft_length_default(spec: PairSpec | None) -> int:
    draft = spec.draft if spec else DraftSettings()
    if spec and spec.drafter == "prompt-lookup":
        return draft.prompt_lookup_num_tokens
    return draft.num_assistant_tokens


def _pair_status(pair: pairs.LoadedPair) -> str:
    note = f" — {pair.spec.note}" if pair.spec.note else ""
    return (
        f"**Ready:** `{pair.spec.name}`{note} · {pair.device} · {pair.dtype_name}. "
        f"In memory: {', '.join(pairs.loaded_pairs())} (at most {pairs.MAX_LOADED_PAIRS})."
    )


def build_demo(config: AppConfig | None = None) -> gr.Blocks:
    """The app's Blocks. Nothing loads until a page opens or a request arrives."""
    config = config or AppConfig.from_env()
    registry = config.registry
    if config.default_pair not in registry:
        raise ValueError(f"default pair {config.default_pair!r} is not in the registry")
    default_spec = registry[config.default_pair]
    examples = load_folder()

    def spec_for(pair: str, custom_target: str, custom_assistant: str) -> tuple[PairSpec, bool]:
        """The spec to load and whether local folders are allowed for it."""
        if pair == CUSTOM and not config.allow_custom:  # the page's Load pair button, hidden
            raise gr.Error(
                "Custom pairs are turned off on this server (ASSISTED_ALLOW_CUSTOM=0).",
                title="Pair",
            )
        if pair == CUSTOM:
            if not (custom_target or "").strip():
                raise gr.Error("Enter a target model id for the custom pair.", title="Pair")
            try:
                spec = pairs.custom_pair(
                    custom_target.strip(), (custom_assistant or "").strip() or None
                )
            except PairError as error:
                raise gr.Error(str(error), title="Pair") from error
            return spec, config.allow_local
        if pair not in registry:
            known = ", ".join([*registry, CUSTOM])
            raise gr.Error(f"Unknown pair {pair!r}; choose one of {known}.", title="Pair")
        return registry[pair], True

    def load(spec: PairSpec, allow_local: bool, progress: gr.Progress) -> pairs.LoadedPair:
        def report(message: str, fraction: float | None) -> None:
            progress(fraction, desc=message)

        try:
            return pairs.load_pair(
                spec, config.device, config.dtype, progress=report, allow_local=allow_local
            )
        except Exception as error:  # the previously loaded pairs stay loaded
            raise not_loaded(spec, error) from error

    def not_loaded(spec: PairSpec, error: Exception) -> gr.Error:
        return gr.Error(
            f"Could not load {spec.name}: {error}. The pairs already in memory "
            f"({', '.join(pairs.loaded_pairs()) or 'none'}) are still usable.",
            title="Pair not loaded",
        )

    def fetch_status(spec: PairSpec, allow_local: bool) -> Iterator[str]:
        """Status lines while the pair's files are fetched (nothing if they are here)."""
        try:
            for message, fraction in pairs.fetching(spec, allow_local):
                done = f" ({fraction:.0%})" if fraction is not None else ""
                yield (
                    f"**{message}**{done}. Comparisons on the pairs in memory go on "
                    "meanwhile; yours runs once the files are here."
                )
        except Exception as error:
            raise not_loaded(spec, error) from error

    def until_ready(
        spec: PairSpec, allow_local: bool, turn: Turn, stop: threading.Event
    ) -> Iterator[str]:
        """Status lines while the pair's files are fetched, then while the request waits for
        its turn on the device; ends early when Stop is pressed. The download comes first,
        outside the line, so it holds up no one comparing on a pair in memory."""
        waiting = map(_waiting_status, turn.waiting())  # joins the line once fetched
        for status in itertools.chain(fetch_status(spec, allow_local), waiting):
            if stop.is_set():
                return
            yield status

    def compare(
        prompt: str,
        pair: str,
        custom_target: str,
        custom_assistant: str,
        max_new_tokens: int,
        decoding_mode: str,
        temperature: float,
        top_p: float,
        seed: int,
        draft_length: int,
        schedule: str,
        confidence_threshold: float,
        chat_template: bool,
        assistant_quant: str,
        request: gr.Request,
        event: gr.EventData,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (Gradio's injection idiom)
    ) -> Iterator[tuple]:
        """Run plain decoding, then assisted generation, on one prompt; stream both.

        Every yield carries all outputs; the last one carries the JSON result (the schema
        of the CLI's --json)."""
        if not (prompt or "").strip():
            if event.target is None:  # an API call, not a click: an error, like any bad input
                raise gr.Error(
                    "the prompt is empty: type something to generate from", title="Settings"
                )
            gr.Warning("Type a prompt first: nothing was run.", title="Empty prompt")
            yield ("Nothing ran: the prompt is empty.", *[gr.skip()] * (len(outputs) - 1))
            return
        try:
            validate_prompt(prompt)
            settings = RunSettings(
                max_new_tokens=_whole(max_new_tokens),
                sample=decoding_mode == "sampling",
                temperature=float(temperature),
                top_p=float(top_p),
                seed=_whole(seed),
                chat_template=bool(chat_template),
            ).validate()
        except SettingsError as error:
            raise gr.Error(str(error), title="Settings") from error
        spec, allow_local = spec_for(pair, custom_target, custom_assistant)
        length = _whole(draft_length)
        try:
            draft = DraftSettings(
                num_assistant_tokens=(
                    spec.draft.num_assistant_tokens if spec.drafter == "prompt-lookup" else length
                ),
                schedule=schedule,
                confidence_threshold=float(confidence_threshold),
                prompt_lookup_num_tokens=(
                    length
                    if spec.drafter == "prompt-lookup"
                    else spec.draft.prompt_lookup_num_tokens
                ),
                max_matching_ngram_size=spec.draft.max_matching_ngram_size,
                assistant_quant=assistant_quant,
            ).validate_for(spec.drafter)
        except SettingsError as error:
            raise gr.Error(str(error), title="Settings") from error
        stop_key = request.session_hash or str(id(request))
        stop = _stops[stop_key] = threading.Event()
        turn = _device.turn()
        try:
            for status in until_ready(spec, allow_local, turn, stop):
                yield _idle_frame(status)
            if stop.is_set():
                yield _idle_frame("**Stopped** before the timed runs started.")
                return
            load(spec, allow_local, progress)
            yield from stream_comparison(
                spec, config.device, config.dtype, allow_local, prompt, settings, draft, stop_key
            )
        finally:
            turn.leave()
            if _stops.get(stop_key) is stop:
                del _stops[stop_key]

    def request_stop(request: gr.Request) -> None:
        event = _stops.get(request.session_hash or "")
        if event is not None:
            event.set()

    def replay(race: dict | None) -> Iterator[tuple]:
        if not race:
            gr.Warning("Run a comparison first: the race replays a finished one.")
            yield gr.skip(), gr.skip(), gr.skip()
            return
        runs = {mode: chunks_from_dicts(race[mode]["chunks"]) for mode in MODES}
        timeline = race_timeline(runs)
        shown = dict.fromkeys(MODES, 0)
        start = time.perf_counter()
        position = 0

        def frame(finished: bool) -> tuple:
            counts = ", ".join(f"{mode} {shown[mode]}/{len(runs[mode])} steps" for mode in MODES)
            status = (
                "**Race replayed** at the recorded pace: both runs started together."
                if finished
                else f"**Replaying** both runs at their recorded pace: {counts}."
            )
            return (
                status,
                *(
                    run_html(
                        runs[mode][: shown[mode]],
                        mode,
                        running=not finished and shown[mode] < len(runs[mode]),
                        stopped=finished and race[mode]["stopped"],
                        placeholder="Not run.",
                    )
                    for mode in MODES
                ),
            )

        yield frame(False)
        while position < len(timeline):
            elapsed = time.perf_counter() - start
            while position < len(timeline) and timeline[position][0] <= elapsed:
                _, mode, count = timeline[position]
                shown[mode] = count
                position += 1
            yield frame(False)
            time.sleep(REPLAY_FRAME_S)
        yield frame(True)

    def on_pair_change(pair: str):
        spec = registry.get(pair)
        draft = spec.draft if spec else DraftSettings()
        return (
            gr.update(visible=pair == CUSTOM),
            _draft_length_default(spec),
            draft.schedule,
            draft.confidence_threshold,
            draft.assistant_quant,
        )

    def load_chosen(pair: str, progress: gr.Progress = gr.Progress()) -> Iterator[str]:  # noqa: B008
        if pair == CUSTOM:
            yield (
                "Enter a target id and an assistant id (or leave the assistant empty for "
                "prompt lookup), then press **Load pair**."
            )
            return
        spec, allow_local = spec_for(pair, "", "")
        yield from load_into_memory(spec, allow_local, progress)

    def load_custom(
        target: str,
        assistant: str,
        progress: gr.Progress = gr.Progress(),  # noqa: B008
    ) -> Iterator[str]:
        spec, allow_local = spec_for(CUSTOM, target, assistant)
        yield from load_into_memory(spec, allow_local, progress)

    def load_into_memory(spec: PairSpec, allow_local: bool, progress: gr.Progress) -> Iterator[str]:
        """The pair's status lines: fetched, then loaded on the device's turn (the turn is
        skipped for a pair already in memory)."""
        turn = _device.turn()
        try:
            yield from fetch_status(spec, allow_local)
            pair = pairs.loaded(spec, config.device, config.dtype)
            if pair is None:
                yield from map(_waiting_status, turn.waiting())
                pair = load(spec, allow_local, progress)
            yield _pair_status(pair)
        finally:
            turn.leave()

    def toggle_sampling(mode: str):
        return gr.update(visible=mode == "sampling")

    example_categories = list(dict.fromkeys(example.category for example in examples))

    def run_benchmark(
        pair: str,
        categories: list[str],
        prompts_per_category: int,
        max_new_tokens: int,
        repeats: int,
        drafters: list[str],
        assistant_quants: list[str],
        request: gr.Request,
        progress: gr.Progress = gr.Progress(),  # noqa: B008 (Gradio's injection idiom)
    ) -> Iterator[tuple]:
        """Time the chosen examples plain and with each drafter (an assistant model once in
        each chosen precision); stream progress.

        The last yield carries the tables, the chart and the report (the JSON that
        `python -m assisted.bench` prints)."""
        if pair not in registry:
            known = ", ".join(registry)
            raise gr.Error(f"Unknown pair {pair!r}; choose one of {known}.", title="Pair")
        spec = registry[pair]
        if not categories:
            raise gr.Error("Choose at least one category: nothing was run.", title="Benchmark")
        if not drafters:
            raise gr.Error("Choose at least one drafter: nothing was run.", title="Benchmark")
        limit, repeats = _whole(prompts_per_category), _whole(repeats)
        if not isinstance(limit, int) or not 1 <= limit <= BENCH_MAX_PROMPTS:
            raise gr.Error(
                f"Prompts per category must be 1 to {BENCH_MAX_PROMPTS}, not {limit}.",
                title="Benchmark",
            )
        if not isinstance(repeats, int) or not 1 <= repeats <= BENCH_MAX_REPEATS:
            raise gr.Error(
                f"Repeats must be 1 to {BENCH_MAX_REPEATS}, not {repeats}.", title="Benchmark"
            )
        try:
            settings = RunSettings(max_new_tokens=_whole(max_new_tokens)).validate()
            chosen = bench.select_examples(examples, categories, limit)
            variants = bench.plan_variants(
                spec, drafters, {"assistant_quant": _quant_sweep(drafters, assistant_quants)}
            )
        except (SettingsError, bench.BenchError) as error:
            raise gr.Error(str(error), title="Benchmark") from error
        gr.Warning(
            bench_warning(len(chosen), len(variants), repeats, settings.max_new_tokens),
            title="Benchmark started",
        )
        empty = (
            pd.DataFrame(columns=CATEGORY_HEADERS),
            pd.DataFrame(columns=PROMPT_HEADERS),
            "The overall speedup appears here once every run has finished.",
            None,
            None,
        )
        yield (f"**Loading** `{spec.name}`…", *empty)
        stop_key = f"{request.session_hash or id(request)}:benchmark"
        stop = _stops[stop_key] = threading.Event()
        turn = _device.turn()
        try:
            for status in until_ready(spec, True, turn, stop):
                yield (status, *empty)
            if stop.is_set():
                yield ("**Stopped** before the timed runs started: no report.", *empty)
                return
            load(spec, True, progress)
            start = time.perf_counter()
            done = total = 0
            for item in stream_benchmark(
                spec,
                config.device,
                config.dtype,
                True,
                chosen,
                variants,
                settings,
                repeats,
                stop_key,
            ):
                if isinstance(item, bench.Progress):
                    done, total = item.done, item.total
                    elapsed = time.perf_counter() - start
                    status = bench_progress_markdown(done, total, item.label, elapsed)
                    yield (status, *[gr.skip()] * 5)
                    continue
                figure = bench.draw_chart(item)
                status = (
                    f"**Done**: {total} timed runs in {time.perf_counter() - start:.0f} s, "
                    "one after the other on one device."
                )
                category_rows = pd.DataFrame(bench_category_rows(item), columns=CATEGORY_HEADERS)
                prompt_rows = pd.DataFrame(bench_prompt_rows(item), columns=PROMPT_HEADERS)
                yield (
                    status,
                    category_rows,
                    prompt_rows,
                    bench_overall_markdown(item),
                    figure,
                    item,
                )
                return
            if stop.is_set():
                yield (f"**Stopped** after {done} of {total} timed runs: no report.", *empty)
            else:
                yield ("The benchmark ended without a report.", *empty)
        finally:
            turn.leave()
            if _stops.get(stop_key) is stop:
                del _stops[stop_key]

    def request_bench_stop(request: gr.Request) -> None:
        event = _stops.get(f"{request.session_hash}:benchmark")
        if event is not None:
            event.set()

    def bench_drafters_for(pair: str):
        """The pair's own drafter, and prompt lookup beside an assistant model; the
        precisions where the pair has an assistant model."""
        spec = registry.get(pair)
        if spec is None:
            return gr.update(choices=[], value=[]), gr.update(visible=False)
        choices = [spec.drafter] + (["prompt-lookup"] if spec.drafter != "prompt-lookup" else [])
        quants = gr.update(
            visible=spec.drafter in ASSISTANT_MODEL_DRAFTERS, value=[spec.draft.assistant_quant]
        )
        return gr.update(choices=choices, value=[spec.drafter]), quants

    def bench_plan(
        chosen: list[str],
        prompts: float,
        max_new_tokens: float,
        repeats: float,
        drafters: list,
        quants: list,
    ) -> str:
        try:
            limit = max(1, int(prompts))
            count = len(bench.select_examples(examples, chosen, limit)) if chosen else 0
            variants = sum(
                len(quants or []) if d in ASSISTANT_MODEL_DRAFTERS else 1 for d in drafters or []
            )
            return bench_plan_markdown(count, variants, int(repeats), int(max_new_tokens))
        except (TypeError, ValueError):  # a field being typed into
            return gr.skip()

    pair_choices = [(name, name) for name in registry]
    # Without the choice, Gradio itself refuses "custom" from API clients, naming the choices.
    if config.allow_custom:
        pair_choices.append(("custom: enter target / assistant ids", CUSTOM))

    with gr.Blocks(title="Assisted generation, side by side") as demo:
        gr.Markdown(
            "# Assisted generation, side by side\n"
            "A small **assistant** model drafts tokens; the large **target** verifies them in "
            "one pass. Type a prompt and press **Compare**: plain decoding runs first, then "
            "assisted generation, and both stream here with their statistics. The "
            "**Benchmark** tab times the example prompts by category."
        )
        with gr.Tabs():
            with gr.Tab("Compare", id="compare", elem_id="tab-compare"):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3):
                        prompt = gr.Textbox(
                            label="Prompt",
                            lines=6,
                            max_lines=16,
                            placeholder=(
                                "Ask for code, an edit, a summary, or an answer from a passage…"
                            ),
                            elem_id="prompt",
                        )
                        with gr.Row():
                            compare_btn = gr.Button("Compare", variant="primary", elem_id="compare")
                            stop_btn = gr.Button("Stop", variant="stop", elem_id="stop")
                            replay_btn = gr.Button(
                                "Replay race", interactive=False, elem_id="replay"
                            )
                        gr.Examples(
                            examples=[[example.prompt] for example in examples],
                            inputs=[prompt],
                            example_labels=[example.label for example in examples],
                            label=(
                                "Example prompts (inputs that answers copy from are accepted most)"
                            ),
                            cache_examples=False,
                        )
                    with gr.Column(scale=2):
                        pair = gr.Dropdown(
                            pair_choices,
                            value=config.default_pair,
                            label="Model pair",
                            elem_id="pair",
                        )
                        with gr.Group(visible=False) as custom_group:
                            custom_target = gr.Textbox(
                                "", label="Target model id", placeholder="owner/name"
                            )
                            custom_assistant = gr.Textbox(
                                "",
                                label="Assistant model id (empty: prompt lookup)",
                                placeholder="owner/name, same tokenizer as the target",
                            )
                            load_btn = gr.Button("Load pair", size="sm")
                        pair_status = gr.Markdown("Loading the model pair…", elem_id="pair-status")
                        with gr.Accordion("Settings", open=False, elem_id="settings"):
                            max_new_tokens = gr.Slider(
                                1,
                                MAX_NEW_TOKENS_CAP,
                                value=DEFAULT_MAX_NEW_TOKENS,
                                step=1,
                                precision=0,
                                label="Max new tokens",
                                elem_id="max-new-tokens",
                            )
                            decoding_mode = gr.Radio(
                                ["greedy", "sampling"], value="greedy", label="Decoding"
                            )
                            with gr.Row(visible=False) as sampling_row:
                                temperature = gr.Slider(
                                    0.05, 2.0, value=0.7, step=0.05, label="Temperature"
                                )
                                top_p = gr.Slider(0.05, 1.0, value=0.9, step=0.05, label="Top-p")
                                seed = gr.Number(value=0, precision=0, minimum=0, label="Seed")
                            draft_length = gr.Slider(
                                1,
                                MAX_DRAFT_TOKENS,
                                value=_draft_length_default(default_spec),
                                step=1,
                                precision=0,
                                label="Draft length γ (candidates per step)",
                            )
                            schedule = gr.Radio(
                                ["constant", "heuristic"],
                                value=default_spec.draft.schedule,
                                label="Draft length schedule",
                                info="heuristic: +2 after a fully accepted step, −1 otherwise",
                            )
                            confidence_threshold = gr.Slider(
                                0.0,
                                0.95,
                                value=default_spec.draft.confidence_threshold,
                                step=0.05,
                                label="Assistant confidence threshold (0: off)",
                                info="the assistant stops a draft early when unsure",
                            )
                            assistant_quant = gr.Radio(
                                list(ASSISTANT_QUANTS),
                                value=default_spec.draft.assistant_quant,
                                label="Assistant precision (the target's never changes)",
                                info="int8: int8 weights and activations · int8-wo: int8 "
                                "weights only · none: the pair's dtype · auto: int8 on a "
                                "CPU, the pair's dtype on a GPU",
                                elem_id="assistant-quant",
                            )
                            chat_template = gr.Checkbox(
                                value=True, label="Wrap the prompt in the chat template"
                            )
                status = gr.Markdown(
                    "Runs are sequential on one device for honest timing: plain first, "
                    "then assisted.",
                    elem_id="status",
                    label="status",
                )
                with gr.Row(equal_height=False):
                    with gr.Column():
                        gr.Markdown("### Plain")
                        gr.HTML('<div class="legend">the target alone: one token per step</div>')
                        plain_text = gr.HTML(
                            run_html(
                                [], "plain", placeholder="Plain decoding output appears here."
                            ),
                            elem_id="plain-text",
                            label="plain_text",
                        )
                        plain_card = gr.HTML(
                            stat_card_html(None), elem_id="plain-card", label="plain_stats"
                        )
                    with gr.Column():
                        gr.Markdown("### Assisted")
                        gr.HTML(LEGEND_HTML)
                        assisted_text = gr.HTML(
                            run_html(
                                [],
                                "assisted",
                                placeholder="Assisted generation output appears here.",
                            ),
                            elem_id="assisted-text",
                            label="assisted_text",
                        )
                        assisted_card = gr.HTML(
                            stat_card_html(None), elem_id="assisted-card", label="assisted_stats"
                        )
                summary = gr.Markdown(elem_id="summary", label="summary")
                with gr.Row():
                    timeline = gr.LinePlot(
                        _timeline_frame({mode: [] for mode in MODES}),
                        x="t_s",
                        y="tokens",
                        color="run",
                        color_map={"plain": "#6366f1", "assisted": "#10b981"},
                        title="New tokens over time",
                        label="tokens_over_time",
                        show_label=False,
                        x_title="seconds since the run started",
                        y_title="new tokens",
                        height=260,
                    )
                    histogram = gr.BarPlot(
                        _histogram_frame([]),
                        x="accepted",
                        y="steps",
                        title="Accepted candidates per step (assisted)",
                        label="accept_histogram",
                        show_label=False,
                        x_title="accepted in the step",
                        y_title="steps",
                        y_lim=[0, None],
                        height=260,
                    )
                with gr.Accordion("Result as JSON (the CLI's --json schema)", open=False):
                    result_json = gr.JSON(label="result")
            with gr.Tab("Benchmark", id="benchmark", elem_id="tab-benchmark"):
                gr.Markdown(BENCH_NOTE)
                with gr.Row(equal_height=False):
                    with gr.Column():
                        bench_pair = gr.Dropdown(
                            list(registry),
                            value=config.default_pair,
                            label="Model pair",
                            info="custom pairs: python -m assisted.bench --target … --assistant …",
                            elem_id="bench-pair",
                        )
                        bench_categories = gr.CheckboxGroup(
                            example_categories,
                            value=example_categories,
                            label="Categories",
                            elem_id="bench-categories",
                        )
                        bench_drafters = gr.CheckboxGroup(
                            bench_drafters_for(config.default_pair)[0]["choices"],
                            value=[default_spec.drafter],
                            label="Drafters (each compared with the same plain runs)",
                            elem_id="bench-drafters",
                        )
                        bench_quants = gr.CheckboxGroup(
                            list(ASSISTANT_QUANTS),
                            value=[default_spec.draft.assistant_quant],
                            label="Assistant precisions (each compared with the same plain runs)",
                            info="none: the pair's dtype · int8: weights and activations · "
                            "int8-wo: weights only · auto: int8 on a CPU",
                            visible=default_spec.drafter in ASSISTANT_MODEL_DRAFTERS,
                            elem_id="bench-quants",
                        )
                    with gr.Column():
                        bench_prompts = gr.Slider(
                            1,
                            BENCH_MAX_PROMPTS,
                            value=1,
                            step=1,
                            precision=0,
                            label="Prompts per category",
                            elem_id="bench-prompts",
                        )
                        bench_max_new_tokens = gr.Slider(
                            1,
                            MAX_NEW_TOKENS_CAP,
                            value=BENCH_MAX_NEW_TOKENS,
                            step=1,
                            precision=0,
                            label="Max new tokens",
                            elem_id="bench-max-new-tokens",
                        )
                        bench_repeats = gr.Slider(
                            1,
                            BENCH_MAX_REPEATS,
                            value=1,
                            step=1,
                            precision=0,
                            label="Repeats (the median of three shrugs off one outlier)",
                            elem_id="bench-repeats",
                        )
                bench_plan_md = gr.Markdown(
                    bench_plan(
                        example_categories,
                        1,
                        BENCH_MAX_NEW_TOKENS,
                        1,
                        [default_spec.drafter],
                        [default_spec.draft.assistant_quant],
                    ),
                    elem_id="bench-plan",
                )
                with gr.Row():
                    bench_btn = gr.Button("Run benchmark", variant="primary", elem_id="bench-run")
                    bench_stop_btn = gr.Button("Stop", variant="stop", elem_id="bench-stop")
                bench_status = gr.Markdown(
                    "Press **Run benchmark**; progress shows here.",
                    elem_id="bench-status",
                    label="status",
                )
                bench_overall = gr.Markdown(elem_id="bench-overall", label="overall")
                bench_category_table = gr.Dataframe(
                    pd.DataFrame(columns=CATEGORY_HEADERS),
                    label="Per category",
                    interactive=False,
                    wrap=True,
                    elem_id="bench-categories-table",
                )
                bench_chart = gr.Plot(label="Speedup per category", elem_id="bench-chart")
                bench_prompt_table = gr.Dataframe(
                    pd.DataFrame(columns=PROMPT_HEADERS),
                    label="Per prompt",
                    interactive=False,
                    wrap=True,
                    # Wide enough that no header breaks inside a word.
                    column_widths=["13%", "14%", "11%", "8%", "9%", "9%", "9%", "8%", "9%", "10%"],
                    elem_id="bench-prompts-table",
                )
                with gr.Accordion("Report as JSON (python -m assisted.bench's)", open=False):
                    bench_report = gr.JSON(label="report")
        with gr.Accordion("What is assisted generation?", open=False):
            gr.Markdown(EXPLANATION)
        race = gr.State(None)

        outputs = [
            status,
            plain_text,
            assisted_text,
            plain_card,
            assisted_card,
            summary,
            timeline,
            histogram,
            result_json,
            race,
        ]
        compare_event = compare_btn.click(
            compare,
            inputs=[
                prompt,
                pair,
                custom_target,
                custom_assistant,
                max_new_tokens,
                decoding_mode,
                temperature,
                top_p,
                seed,
                draft_length,
                schedule,
                confidence_threshold,
                chat_template,
                assistant_quant,
            ],
            outputs=outputs,
            api_name="compare",
            # Many at once: each fetches its files, then takes its turn on the device.
            concurrency_limit=VISITORS_AT_ONCE,
            concurrency_id="visitors",
            # One progress display, on the status line: ten spinners would be noise, and a
            # browser on the server's own CPU would repaint them while runs are timed.
            show_progress="minimal",
            show_progress_on=status,
        )
        compare_event.then(
            lambda state: gr.update(interactive=bool(state)),
            inputs=race,
            outputs=replay_btn,
            api_visibility="private",
        )
        replay_event = replay_btn.click(
            replay,
            inputs=race,
            outputs=[status, plain_text, assisted_text],
            api_visibility="private",
            concurrency_limit=None,
            show_progress="hidden",
        )
        stop_btn.click(
            request_stop,
            cancels=[replay_event],
            api_visibility="private",
            concurrency_limit=None,
            show_progress="hidden",
        )
        pair.change(
            on_pair_change,
            inputs=pair,
            outputs=[custom_group, draft_length, schedule, confidence_threshold, assistant_quant],
            api_visibility="private",
            queue=False,
        ).then(
            load_chosen,
            inputs=pair,
            outputs=pair_status,
            api_visibility="private",
            concurrency_id="pair-status",
            concurrency_limit=VISITORS_AT_ONCE,
        )
        load_btn.click(
            load_custom,
            inputs=[custom_target, custom_assistant],
            outputs=pair_status,
            api_visibility="private",
            concurrency_id="pair-status",
            concurrency_limit=VISITORS_AT_ONCE,
        )
        bench_btn.click(
            run_benchmark,
            inputs=[
                bench_pair,
                bench_categories,
                bench_prompts,
                bench_max_new_tokens,
                bench_repeats,
                bench_drafters,
                bench_quants,
            ],
            outputs=[
                bench_status,
                bench_category_table,
                bench_prompt_table,
                bench_overall,
                bench_chart,
                bench_report,
            ],
            api_name="benchmark",
            concurrency_limit=VISITORS_AT_ONCE,
            concurrency_id="visitors",  # like Compare: it takes its turn on the device
            show_progress="minimal",
            show_progress_on=bench_status,
        )
        bench_stop_btn.click(
            request_bench_stop,
            api_visibility="private",
            concurrency_limit=None,
            show_progress="hidden",
        )
        bench_pair.change(
            bench_drafters_for,
            inputs=bench_pair,
            outputs=[bench_drafters, bench_quants],
            api_visibility="private",
            queue=False,
        )
        plan_inputs = [
            bench_categories,
            bench_prompts,
            bench_max_new_tokens,
            bench_repeats,
            bench_drafters,
            bench_quants,
        ]
        gr.on(
            [component.change for component in plan_inputs],
            bench_plan,
            inputs=plan_inputs,
            outputs=bench_plan_md,
            api_visibility="private",
            queue=False,
            show_progress="hidden",
        )
        decoding_mode.change(
            toggle_sampling, decoding_mode, sampling_row, api_visibility="private", queue=False
        )
        demo.load(
            load_chosen,
            inputs=pair,
            outputs=pair_status,
            api_visibility="private",
            concurrency_id="pair-status",
            concurrency_limit=VISITORS_AT_ONCE,
        )
    demo.queue(max_size=QUEUE_MAX_SIZE)
    return demo


LAUNCH_KWARGS = {"css": CSS, "theme": gr.themes.Soft()}


def preload(config: AppConfig) -> None:
    """Load the default pair now, printing progress (start-up of a server or a Space)."""

    def report(message: str, fraction: float | None) -> None:
        print(f"{message}" + (f" ({fraction:.0%})" if fraction is not None else ""), flush=True)

    spec = config.registry[config.default_pair]
    pairs.load_pair(spec, config.device, config.dtype, progress=report, allow_local=True)


demo = build_demo()

if os.environ.get("SPACE_ID"):  # ZeroGPU wants the models loaded at import
    preload(AppConfig.from_env())


def main() -> None:
    preload(AppConfig.from_env())
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), **LAUNCH_KWARGS)


if __name__ == "__main__":
    main()
