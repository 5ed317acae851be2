"""Checks a pair passes before its weights load, from its configs, tokenizer files and the
sizes of its weight files: what `generate()` or the server's limits would refuse later,
refused while it costs the pairs in memory nothing (`assisted.models.pairs`). Each pair
is checked once per process and its verdict kept (`checking`)."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

from assisted.core.drafters import DrafterKind
from assisted.models import embedded, process_state
from assisted.models.registry import PairError, PairSpec, first_line

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
