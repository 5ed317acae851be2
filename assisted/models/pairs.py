"""Model pairs: validation of user-supplied ids, the pair in memory, and loading it.

A pair is a target plus a drafter, of one of the kinds in `assisted.core.settings`; the named
ones are in `assisted.models.registry`. What a pair must pass before its weights load is checked
first (`check_pair`, below).

The device and dtype a pair runs in are `assisted.models.loading`'s choice; pairs that
name one target on one device in one dtype hold one copy of it. `trust_remote_code` is
never enabled. The pairs in memory are kept, and evicted, by
`assisted.models.process_state.LoadedPairs`, with the process's other caches.

Checks a pair passes before its weights load, from its configs, tokenizer files and the
sizes of its weight files: what `generate()` or the server's limits would refuse later,
refused while it costs the pairs in memory nothing. Each pair
is checked once per process and its verdict kept (`checking`).
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from assisted.core.settings import DrafterKind, assistant_precision
from assisted.models import embedded, fetch, learnt_store, process_state
from assisted.models.loading import choose_device, choose_dtype, load_model, release_memory
from assisted.models.registry import PAIRS, PairError, PairSpec, first_line
from assisted.policy.learnt import LearntState

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# The files a tokenizer's vocabulary is read from. Two folders that hold the same bytes in
# each hold one tokenizer, which is known without loading either: loading a Qwen tokenizer
# takes about 1 s, most of it holding Python's lock, which stalls the server's event loop
# for up to 0.45 s at a time (a 2-core AMD EPYC).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
)


# The verdicts of the pairs checked so far (`check_pair`), by pair and folders: None for a
# pass, the refusal's words for a pair refused. A check may load both tokenizers, about 2 s
# for a Qwen pair on a 2-core CPU every time, so each pair is checked once per process, one
# check at a time: requests that arrive together wait for one check, and later ones read
# its verdict.
_verdicts: dict[tuple, str | None] = {}
_checks = process_state.register(process_state.State("pair checks"))


def checking(spec: PairSpec, folders: list[str]) -> Generator[tuple[str, None], None, None]:
    """`check_pair` on `spec`'s `folders` (target first), once per process for the same
    pair and folders: a later call raises the kept refusal, or passes. Yields a progress
    line, as fetching does, before a check that may load tokenizers."""
    key = (spec, tuple(folders))
    if spec.drafter.has_model and key not in _verdicts:
        yield f"Checking {spec.name}: its configs and tokenizers", None
    with _checks.lock:
        if key not in _verdicts:
            try:
                check_pair(spec, folders)
            except PairError as error:
                _verdicts[key] = str(error)
            else:
                _verdicts[key] = None
    if (refusal := _verdicts[key]) is not None:
        raise PairError(refusal)


def check_pair(spec: PairSpec, folders: list[str]) -> None:
    """Refuse, from the configs and tokenizer files in `folders` (target first) and before
    any weights load, a pair that generate() would refuse.

    Transformers takes two models for one tokenizer when their configs' vocab sizes agree,
    and for two otherwise. Same tokenizer and other sizes is a padded vocabulary, which
    loading fits (`assisted.models.vocab`); the other mismatches are refused here."""
    from transformers import AutoConfig, AutoTokenizer

    configs = [AutoConfig.from_pretrained(f, trust_remote_code=False) for f in folders]
    if spec.drafter is DrafterKind.EARLY_EXIT:
        layers = configs[0].get_text_config().num_hidden_layers
        if not spec.early_exit_layer or not 0 < spec.early_exit_layer < layers:
            raise PairError(f"early-exit layer must be between 1 and {layers - 1}")
    if not spec.drafter.has_model:
        return
    same_tokenizer = same_tokenizer_files(folders)
    if not same_tokenizer:
        try:
            vocabs = [AutoTokenizer.from_pretrained(f, trust_remote_code=False) for f in folders]
        except (OSError, ValueError) as error:
            raise PairError(
                f"cannot load the tokenizers of {spec.name}: {first_line(error)}"
            ) from error
        same_tokenizer = vocabs[0].get_vocab() == vocabs[1].get_vocab()
    sizes = [config.get_text_config().vocab_size for config in configs]
    if not spec.drafter.own_tokenizer and not same_tokenizer:
        raise PairError(
            f"{spec.target} and {spec.assistant} have different tokenizers; pick the "
            f"{DrafterKind.UNIVERSAL.value!r} drafter (universal assisted generation) for "
            "this pair"
        )
    if spec.drafter.own_tokenizer and sizes[0] == sizes[1]:
        if same_tokenizer:
            raise PairError(
                f"{spec.target} and {spec.assistant} share one tokenizer; pick the "
                f"{DrafterKind.ASSISTANT.value!r} drafter for this pair"
            )
        raise PairError(
            f"{spec.target} and {spec.assistant} have different tokenizers but the same "
            f"vocabulary size ({sizes[0]:,}), and Transformers tells tokenizers apart by that "
            "size: it cannot run universal assisted generation on this pair"
        )


def same_tokenizer_files(folders: list[str]) -> bool:
    """Whether the folders hold the same tokenizer files, byte for byte (`TOKENIZER_FILES`,
    at least one of them)."""
    held = [
        {
            name: (Path(f) / name).read_bytes()
            for name in TOKENIZER_FILES
            if (Path(f) / name).is_file()
        }
        for f in folders
    ]
    return bool(held[0]) and all(files == held[0] for files in held[1:])


def check_config(ref: str, folder: Path) -> None:
    """Refuse `ref` unless its config (in `folder`) shows a causal LM with a croppable cache."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    except (OSError, ValueError) as error:
        raise PairError(f"cannot load the config of {ref!r}: {first_line(error)}") from error
    model_class = AutoModelForCausalLM._model_mapping.get(type(config), None)
    if model_class is None:
        raise PairError(f"{ref!r} ({config.model_type}) is not a causal language model")
    if getattr(model_class, "_is_stateful", False):
        raise PairError(
            f"{ref!r} ({config.model_type}) keeps a recurrent state that cannot be cropped back "
            "to the accepted tokens, so it cannot verify drafts (assisted decoding needs a "
            "croppable cache)"
        )


