"""The project's own imports, read from its source: which of its modules each module (or
test) imports, anywhere in it, and which libraries. Shared by the layer test and by the
torch-free collection in `conftest`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "assisted"
LAB = ROOT / "lab"  # the instruments, outside the package; their tests in lab/tests
OURS = ("assisted", "lab")  # the top-level names of the project's own modules


def module_name(path: Path) -> str:
    if path == ROOT / "app.py":
        return "app"
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> tuple[set[str], set[str]]:
    """The project's modules that `path` imports anywhere in it, and the top-level names of
    the libraries it imports."""
    tree = ast.parse(path.read_text())
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found, libraries = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                ours = target.split(".")[0] in OURS
                (found if ours else libraries).add(target if ours else target.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] not in OURS:
                libraries.add(target.split(".")[0])
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in modules else target)
    found.discard(name)
    return {module for module in found if module in modules}, libraries


def project() -> dict[str, tuple[Path, set[str], set[str]]]:
    """Every module of the app, the package and the lab (its tests aside): its path, the
    project's modules it imports and the libraries it imports."""
    lab = [path for path in sorted(LAB.rglob("*.py")) if "tests" not in path.parts]
    paths = [ROOT / "app.py", *sorted(PACKAGE.rglob("*.py")), *lab]
    modules = {module_name(path) for path in paths}
    return {module_name(path): (path, *imports(path, modules)) for path in paths}


def libraries_reached(path: Path, modules: dict[str, tuple[Path, set[str], set[str]]]) -> set[str]:
    """The libraries that the file at `path` imports, directly or through any project
    module it reaches by any import."""
    _, targets, libraries = (path, *imports(path, set(modules)))
    seen, todo, reached = set(), list(targets), set(libraries)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        _, more, used = modules[module]
        reached |= used
        todo += more
    return reached
