"""The embedded pair's plumbing on fake part packages: locate, verify, cache, rebuild."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from assisted.models import embedded, fetch, pairs
from assisted.models.embedded import EmbeddedModel, EmbeddedModelError

PARTS = [b"GGUF first part ", b"second part ", b"and the third"]


@pytest.fixture
def fake_model(tmp_path, monkeypatch) -> EmbeddedModel:
    """Three installed 'part packages' on sys.path, like the PyPI ones."""
    site = tmp_path / "site"
    for number, data in enumerate(PARTS, start=1):
        package = site / f"fake_model_part{number}"
        (package / "data").mkdir(parents=True)
        # Importing a part would run this; locating it must not.
        (package / "__init__.py").write_text("raise RuntimeError('part code was imported')\n")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(PARTS)
    digest = hashlib.sha256(whole).hexdigest()
    return EmbeddedModel("Fake", "fake_model_part{}", len(PARTS), len(whole), digest, "o/fake")


def test_parts_are_located_without_importing_them(fake_model):
    paths = fake_model.part_paths()
    assert [p.name for p in paths] == ["part01.bin", "part02.bin", "part03.bin"]


def test_assemble_verifies_and_concatenates(fake_model, tmp_path):
    seen = []
    out = tmp_path / "model.gguf"
    embedded.assemble(fake_model, out, progress=lambda message, fraction: seen.append(fraction))
    assert out.read_bytes() == b"".join(PARTS)
    assert seen[-1] == 1.0


def test_a_corrupted_part_is_rejected(fake_model, tmp_path):
    part = fake_model.part_paths()[1]
    part.write_bytes(b"second pArt ")  # same size, one byte flipped
    out = tmp_path / "model.gguf"
    with pytest.raises(EmbeddedModelError, match=r"sha256.*reinstall"):
        embedded.assemble(fake_model, out)
    assert not out.exists()  # nothing half-written is left to be loaded later


def test_a_missing_part_package_is_named(fake_model):
    missing = EmbeddedModel("Fake", "fake_model_part{}", 4, 1, "0" * 64, "o/fake")
    with pytest.raises(EmbeddedModelError, match=r"fake_model_part4.*not installed"):
        missing.part_paths()
    assert not missing.installed()


def test_without_its_parts_the_embedded_pair_names_its_hub_checkpoints(fake_model, monkeypatch):
    """As on a Space, whose build installs requirements.txt alone."""
    assert fake_model.installed()
    assert pairs.resolve_model_ref("embedded:target") == "embedded:target"  # parts here
    missing = EmbeddedModel("Fake", "no_such_part{}", 2, 1, "0" * 64, "Qwen/fake-checkpoint")
    monkeypatch.setitem(embedded.MODELS, "embedded:target", missing)
    assert embedded.source("embedded:target") == "Qwen/fake-checkpoint"
    assert pairs.resolve_model_ref("embedded:target") == "Qwen/fake-checkpoint"


def test_cache_root_follows_conventions(monkeypatch, tmp_path):
    for name in ("ASSISTED_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert embedded.cache_root() == Path.home() / ".cache" / "assisted-decoding"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert embedded.cache_root() == tmp_path / "xdg" / "assisted-decoding"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert embedded.cache_root() == tmp_path / "hf" / "assisted-decoding"
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path / "mine"))
    assert embedded.cache_root() == tmp_path / "mine"


def test_conversion_is_cached_and_a_partial_cache_is_rebuilt(fake_model, tmp_path, monkeypatch):
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path / "cache"))
    conversions = []

    def fake_convert(gguf_path: Path, output: Path) -> None:
        conversions.append(gguf_path.read_bytes())
        output.mkdir()
        (output / "model.safetensors").write_bytes(b"weights" * 100)
        (output / "config.json").write_text("{}")

    monkeypatch.setattr(embedded, "_convert", fake_convert)
    folder = embedded.converted_dir(fake_model)
    assert conversions == [b"".join(PARTS)]
    assert embedded.converted_dir(fake_model) == folder  # second start: no conversion
    assert len(conversions) == 1

    # A truncated weights file (an interrupted copy, a full disk) is detected and rebuilt.
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:10])
    assert embedded.converted_dir(fake_model) == folder
    assert len(conversions) == 2
    assert weights.stat().st_size == 700

    # No leftovers from building beside the final folder.
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


def test_a_failed_conversion_leaves_no_folder_that_looks_complete(
    fake_model, tmp_path, monkeypatch
):
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path / "cache"))

    def broken_convert(gguf_path: Path, output: Path) -> None:
        output.mkdir()
        (output / "config.json").write_text("{}")
        raise RuntimeError("out of memory")

    monkeypatch.setattr(embedded, "_convert", broken_convert)
    with pytest.raises(RuntimeError, match="out of memory"):
        embedded.converted_dir(fake_model)
    assert list((tmp_path / "cache").iterdir()) == []


GGUF_QUANTIZATION = {"dequantize": False, "gguf_file": "model.gguf", "quant_method": "gguf"}


def stale_config(folder: Path) -> None:
    """A saved config that still names GGUF: its quantization_config, over plain weights."""
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps({**config, "quantization_config": GGUF_QUANTIZATION}, indent=2)
    )


def test_conversion_saves_a_config_without_the_gguf_quantization(fake_model, tmp_path, monkeypatch):
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path / "cache"))

    def convert_like_transformers(gguf_path: Path, output: Path) -> None:
        output.mkdir()
        (output / "model.safetensors").write_bytes(b"weights")
        (output / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
        stale_config(output)

    monkeypatch.setattr(embedded, "_convert", convert_like_transformers)
    folder = embedded.converted_dir(fake_model)
    assert json.loads((folder / "config.json").read_text()) == {"model_type": "qwen2"}
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "converted.json",
        "model.safetensors",
    ]


def test_a_stale_cache_is_repaired_in_place_without_converting_again(
    fake_model, tmp_path, monkeypatch
):
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path / "cache"))
    folder = cache_of_an_earlier_version(fake_model, source=None)

    def refuse(gguf_path: Path, output: Path) -> None:
        raise AssertionError("converted again")

    monkeypatch.setattr(embedded, "_convert", refuse)
    assert embedded.converted_dir(fake_model) == folder
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "qwen2"
    assert embedded._is_complete(folder)  # the marker follows the new config.json
    assert embedded.converted_dir(fake_model) == folder  # and the next start agrees


def test_loading_the_cached_pair_logs_no_gguf_warning(
    fake_model, tiny_dirs, tmp_path, monkeypatch, transformers_messages
):
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path / "cache"))
    folder = cache_of_an_earlier_version(fake_model, source=tiny_dirs["target"])
    messages = transformers_messages
    # The premise, pinned: Transformers 5.23 takes such a folder for a packed GGUF checkpoint.
    AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    assert any("GGUF" in message for message in messages)

    messages.clear()
    monkeypatch.setitem(embedded.MODELS, "embedded:target", fake_model)
    monkeypatch.setattr(pairs._loaded, "entries", OrderedDict())
    monkeypatch.setattr(fetch, "_fetched", {})  # the real embedded pair is not this one
    spec = pairs.PairSpec("embedded-test", "embedded:target", "prompt-lookup")
    pair = pairs.load_pair(spec, device="cpu", dtype="bfloat16")
    assert pair.dtype == torch.bfloat16
    assert not [message for message in messages if "GGUF" in message]


def cache_of_an_earlier_version(model: EmbeddedModel, source: Path | None) -> Path:
    """A complete cache folder whose config still names GGUF: the stale key, and a marker
    recording the stale config's size. `source`: a model folder to copy, else a stub."""
    folder = embedded.cache_root() / f"{model.name}-{model.sha256[:12]}"
    if source is None:
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"weights")
        (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    else:
        shutil.copytree(source, folder)
    stale_config(folder)
    files = {p.name: p.stat().st_size for p in folder.iterdir()}
    (folder / "converted.json").write_text(json.dumps({"sha256": model.sha256, "files": files}))
    return folder


@pytest.fixture
def transformers_messages():
    """Every message Transformers logs during the test (its loggers do not propagate)."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect()
    logging.getLogger("transformers").addHandler(handler)
    yield messages
    logging.getLogger("transformers").removeHandler(handler)


def test_a_dtype_copy_holds_exactly_the_weights_from_pretrained_would_cast(
    tiny_dirs, tmp_path, monkeypatch
):
    folder = tmp_path / "Tiny-0123456789ab"
    shutil.copytree(tiny_dirs["target"], folder)
    monkeypatch.setattr(embedded, "_SHARD_BYTES", 40_000)  # several shards from a tiny model
    copy = embedded.in_dtype(folder, "bfloat16")
    assert copy == tmp_path / "Tiny-0123456789ab-bfloat16"
    shards = sorted(copy.glob("model-*.safetensors"))
    assert len(shards) > 1 and (copy / "model.safetensors.index.json").is_file()
    direct = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    mapped = AutoModelForCausalLM.from_pretrained(copy, dtype=torch.bfloat16)
    expected, got = direct.state_dict(), mapped.state_dict()
    assert got.keys() == expected.keys()
    assert all(got[k].dtype == torch.bfloat16 and torch.equal(got[k], expected[k]) for k in got)
    # Made once: a second load finds it whole; a damaged copy is made again.
    stamp = shards[0].stat().st_mtime_ns
    assert embedded.in_dtype(folder, "bfloat16") == copy
    assert shards[0].stat().st_mtime_ns == stamp
    shards[0].write_bytes(b"torn")
    assert embedded.in_dtype(folder, "bfloat16") == copy and embedded._is_complete(copy)
    assert embedded.in_dtype(folder, "float32") == folder  # float32 is the conversion itself