def check_sizes(refs: list[str], max_gb: float) -> None:
    """Refuse models whose weight files take more than `max_gb` GB together."""
    total = sum(weight_files_bytes(ref) for ref in refs)
    if total > max_gb * 1e9:
        raise PairError(
            f"the pair's weights take {total / 1e9:.1f} GB; this server loads at most "
            f"{max_gb:g} GB (ASSISTED_MAX_MODEL_GB)"
        )


def weight_files_bytes(ref: str) -> int:
    """Bytes of the weight files of `ref` (an embedded name, a folder or a Hub id); 0 where
    the Hub cannot be reached."""
    if ref in embedded.MODELS:
        return embedded.MODELS[ref].size
    path = Path(ref)
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.name.endswith(_WEIGHT_SUFFIXES))
    from huggingface_hub import HfApi
    from huggingface_hub.utils import HfHubHTTPError

    try:
        info = HfApi().model_info(ref, files_metadata=True)
    except HfHubHTTPError as error:
        hint = (
            " (a gated model needs HF_TOKEN)" if "401" in str(error) or "403" in str(error) else ""
        )
        raise PairError(f"cannot find {ref!r} on the Hub{hint}: {first_line(error)}") from error
    except Exception:  # offline or unreachable: from_pretrained may still find it cached,
        return 0  # and says clearly what is missing if it does not
    return sum(s.size or 0 for s in info.siblings or [] if s.rfilename.endswith(_WEIGHT_SUFFIXES))


MAX_LOADED_PAIRS = int(os.environ.get("ASSISTED_MAX_PAIRS", "2"))
# Refuse to download or load checkpoints above this size (weights on disk, both models), and
# evict the least recently used pairs while those in memory hold more (`memory_bytes`).
MAX_MODEL_GB = float(os.environ.get("ASSISTED_MAX_MODEL_GB", "40"))

_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


class PairEngine(Protocol):
    """What the engine builds for a loaded pair and keeps with it
    (`assisted.engine.engine.Engine`), known here by its pair alone: this layer sits below
    the engine."""

    pair: LoadedPair


