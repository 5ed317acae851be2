"""Planning a benchmark: which prompts, which drafting variants, and whether the pair can
draft each way. Everything here is checked before a model loads, so a bad option fails in a
second, not after minutes of loading.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from assisted.core.settings import DrafterKind, DraftSettings, Example, SettingsError
from assisted.models.pairs import LoadedPair, PairSpec

EARLY_EXIT_LAYER = 4  # draft layer for early exit when the pair names none (LayerSkip's)

# Draft settings a comma list can sweep, and their short names in variant names.
SWEEPS = {
    "num_assistant_tokens": "n",
    "schedule": "schedule",
    "confidence_threshold": "ct",
    "cumulative_threshold": "cct",
    "prompt_lookup_num_tokens": "n",
    "max_matching_ngram_size": "ngram",
    "assistant_quant": "quant",
    "lookup": "lookup",
}
_MODEL_FIELDS = ("num_assistant_tokens", "schedule", "confidence_threshold", "cumulative_threshold")
_LOOKUP_FIELDS = ("prompt_lookup_num_tokens", "max_matching_ngram_size", "lookup")


def _fields(kind: DrafterKind) -> tuple[str, ...]:
    """The draft settings that mean something for a drafter kind."""
    if kind is DrafterKind.PROMPT_LOOKUP:
        return _LOOKUP_FIELDS
    fields = _MODEL_FIELDS
    if kind.has_model:  # a model of its own, with its own precision
        fields = (*fields, "assistant_quant")
    if kind.auto_capable:  # prompt lookup is the `auto` schedule's second source
        fields = (*fields, "lookup")
    return fields


class BenchError(ValueError):
    """The benchmark cannot run as asked; the message says why."""


@dataclass(frozen=True)
class Variant:
    """One drafting strategy compared against the plain baseline."""

    name: str
    drafter: DrafterKind
    draft: DraftSettings


def select_examples(
    examples: Sequence[Example], categories: Sequence[str] | None = None, limit: int | None = None
) -> list[Example]:
    """Keep `categories` (all when None), then the first `limit` prompts of each category."""
    if limit is not None and limit < 1:
        raise BenchError(f"--limit must be at least 1, not {limit}")
    known = list(dict.fromkeys(e.category for e in examples))
    if categories:
        missing = [c for c in categories if c not in known]
        if missing:
            raise BenchError(
                f"no prompts in categor{'ies' if len(missing) > 1 else 'y'} "
                f"{', '.join(missing)}; the prompts have: {', '.join(known)}"
            )
        examples = [e for e in examples if e.category in categories]
    taken: dict[str, int] = {}
    selected = []
    for example in examples:
        taken[example.category] = taken.get(example.category, 0) + 1
        if limit is None or taken[example.category] <= limit:
            selected.append(example)
    return selected


def plan_variants(
    spec: PairSpec, drafters: Sequence[str], sweeps: dict[str, list] | None = None
) -> list[Variant]:
    """The variants to compare: each drafter kind × each combination of its swept settings.

    A variant is named by its kind, plus the settings that vary between variants of that kind
    ("assistant n=3", "assistant n=8"). Settings not swept keep the pair's own values.
    """
    sweeps = {k: v for k, v in (sweeps or {}).items() if v}
    kinds = [check_drafter(spec, kind) for kind in dict.fromkeys(drafters)]
    for field in sweeps:
        if not any(field in _fields(kind) for kind in kinds):
            flag = "--" + field.replace("_", "-")
            raise BenchError(f"{flag} does not apply to the drafters here: {', '.join(kinds)}")
    if sweeps.get("max_matching_ngram_size"):
        _check_ngram_size("--max-matching-ngram-size", sweeps.get("lookup", [spec.draft.lookup]))
    variants = []
    for kind in kinds:
        axes = [(f, sweeps.get(f, [getattr(spec.draft, f)])) for f in _fields(kind)]
        for values in itertools.product(*(vals for _, vals in axes)):
            changes = {f: v for (f, _), v in zip(axes, values, strict=True)}
            draft = dataclasses.replace(spec.draft, **changes)
            try:
                draft.validate_for(kind)
            except SettingsError as error:
                raise BenchError(f"{kind}: {error}") from None
            label = " ".join(
                f"{SWEEPS[f]}={v}"
                for (f, vals), v in zip(axes, values, strict=True)
                if len(vals) > 1
            )
            variants.append(Variant(f"{kind} {label}".strip(), kind, draft))
    return variants


def parse_variant(spec: PairSpec, text: str, default_drafter: str) -> Variant:
    """One variant from "KEY=VALUE,..." (keys: `drafter` and the sweepable settings, with
    dashes or underscores: "schedule=constant,num-assistant-tokens=2"). Settings not given
    keep the pair's own values; the variant is named by the ones given."""
    changes: dict = {}
    kind = default_drafter
    for item in comma_list(text):
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not value.strip():
            raise BenchError(f"--variant {text!r}: expected KEY=VALUE, not {item!r}")
        if key == "drafter":
            kind = value.strip()
            continue
        if key not in SWEEPS:
            keys = ", ".join(["drafter", *(k.replace("_", "-") for k in SWEEPS)])
            raise BenchError(f"--variant {text!r}: unknown setting {key!r} (one of {keys})")
        kind_of = type(getattr(spec.draft, key))
        try:
            changes[key] = kind_of(value.strip())
        except ValueError:
            what = "a whole number" if kind_of is int else "a number"
            raise BenchError(f"--variant {text!r}: {key} must be {what}") from None
    kind = check_drafter(spec, kind)
    unused = [key for key in changes if key not in _fields(kind)]
    if unused:
        raise BenchError(f"--variant {text!r}: {', '.join(unused)} does not apply to {kind}")
    draft = dataclasses.replace(spec.draft, **changes)
    if "max_matching_ngram_size" in changes:
        _check_ngram_size(f"--variant {text!r}: max_matching_ngram_size", [draft.lookup])
    try:
        draft.validate_for(kind)
    except SettingsError as error:
        raise BenchError(f"{kind}: {error}") from None
    label = " ".join(f"{SWEEPS[key]}={value}" for key, value in changes.items())
    return Variant(f"{kind} {label}".strip(), kind, draft)


