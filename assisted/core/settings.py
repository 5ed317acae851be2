"""Run and draft settings with their limits: plain values, validated before any model work,
and the prompt sets a run is asked from: the `examples/` folder (one text file per prompt,
one folder per category) and JSONL files (one object per line: `category`, `turns`,
optional `question_id`), read by `load_examples`.

No torch here, so the UI can validate input and show limits without loading anything.

Drafter kinds: the one place that names them and says what differs between them.

A pair is a target plus a drafter, and every drafter is one of Transformers' own mechanisms:
- ASSISTANT: a smaller model sharing the target's tokenizer (`assistant_model=`);
- UNIVERSAL: an assistant model with a tokenizer of its own (`tokenizer=`,
  `assistant_tokenizer=`: universal assisted generation);
- PROMPT_LOOKUP: candidates copied from n-grams of the context (no second model);
- EARLY_EXIT: the target's own first layers draft (`assistant_early_exit=`).

A kind is also a step's **source**: where that step's candidates came from. Under `auto`
a pair with an assistant model draws each step from the assistant or from a prompt-lookup
match, so the source can change from step to step while the pair's drafter stays the same.

Each kind's value is its name in the CLI, the JSON and the API ("assistant",
"prompt-lookup", ...); the enum is a `str`, so it compares equal to that name, serialises as
it and pickles across ZeroGPU's process boundary.

Temperature bands: the runs whose acceptance the `auto` policy learns from one another.

The policy starts each run from the acceptance the pair's earlier runs saw
(`assisted.policy.learnt`). That history only helps a run that accepts alike:
- under greedy decoding a draft is accepted where it equals the target's argmax, so
  acceptance is a property of the two models and the text;
- under sampling a draft token is accepted with probability min(1, p/q) (Leviathan et al.
  2023), and both distributions flatten as the temperature rises, so acceptance falls with
  temperature, and a greedy run's acceptance says little about a sampled one's.

So each band keeps a history of its own: greedy, and three temperature bands around the
usual settings (0.7 is the app's default; above 1 the distributions flatten beyond the
model's own). Top-p is left out: it narrows both distributions alike, and more bands would
each see fewer runs to learn from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Literal


class DrafterKind(StrEnum):
    ASSISTANT = "assistant"
    UNIVERSAL = "universal"
    PROMPT_LOOKUP = "prompt-lookup"
    EARLY_EXIT = "early-exit"

    def __str__(self) -> str:
        return self.value

    @property
    def has_model(self) -> bool:
        """Runs a model of its own, with its own weights and precision (the assistant)."""
        return self in (DrafterKind.ASSISTANT, DrafterKind.UNIVERSAL)

    @property
    def own_tokenizer(self) -> bool:
        """Drafts in a tokenizer other than the target's."""
        return self is DrafterKind.UNIVERSAL

    @property
    def auto_capable(self) -> bool:
        """The `auto` policy can drive it: it sets the draft length of Transformers' own
        assistant and prompt-lookup candidate generators, step by step."""
        return self in (DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP)

    @property
    def times_drafting(self) -> bool:
        """Drafts with forward passes, which hooks can time (prompt lookup searches n-grams)."""
        return self is not DrafterKind.PROMPT_LOOKUP

    @property
    def label(self) -> str:
        """Its name for people, as a source in charts and legends: the universal drafter is
        an assistant model too."""
        return {
            DrafterKind.ASSISTANT: "assistant",
            DrafterKind.UNIVERSAL: "assistant",
            DrafterKind.PROMPT_LOOKUP: "prompt lookup",
            DrafterKind.EARLY_EXIT: "early exit",
        }[self]

    @classmethod
    def parse(cls, name: str | DrafterKind) -> DrafterKind:
        """The kind called `name`; ValueError naming the kinds for anything else."""
        try:
            return cls(name)
        except ValueError:
            choices = ", ".join(kind.value for kind in cls)
            raise ValueError(f"unknown drafter {name!r}; choose one of {choices}") from None


DRAFTER_NAMES: tuple[str, ...] = tuple(kind.value for kind in DrafterKind)