@dataclass
class LoadedPair:
    """A pair in memory: its models, tokenizers, device and dtype, the assistant's copies
    in other precisions, and what the `auto` policy learnt on it; and its `engine`, what the
    engine builds for it (its preparations, the paths warmed up:
    `assisted.engine.engine.Engine`), made on first use (`keep_engine`). No module outside
    `assisted.models` sets a field here."""

    spec: PairSpec
    target: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    assistant: PreTrainedModel | None
    assistant_tokenizer: PreTrainedTokenizerBase | None
    device: torch.device
    dtype: torch.dtype
    # Copies of the assistant in other precisions, made on first use and shared by the
    # pair's siblings (the benchmark's drafter variants), so one target serves them all.
    assistant_copies: dict[str, PreTrainedModel] = field(default_factory=dict)
    # The assistant's folder, to load it again once released (`drafting_assistant`); None
    # for drafters without a model of their own.
    assistant_source: str | None = None
    keeps_assistant: bool = False  # a run drafted with the assistant as loaded
    # What the `auto` policy learnt on this pair: costs and acceptance, shared by siblings;
    # read from the file an earlier process left, and written back after each `auto` run.
    learnt: LearntState = field(default_factory=LearntState)
    learnt_file: learnt_store.LearntFile | None = None  # None: nothing kept on disk
    # The pair and the copies `dataclasses.replace` makes of it (the benchmark's drafter
    # variants), which share its models: one list, of weak references to each.
    family: list[weakref.ref[LoadedPair]] = field(default_factory=list, repr=False, compare=False)
    # The engine's side of this pair (`keep_engine`); never copied to the benchmark's drafter
    # variants (not an argument of `dataclasses.replace`), which prepare their own drafting.
    engine: PairEngine | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.family.append(weakref.ref(self))

    def _siblings(self) -> list[LoadedPair]:
        """This pair and those sharing its models, itself included."""
        return [pair for pair in (ref() for ref in self.family) if pair is not None]

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def keep_engine(self, engine: PairEngine) -> None:
        """Keep `engine`, what the engine made for this pair on its first use
        (`assisted.engine.engine.Engine.of`), with the pair: gone with it."""
        self.engine = engine

    def drafting_precision(self, quant: str) -> str:
        """The precision runs asking for `quant` draft in on this pair's device and dtype
        (`assisted.core.settings.assistant_precision`)."""
        return assistant_precision(quant, self.spec.drafter, self.device.type, self.dtype_name)

    def drafting_assistant(self, precision: str) -> PreTrainedModel | None:
        """The assistant model in `precision` ("none": as loaded; otherwise a quantized
        copy, made once). None for drafters without a model of their own.

        A quantized copy is all that drafts in its precision, so the assistant as loaded is
        released once the copy exists, unless a run has drafted with it: the embedded pair
        on a CPU then holds the int8 assistant alone (docs/space.md#memory). A run that asks
        for it later loads it again and keeps it. Siblings (`family`)
        share all of this: one that still held the assistant would keep it alive."""
        if self.assistant_source is None:
            return None
        with _loaded.lock:
            if precision == "none":
                self.keeps_assistant = True
                return self._assistant_as_loaded()
            if precision not in self.assistant_copies:
                from assisted.models.quantize import quantized_copy

                siblings = self._siblings()
                release = not any(pair.keeps_assistant for pair in siblings)
                # An assistant released after is consumed as it is copied, layer by
                # layer: never held whole beside its copy (the loading peak).
                model = self._assistant_as_loaded()
                copy = quantized_copy(model, precision, consume=release)
                self.assistant_copies[precision] = copy
                if release:
                    for pair in siblings:
                        pair.assistant = None
                    release_memory()
                _loaded.evict_over(MAX_MODEL_GB * 1e9, keep=self)
            return self.assistant_copies[precision]

    def _assistant_as_loaded(self) -> PreTrainedModel:
        if self.assistant is None:
            # Loaded again once, for every sibling that drafts with it.
            drafting = [p for p in self._siblings() if p.assistant_source == self.assistant_source]
            assistant, _ = _load_assistant(
                self.spec,
                self.spec.assistant,
                self.assistant_source,
                self.target,
                self.device,
                self.dtype,
                None,
            )
            for pair in drafting:
                if pair.assistant is None:
                    pair.assistant = assistant
        return self.assistant

    def models(self) -> list[PreTrainedModel]:
        """The models the pair holds: the target, the assistant as loaded (unless released)
        and its quantized copies."""
        models = [self.target, self.assistant, *self.assistant_copies.values()]
        return [model for model in models if model is not None]

    def memory_bytes(self) -> int:
        """Bytes of the weights the pair holds (`models`). Caches live only while a run
        does."""
        from assisted.models.quantize import weights_bytes

        return sum(weights_bytes(model) for model in self.models())

    @property
    def context_length(self) -> int | None:
        config = self.target.config.get_text_config()
        return getattr(config, "max_position_embeddings", None)