def _check_ngram_size(what: str, lookups: Sequence[str]) -> None:
    """An n-gram size means something to Transformers' lookup only: the suffix lookup
    matches 2 to 8 tokens (`assisted.engine.drafters.seam`), so a size given for it alone is
    refused."""
    if "transformers" not in lookups:
        raise BenchError(f"{what} applies to lookup=transformers, not {', '.join(lookups)}")


def check_drafter(spec: PairSpec, name: str) -> DrafterKind:
    """The drafter kind called `name`, if the pair can draft with it. Prompt lookup and
    early exit need only the target; model drafters need the pair's assistant, and an
    assistant with its own tokenizer only drafts as the universal kind."""
    try:
        kind = DrafterKind.parse(name)
    except ValueError as error:
        raise BenchError(str(error)) from None
    if kind == spec.drafter or not kind.has_model or (kind.own_tokenizer and spec.assistant):
        return kind
    raise BenchError(
        f"the pair {spec.name!r} has no assistant model for the {kind.value!r} drafter; "
        "name one with --target ID --assistant ID"
    )


def with_drafter(pair: LoadedPair, kind: str) -> LoadedPair:
    """The same loaded models drafting another way: no second copy of the target.

    Loading is cached per spec, so asking `load_pair` for a sibling spec would load the
    target again; this shares its weights instead.
    """
    if kind == pair.spec.drafter:
        return pair
    kind = check_drafter(pair.spec, kind)
    uses_assistant = kind.has_model
    layer = pair.spec.early_exit_layer or EARLY_EXIT_LAYER
    if kind is DrafterKind.EARLY_EXIT:
        layers = pair.target.config.get_text_config().num_hidden_layers
        if not 0 < layer < layers:
            raise BenchError(
                f"early exit at layer {layer} needs a target with more layers (it has {layers})"
            )
    spec = dataclasses.replace(
        pair.spec,
        name=f"{pair.spec.name} ({kind})",
        drafter=kind,
        assistant=pair.spec.assistant if uses_assistant else None,
        early_exit_layer=layer,
    )
    return dataclasses.replace(
        pair,
        spec=spec,
        assistant=pair.assistant if uses_assistant else None,
        assistant_tokenizer=pair.assistant_tokenizer if uses_assistant else None,
        assistant_source=pair.assistant_source if uses_assistant else None,
    )


def quant_sweep(drafters: list[str], quants: list[str] | None) -> list[str]:
    """The assistant precisions to compare: none chosen means the pair's own; drafters
    without a model of their own take none."""
    if not any(DrafterKind(d).has_model for d in drafters):
        return []
    return list(dict.fromkeys(quants or []))


def comma_list(text: str) -> list[str]:
    """The items of a comma list, stripped, empty ones dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]