MAX_NEW_TOKENS_CAP = 1024  # longer runs tie the device up for minutes on a CPU
MAX_PROMPT_CHARS = 32_000  # checked before tokenising; token length is checked against the model
MAX_DRAFT_TOKENS = 32
AUTO_CAP = 8  # the draft length cap under `auto` where none is given
# The warm-up runs' prompt, and the context the calibration times its passes after.
WARMUP_PROMPT = "Write one short sentence about the sea."
# Untimed warm-up runs (once per pair and mode, and the benchmark's once per prompt) are this
# many tokens: enough to pay first-call costs and settle a prompt's shapes.
WARMUP_TOKENS = 8
# Sampling colder than this is greedy in all but name, and the logits divided by it
# overflow on their way to probabilities: at 1e-20 the assistant's samples turn to NaN.
MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 5.0
MAX_SEED = 2**64 - 1  # torch's generator takes 64 bits

Schedule = Literal["constant", "heuristic", "auto"]
SCHEDULES: tuple[str, ...] = ("constant", "heuristic", "auto")
# The assistant's precision: "none" is the pair's dtype, "int8" int8 weights and activations,
# "int8-wo" int8 weights only, "int4-wo" 4-bit weights only (groups of 64 inputs). "auto" is
# int4-wo on CPUs where the pair runs in bf16, int8 on other CPUs, and the pair's dtype on GPUs
# (see assisted.models.quantize for the measurements). The quantized ones use CPU kernels. The
# target's precision never changes with it.
AssistantQuant = Literal["auto", "none", "int8", "int8-wo", "int4-wo"]
ASSISTANT_QUANTS: tuple[str, ...] = ("auto", "none", "int8", "int8-wo", "int4-wo")
# Where prompt-lookup drafts come from: "suffix", the longest and most recent match in the
# user's message and the output (assisted.engine.drafters.seam); "transformers", Transformers' own
# search of the whole context, chat template included, first match first.
Lookup = Literal["suffix", "transformers"]
LOOKUPS: tuple[str, ...] = ("suffix", "transformers")
SHORTEST_MATCH = 2  # tokens the suffix lookup's suffix and its earlier occurrence share, at least
LONGEST_MATCH = 8  # ... and at most: longer matches are as good as this long


class SettingsError(ValueError):
    """A setting is out of range; the message says which and what is allowed."""


