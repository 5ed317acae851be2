"""Project hygiene that a fresh machine or a Space depends on."""

import ast
import re
from pathlib import Path

import gradio

from assisted.drafters import DrafterKind

ROOT = Path(__file__).resolve().parent.parent


def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("---")[1]
    return dict(line.split(":", 1) for line in block.strip().splitlines() if ":" in line)


def test_space_card_pins_the_installed_gradio():
    card = {key.strip(): value.strip() for key, value in front_matter().items()}
    assert card["sdk"] == "gradio"
    assert card["app_file"] == "app.py"
    assert card["sdk_version"] == gradio.__version__


def test_requirements_pin_torch_and_leave_gradio_to_the_space_card():
    lines = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert "torch==2.13.0" in lines  # an unpinned torch pulls a multi-GB CUDA build
    assert not [line for line in lines if line.split("=")[0] == "gradio"]
    parts = [line for line in lines if "-part" in line]
    assert len(parts) == 22 + 6  # every GGUF part of the embedded pair


def _sources() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "assisted").rglob("*.py"))]


def test_no_module_is_over_450_lines_and_no_function_over_80():
    for path in _sources():
        text = path.read_text()
        assert len(text.splitlines()) <= 450, path.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno - node.lineno < 80, f"{path.name}: {node.name}"


def test_drafter_kind_names_are_written_only_where_the_kind_is_defined():
    names = "|".join(re.escape(kind.value) for kind in DrafterKind)
    quoted = re.compile(rf"""["'](?:{names})["']""")
    for path in _sources():
        if path.name != "drafters.py":
            assert not quoted.findall(path.read_text()), path.name


def test_the_lean_loop_imports_nothing_above_it():
    """`assisted.lean` sits under `auto`: its timing entry point lives in `assisted.bench`."""
    tree = ast.parse((ROOT / "assisted" / "lean.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name for name in imported if name.startswith("assisted")} == {"assisted.prefix"}