def custom_pair(
    target: str, assistant: str | None, drafter: DrafterKind | str | None = None
) -> PairSpec:
    """A pair from user-supplied ids; the drafter kind defaults from what is given."""
    if drafter is None:
        drafter = DrafterKind.ASSISTANT if assistant else DrafterKind.PROMPT_LOOKUP
    try:
        drafter = DrafterKind.parse(drafter)
    except ValueError as error:
        raise PairError(str(error)) from None
    if drafter.has_model and not assistant:
        raise PairError(f"the {drafter.value!r} drafter needs an assistant model id")
    if not drafter.has_model and assistant:
        raise PairError(
            f"the {drafter.value!r} drafter uses no assistant model; drop the assistant id"
        )
    name = f"{target} ← {assistant}" if assistant else f"{target} ({drafter})"
    return PairSpec(name, target, drafter, assistant, "custom pair", early_exit_layer=4)


def get_spec(name: str) -> PairSpec:
    try:
        return PAIRS[name]
    except KeyError:
        raise PairError(f"unknown pair {name!r}; known pairs: {', '.join(PAIRS)}") from None


def resolve_model_ref(ref: str, allow_local: bool = True) -> str:
    """An embedded name (or its Hub id, where its parts are not installed), a local folder
    with a config.json, or a well-formed Hub id."""
    ref = ref.strip()
    if ref in embedded.MODELS:
        return embedded.source(ref)
    path = Path(ref).expanduser()
    if ref and allow_local and path.is_dir():
        if not (path / "config.json").is_file():
            raise PairError(f"{ref!r} is a folder without config.json, not a model folder")
        return str(path.resolve())
    if not _HUB_ID.match(ref) or ".." in ref:
        raise PairError(
            f"{ref!r} is not a model id: expected owner/name as on the Hugging Face Hub"
            + (" or a local model folder" if allow_local else "")
        )
    return ref


# The pairs in memory. Fetching a pair's files comes before loading it and takes no lock,
# so a download holds up no one using the pairs in memory.
_loaded: process_state.LoadedPairs[LoadedPair] = process_state.register(process_state.LoadedPairs())


def load_pair(
    spec: PairSpec,
    device: str = "auto",
    dtype: str = "auto",
    progress: embedded.Progress | None = None,
    allow_local: bool = True,
) -> LoadedPair:
    """Validate, fetch, then load `spec` (cached: at most MAX_LOADED_PAIRS stay in memory)."""
    torch_device = choose_device(device)
    torch_dtype = choose_dtype(torch_device, dtype)
    target_ref = resolve_model_ref(spec.target, allow_local)
    assistant_ref = resolve_model_ref(spec.assistant, allow_local) if spec.assistant else None
    key = (spec, str(torch_device), str(torch_dtype))
    with _loaded.lock:
        if (pair := _loaded.cached(key)) is not None:
            return pair
    # Checked from the configs before anything is evicted, so a bad request costs the pairs
    # in memory nothing.
    sources = fetch_pair(spec, progress, allow_local)

    def build() -> LoadedPair:
        return _load(spec, sources, target_ref, assistant_ref, torch_device, torch_dtype, progress)

    return _loaded.load(key, build, MAX_LOADED_PAIRS, MAX_MODEL_GB * 1e9)


def model_refs(spec: PairSpec, allow_local: bool = True) -> list[str]:
    """The pair's models, resolved (`resolve_model_ref`): its target, then its assistant."""
    models = [spec.target, *([spec.assistant] if spec.assistant else [])]
    return [resolve_model_ref(model, allow_local) for model in models]


def fetching(
    spec: PairSpec, allow_local: bool = True
) -> Generator[tuple[str, float | None], None, dict[str, str]]:
    """Put the pair's files on local disk, checked, without loading them.

    Yields (message, fraction done or None) while a download, a conversion or the pair's
    first check runs, and returns each model's local folder. Files fetched earlier cost
    nothing, and so does a pair checked earlier (`checking`)."""
    refs = model_refs(spec, allow_local)
    if any(fetch.fetched(ref) is None for ref in refs):
        check_sizes(refs, MAX_MODEL_GB)
    sources = {}
    for ref in refs:
        try:
            sources[ref] = str((yield from fetch.fetching(ref, check_config)))
        except PairError:
            raise
        except (OSError, ValueError) as error:
            raise PairError(f"cannot fetch {ref!r}: {first_line(error)}") from error
    yield from checking(spec, [sources[ref] for ref in refs])
    return sources


def disk_too_full_for(spec: PairSpec, allow_local: bool = True) -> str | None:
    """Why fetching `spec` now would leave too little disk (None: it fits): its weight files
    not fetched yet in this process, against the free space of the Hugging Face cache's
    disk less MAX_MODEL_GB, the room kept for the largest pair a visitor may load."""
    refs = model_refs(spec, allow_local)
    needed = sum(weight_files_bytes(ref) for ref in refs if fetch.fetched(ref) is None)
    free = fetch.free_bytes()
    if free - needed >= MAX_MODEL_GB * 1e9:
        return None
    return (
        f"its {needed / 1e9:.1f} GB would leave less than the {MAX_MODEL_GB:g} GB kept for a "
        f"visitor's pair of the {free / 1e9:.1f} GB free"
    )