@dataclass(frozen=True)
class DraftSettings:
    """How the drafter proposes candidates. Applied where Transformers reads them.

    `num_assistant_tokens` is the draft length γ per step (the starting value under the
    heuristic schedule, which adds 2 after a fully accepted step and removes 1 otherwise;
    the cap under `auto`, which picks γ in 0 … cap at each step from measured costs, see
    assisted.policy.choice; for prompt lookup the cap is `prompt_lookup_num_tokens`).
    `confidence_threshold`: where Transformers drafts (a constant γ, the heuristic, `auto`
    under sampling), the assistant stops drafting a step early when its top probability
    falls below this (0 disables it). Under `auto` and greedy decoding the policy prices
    where each draft ends instead (`assisted.policy.choice`).
    `cumulative_threshold`: under `auto` and greedy decoding, the assistant also stops once
    the product of its top probabilities over the step's draft falls below this, beside
    the policy's own floors (0 disables it; `assisted.engine.drafters.static_draft`).
    `assistant_quant`: the assistant model's precision ("none": the pair's dtype). The target
    verifies every candidate, so this moves the acceptance rate and the drafting cost, never
    the output.
    `lookup`: how prompt lookup finds its matches (the prompt-lookup drafter's, and the
    `auto` schedule's second source); `max_matching_ngram_size` applies to Transformers'
    lookup only, as the suffix lookup matches `SHORTEST_MATCH` to `LONGEST_MATCH` tokens.
    """

    # Transformers' own default threshold; on a GPU, where verification is nearly free,
    # 5 candidates a step is a common choice.
    num_assistant_tokens: int = 5
    schedule: Schedule = "constant"
    confidence_threshold: float = 0.4
    cumulative_threshold: float = 0.0
    prompt_lookup_num_tokens: int = 10
    max_matching_ngram_size: int = 2
    assistant_quant: AssistantQuant = "none"
    lookup: Lookup = "suffix"

    def validate(self) -> DraftSettings:
        _check_int("draft length", self.num_assistant_tokens, 1, MAX_DRAFT_TOKENS)
        _check_int("prompt-lookup tokens", self.prompt_lookup_num_tokens, 1, MAX_DRAFT_TOKENS)
        _check_int("prompt-lookup n-gram size", self.max_matching_ngram_size, 1, 8)
        if self.schedule not in SCHEDULES:
            raise SettingsError(
                f"schedule must be one of {', '.join(SCHEDULES)}, not {self.schedule!r}"
            )
        if not 0.0 <= self.confidence_threshold < 1.0:
            raise SettingsError(
                f"confidence threshold must be in [0, 1), not {self.confidence_threshold}"
            )
        if not 0.0 <= self.cumulative_threshold < 1.0:
            raise SettingsError(
                f"cumulative threshold must be in [0, 1), not {self.cumulative_threshold}"
            )
        if self.assistant_quant not in ASSISTANT_QUANTS:
            raise SettingsError(
                f"assistant precision must be one of {', '.join(ASSISTANT_QUANTS)}, "
                f"not {self.assistant_quant!r}"
            )
        if self.lookup not in LOOKUPS:
            raise SettingsError(f"lookup must be one of {', '.join(LOOKUPS)}, not {self.lookup!r}")
        return self

    def length_for(self, drafter: DrafterKind) -> int:
        """The draft length `drafter` reads (the cap under `auto`): prompt lookup's tokens
        per step, or an assistant's γ."""
        if drafter is DrafterKind.PROMPT_LOOKUP:
            return self.prompt_lookup_num_tokens
        return self.num_assistant_tokens

    def validate_for(self, drafter: DrafterKind | str) -> DraftSettings:
        """`validate`, and refuse settings that mean nothing for this kind of drafter: a
        precision for drafters that run no model of their own (prompt lookup copies
        n-grams, early exit drafts with the target's own first layers), `auto` for drafters
        it cannot drive."""
        self.validate()
        drafter = DrafterKind(drafter)
        quant = self.assistant_quant
        if quant not in ("auto", "none") and not drafter.has_model:
            raise SettingsError(
                f"assistant precision {quant!r} applies to assistant models; the "
                f"{drafter.value!r} drafter runs no separate model (choose 'auto' or 'none')"
            )
        if self.schedule == "auto" and not drafter.auto_capable:
            drivable = " and ".join(kind.value for kind in DrafterKind if kind.auto_capable)
            raise SettingsError(
                f"the auto schedule drives {drivable} drafters, not {drafter.value!r}"
            )
        return self


@dataclass(frozen=True)
class RunSettings:
    """What every run of a comparison shares: length, sampling, prompt formatting."""

    max_new_tokens: int = 128
    sample: bool = False
    temperature: float = 0.7
    top_p: float = 0.9
    seed: int = 0
    chat_template: bool = True

    def validate(self) -> RunSettings:
        _check_int("max new tokens", self.max_new_tokens, 1, MAX_NEW_TOKENS_CAP)
        if self.sample:
            if not MIN_TEMPERATURE <= self.temperature <= MAX_TEMPERATURE:
                raise SettingsError(
                    f"temperature must be in [{MIN_TEMPERATURE:g}, {MAX_TEMPERATURE:g}] "
                    f"(for colder, choose greedy), not {self.temperature}"
                )
            if not 0.0 < self.top_p <= 1.0:
                raise SettingsError(f"top-p must be in (0, 1], not {self.top_p}")
        _check_int("seed", self.seed, 0, MAX_SEED)
        return self

    def with_(self, **changes) -> RunSettings:
        return replace(self, **changes)


