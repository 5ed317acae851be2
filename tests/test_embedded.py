"""The embedded pair's plumbing on fake part packages: locate, verify, cache, rebuild."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from assisted import embedded
from assisted.embedded import EmbeddedModel, EmbeddedModelError

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
    return EmbeddedModel(
        "Fake", "fake_model_part{}", len(PARTS), len(whole), hashlib.sha256(whole).hexdigest()
    )


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
    missing = EmbeddedModel("Fake", "fake_model_part{}", 4, 1, "0" * 64)
    with pytest.raises(EmbeddedModelError, match=r"fake_model_part4.*not installed"):
        missing.part_paths()


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