def fetch_pair(
    spec: PairSpec, progress: embedded.Progress | None = None, allow_local: bool = True
) -> dict[str, str]:
    """`fetching`, blocking: each model's local folder, with progress reported as it comes."""
    steps = fetching(spec, allow_local)
    while True:
        try:
            message, fraction = next(steps)
        except StopIteration as done:
            return done.value
        if progress:
            progress(message, fraction)


def loaded(spec: PairSpec, device: str = "auto", dtype: str = "auto") -> LoadedPair | None:
    """`spec`'s pair if it is in memory for this device and dtype; loads nothing."""
    torch_device = choose_device(device)
    with _loaded.lock:
        return _loaded.cached((spec, str(torch_device), str(choose_dtype(torch_device, dtype))))


def loaded_spec(spec: PairSpec) -> LoadedPair | None:
    """`spec`'s pair if it is in memory, on whatever device; loads nothing and asks torch
    nothing (a ZeroGPU handler thread must not touch CUDA)."""
    with _loaded.lock:
        return next((pair for pair in _loaded.entries.values() if pair.spec == spec), None)


def loaded_pairs() -> list[str]:
    return [pair.spec.name for pair in _loaded.entries.values()]


def memory_in_use() -> int:
    """Bytes of the weights that the pairs in memory hold, a target that pairs share once
    (`LoadedPair.memory_bytes`)."""
    return _loaded.held_bytes()


def _shared_target(
    target_ref: str, device: torch.device, dtype: torch.dtype
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase] | None:
    """The target model and tokenizer of a pair in memory with the same target on the same
    device in the same dtype: pairs that name one target hold one copy of it (call it
    holding the pairs' lock). A run only reads the target: what it sets on it, its hooks and seams,
    it removes when it ends, and runs on one device take turns."""
    for (spec, device_name, dtype_name), pair in _loaded.entries.items():
        same = (device_name, dtype_name) == (str(device), str(dtype))
        if same and resolve_model_ref(spec.target) == target_ref:
            return pair.target, pair.tokenizer
    return None


def _load(
    spec: PairSpec,
    sources: dict[str, str],
    target_ref: str,
    assistant_ref: str | None,
    device: torch.device,
    dtype: torch.dtype,
    progress: embedded.Progress | None,
) -> LoadedPair:
    shared = _shared_target(target_ref, device, dtype)
    target, tokenizer = shared or load_model(
        target_ref, sources[target_ref], device, dtype, progress, offload=True
    )
    assistant = assistant_tokenizer = None
    if assistant_ref:
        assistant, assistant_tokenizer = _load_assistant(
            spec, assistant_ref, sources[assistant_ref], target, device, dtype, progress
        )
    if progress:
        progress(f"Loaded {spec.name}", 1.0)
    source = sources[assistant_ref] if assistant_ref else None
    kept = learnt_store.learnt_file(spec, target_ref, assistant_ref, device, dtype)
    return LoadedPair(
        spec,
        target,
        tokenizer,
        assistant,
        assistant_tokenizer,
        device,
        dtype,
        assistant_source=source,
        learnt=learnt_store.load(kept),
        learnt_file=kept,
    )


def _load_assistant(
    spec: PairSpec,
    ref: str,
    source: str,
    target: PreTrainedModel,
    device: torch.device,
    dtype: torch.dtype,
    progress: embedded.Progress | None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The assistant model, given the target's vocabulary size where it shares the target's
    tokenizer (`assisted.models.vocab`: padded vocabularies)."""
    from assisted.models.vocab import fit_vocabulary

    assistant, tokenizer = load_model(ref, source, device, dtype, progress)
    if not spec.drafter.own_tokenizer:
        fit_vocabulary(assistant, target.config.get_text_config().vocab_size)
    return assistant, tokenizer


def pin(spec: PairSpec) -> None:
    """Keep `spec`'s pairs in memory whatever is loaded later. On ZeroGPU a pair loaded at
    start-up is what every forked GPU call counts on finding, and a reused worker that had
    evicted it would load it again inside a call that asked for no time to load."""
    with _loaded.lock:
        _loaded.pinned.update(key for key in _loaded.entries if key[0] == spec)