def assistant_precision(
    quant: str, drafter: DrafterKind | str, device_type: str, dtype: str = "float32"
) -> str:
    """The precision a run drafts in: "none" (the pair's dtype), "int8", "int8-wo" or
    "int4-wo".

    "auto" means, on a CPU, int4-wo where the pair runs in bf16 (`dtype`, the pair's dtype
    name: as fast as int8 there, with half its weights, and the oracle's hindsight
    reproduces its drafts) and int8 where it runs in fp32 (the weight-only kernels are slow
    with fp32 activations), see `assisted.models.quantize`; the pair's dtype elsewhere. Drafters
    without a model of their own draft as they are (`DraftSettings.validate_for` refuses a
    quantized precision for them). Takes the device's type ("cpu", "cuda"), so that the
    app can refuse a setting before it asks ZeroGPU for a GPU, without touching CUDA."""
    if not DrafterKind(drafter).has_model:
        return "none"
    if quant == "auto":
        if device_type != "cpu":
            return "none"
        return "int4-wo" if dtype == "bfloat16" else "int8"
    if quant != "none" and device_type != "cpu":
        raise SettingsError(
            f"assistant precision {quant!r} uses CPU kernels; on {device_type} the assistant "
            "drafts in the pair's dtype (choose 'auto' or 'none')"
        )
    return quant


def validate_prompt(prompt: str) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise SettingsError("the prompt is empty: type something to generate from")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise SettingsError(
            f"the prompt has {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}"
        )
    return prompt


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"{name} must be a whole number, not {value!r}")
    if not low <= value <= high:
        raise SettingsError(f"{name} must be between {low} and {high}, not {value}")


Band = Literal["greedy", "t<=0.5", "t<=1", "t>1"]
GREEDY: Band = "greedy"
SAMPLED_BANDS: tuple[Band, ...] = ("t<=0.5", "t<=1", "t>1")


def band_of(settings: RunSettings) -> Band:
    """The band of a run under `settings`: greedy where it does not sample, else the band
    of its temperature."""
    if not settings.sample:
        return GREEDY
    if settings.temperature <= 0.5:
        return "t<=0.5"
    if settings.temperature <= 1.0:
        return "t<=1"
    return "t>1"


EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"


class ExamplesError(ValueError):
    """A prompt file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Example:
    question_id: str
    category: str
    prompt: str

    @property
    def label(self) -> str:
        return f"{self.category} / {self.question_id}"


def load_examples_folder(folder: Path = EXAMPLES_DIR) -> list[Example]:
    """`folder/CATEGORY/NAME.txt` → Example(question_id=NAME, category=CATEGORY)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ExamplesError(f"{folder}: not a folder")
    examples = []
    for path in sorted(folder.glob("*/*.txt")):
        prompt = path.read_text(encoding="utf-8").strip()
        if not prompt:
            raise ExamplesError(f"{path}: the prompt file is empty")
        examples.append(Example(path.stem, path.parent.name, prompt))
    if not examples:
        raise ExamplesError(f"{folder}: no prompt files (expected CATEGORY/NAME.txt)")
    return examples


def load_examples_jsonl(path: Path) -> list[Example]:
    """Each line: {"category": str, "turns": [str, ...], "question_id"?: str|int}; the first
    turn is the prompt."""
    path = Path(path)
    examples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ExamplesError(f"{where}: not valid JSON ({error.msg})") from None
        if not isinstance(item, dict):
            raise ExamplesError(f"{where}: expected a JSON object")
        category, turns = item.get("category"), item.get("turns")
        if not isinstance(category, str) or not category:
            raise ExamplesError(f"{where}: 'category' must be a non-empty string")
        if not (
            isinstance(turns, list) and turns and isinstance(turns[0], str) and turns[0].strip()
        ):
            raise ExamplesError(f"{where}: 'turns' must be a list starting with a non-empty string")
        question_id = str(item.get("question_id", f"{path.stem}-{number}"))
        examples.append(Example(question_id, category, turns[0]))
    if not examples:
        raise ExamplesError(f"{path}: no prompts")
    return examples


def load_examples(source: Path) -> list[Example]:
    source = Path(source)
    return load_examples_folder(source) if source.is_dir() else load_examples_jsonl(source)
