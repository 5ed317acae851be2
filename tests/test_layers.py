"""The package's layers: each folder of `assisted/` imports only the layers below it, no
module imports the lab, and no import cycle joins the project's modules. Inside a layer:
no tab's folder imports another's, and the drafters import nothing of the engine beyond
themselves.

Every import counts, wherever it stands: at module level, inside a function, or under
TYPE_CHECKING. A function-level import still ties the two modules' designs together.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.imports import PACKAGE, ROOT, project

TOP = "top"  # the modules directly in assisted/: the CLI and its options

# What each layer may import, besides itself.
ALLOWED = {
    "core": set(),
    "policy": {"core"},
    "analysis": {"core"},
    "models": {"core", "policy"},
    "engine": {"core", "policy", "analysis", "models"},
    "bench": {"core", "policy", "analysis", "models", "engine"},
    "ui": {"core", "policy", "analysis", "models", "engine", "bench"},
    TOP: {"core", "policy", "analysis", "models", "engine", "bench"},
    "lab": {"core", "policy", "analysis", "models", "engine", "bench", "ui", TOP},
    "app": {"core", "policy", "analysis", "models", "engine", "bench", "ui"},
}
# Layers whose modules may not import these libraries at all, even inside a function.
NO_LIBRARIES = {
    "core": {"torch", "transformers", "numpy", "gradio"},
    "policy": {"torch", "transformers", "numpy", "gradio"},
    "analysis": {"torch", "transformers", "gradio"},
}


def layer(module: str) -> str:
    if module == "app":
        return "app"
    if module.split(".")[0] == "lab":
        return "lab"  # outside the package: `lab/`
    parts = module.split(".")
    if len(parts) == 1 or (PACKAGE / parts[1]).is_file() or (PACKAGE / f"{parts[1]}.py").exists():
        return TOP
    return parts[1]


def is_entry_point(tree: ast.Module) -> bool:
    """A module run with `python -m` (it ends with `if __name__ == "__main__"`): it sits at
    the top whatever its folder, so it may read the CLI's options."""
    return any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body
    )


def back_arrows(graph: dict[str, set[str]], entry_points: set[str]) -> list[str]:
    """Every import that leaves its layer for one it may not import."""
    wrong = []
    for module, targets in graph.items():
        allowed = ALLOWED[layer(module)] | {layer(module)}
        if module in entry_points:
            allowed = allowed | {TOP}
        wrong += [f"{module} -> {t}" for t in sorted(targets) if layer(t) not in allowed]
    return wrong


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def entry_points(modules: dict[str, tuple[Path, set[str], set[str]]]) -> set[str]:
    return {
        name
        for name, (path, _, _) in modules.items()
        if is_entry_point(ast.parse(path.read_text()))
    }


def test_every_import_goes_down_the_layers():
    modules = project()
    graph = {name: targets for name, (_, targets, _) in modules.items()}
    assert back_arrows(graph, entry_points(modules)) == []


def test_nothing_in_the_product_imports_the_lab():
    for name, (_, targets, _) in project().items():
        if layer(name) != "lab":
            assert not [t for t in targets if layer(t) == "lab"], name


def test_no_import_cycle_joins_the_project_s_modules():
    assert cycles({name: targets for name, (_, targets, _) in project().items()}) == []


def test_the_lower_layers_import_no_heavy_library():
    for name, (_, _, libraries) in project().items():
        assert not libraries & NO_LIBRARIES.get(layer(name), set()), name


def test_the_checks_find_a_planted_back_arrow_and_cycle():
    """The checks themselves: an arrow up the layers, and a loop, planted in the real graph."""
    modules = project()
    graph = {name: set(targets) for name, (_, targets, _) in modules.items()}
    graph["assisted.analysis.stats"].add("assisted.engine.decoding")
    assert back_arrows(graph, entry_points(modules)) == [
        "assisted.analysis.stats -> assisted.engine.decoding"
    ]
    assert ["assisted.analysis.stats", "assisted.engine.decoding"] in [
        [m for m in cycle if m in ("assisted.analysis.stats", "assisted.engine.decoding")]
        for cycle in cycles(graph)
    ]


def test_the_figures_load_no_torch_transformers_numpy_or_gradio():
    """Imported alone, in a fresh process, the figures bring none of the heavy libraries."""
    probe = (
        "import sys, assisted.analysis.stats, assisted.analysis.divergence;"
        "print(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'torch', 'transformers', 'numpy', 'gradio'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_at_most_six_modules_stand_directly_in_the_package():
    assert len(list(PACKAGE.glob("*.py"))) <= 6
    for folder in ALLOWED:
        if folder not in (TOP, "app", "lab"):  # the lab stands outside the package
            init = PACKAGE / folder / "__init__.py"
            assert ast.get_docstring(ast.parse(init.read_text())), folder


# The engine's modules that code outside it imports (its `__init__` names them); the rest
# are the engine's own. The lab, which times the engine's insides, may import any.
ENGINE_PUBLIC = {f"assisted.engine.{module}" for module in ("decoding", "engine")}


def engine_reaches(graph: dict[str, set[str]]) -> list[str]:
    """Every import from outside the engine (the lab aside) of an engine module that is not
    one of its public ones, the engine's package itself included."""
    return [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if layer(module) not in ("engine", "lab")
        for target in sorted(targets)
        if layer(target) == "engine" and target not in ENGINE_PUBLIC
    ]


def test_callers_outside_the_engine_use_its_public_modules():
    graph = {name: targets for name, (_, targets, _) in project().items()}
    assert engine_reaches(graph) == []


def test_callers_outside_the_engine_use_its_public_names():
    """Outside `assisted.engine`, code imports its public modules' public names, never a
    private helper (a leading underscore), nor reaches one through a module (`decoding._x`)."""
    engine_modules = {p.stem for p in (PACKAGE / "engine").rglob("*.py")} - {"__init__"}
    private = []
    for name, (path, _, _) in project().items():
        if name.startswith("assisted.engine"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "assisted.engine"
            ):
                private += [
                    f"{name}: {node.module}.{a.name}" for a in node.names if a.name[0] == "_"
                ]
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                value = ast.unparse(node.value)
                if value in engine_modules:
                    private.append(f"{name}: {value}.{node.attr}")
    assert not private


def test_the_engine_s_package_exports_nothing():
    """The engine's `__init__` is its docstring: callers import its modules."""
    tree = ast.parse((PACKAGE / "engine" / "__init__.py").read_text())
    assert [type(node).__name__ for node in tree.body] == ["Expr"]


# Public names that more than one module of the product defines, each kept because it means
# the same thing in each (or is a convention every such module follows). Any other shared name
# is two meanings under one word: rename one.
SHARED_NAMES = {
    "main": "each command's entry point",
    "parse_args": "each command's options, read",
    "check": "refuse settings before anything runs (a run's, a shoot-out's)",
    "report": "the JSON of a thing for its readers (a comparison, a benchmark, the oracle)",
    "render": "a JSON result as a card for people (a benchmark's, a shoot-out's)",
    "describe": "one sentence on a finding, for people",
    "card_lines": "a finding's lines on the CLI's card",
    "sentence": "a finding in one sentence",
    "explain": "why something happened, in words for a visitor",
    "refresh": "bring in what other processes kept: a pair's state, from its file",
    "fetching": "put files on disk, yielding progress: a model's, a pair's",
    "output_components": "a tab's output components, in the order its handlers yield",
    "run_settings": "the run's settings, read from a caller's inputs",
    "prompt_fields": "a prompt's fields in a result's rows",
    "replay": "a recorded run played again (the oracle's schedule, the Compare tab's race)",
    "Estimate": "a figure before it is measured, with where it comes from",
    "Verdict": "a check's outcome and why",
}


def shared_names() -> dict[str, list[str]]:
    """Public functions and classes defined at the top of more than one product module
    (the lab's experiments aside), and where."""
    owners: dict[str, list[str]] = {}
    for name, (path, _, _) in project().items():
        if name == "app" or layer(name) == "lab":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                owners.setdefault(node.name, []).append(name)
    return {n: modules for n, modules in owners.items() if len(modules) > 1}


def test_no_two_public_names_share_a_word_unless_they_mean_one_thing():
    assert sorted(set(shared_names()) - set(SHARED_NAMES)) == []


def test_every_shared_name_kept_is_still_shared():
    """An allowance for a name no longer shared goes, so the list stays the truth."""
    assert sorted(set(SHARED_NAMES) - set(shared_names())) == []


def tab_folders() -> set[str]:
    """The app's tabs: each folder in `assisted/ui/` is one (`compare`, `benchmark`, ...)."""
    return {path.parent.name for path in (PACKAGE / "ui").glob("*/__init__.py")}


def tab_of(module: str) -> str | None:
    """The tab folder `module` belongs to, or None outside every tab."""
    parts = module.split(".")
    return (
        parts[2]
        if parts[:2] == ["assisted", "ui"] and len(parts) > 2 and parts[2] in tab_folders()
        else None
    )


def tab_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Every import from one tab's folder into another's, and from what the tabs share in
    `ui/` into any tab's (through which one tab would reach another)."""
    crossings = []
    for module, targets in graph.items():
        if layer(module) != "ui":
            continue
        crossings += [
            f"{module} -> {target}"
            for target in sorted(targets)
            if tab_of(target) is not None and tab_of(target) != tab_of(module)
        ]
    return crossings


def test_tab_folders_never_import_each_other():
    graph = {name: targets for name, (_, targets, _) in project().items()}
    assert tab_crossings(graph) == []


DRAFTERS = "assisted.engine.drafters"
# What the drafters may import besides themselves (`drafters/__init__`): the engine's other
# modules import them, never the other way round.
DRAFTERS_MAY_IMPORT = {"core", "policy", "models"}


def drafters_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from `engine/drafters/` of the project outside what it may import."""
    return [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith(DRAFTERS)
        for target in sorted(targets)
        if not target.startswith(DRAFTERS) and layer(target) not in DRAFTERS_MAY_IMPORT
    ]


def test_the_drafters_import_nothing_of_the_engine_beyond_themselves():
    graph = {name: targets for name, (_, targets, _) in project().items()}
    assert drafters_imports(graph) == []


# The drafters' modules that the rest of the project may import (`drafters/__init__`); the
# lab, which times the drafting loops themselves, may import any.
DRAFTERS_SEAM = {f"{DRAFTERS}.{module}" for module in ("seam", "draft_graphs")}


def drafters_reached(graph: dict[str, set[str]]) -> list[str]:
    """Every import from outside `engine/drafters/` (the lab aside) of a drafters module
    beyond the seam's, the package itself included."""
    return [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not module.startswith(DRAFTERS) and layer(module) != "lab"
        for target in sorted(targets)
        if target.startswith(DRAFTERS) and target not in DRAFTERS_SEAM
    ]


def test_the_drafters_are_imported_only_through_their_seam():
    graph = {name: targets for name, (_, targets, _) in project().items()}
    assert drafters_reached(graph) == []


def test_the_checks_find_a_planted_tab_crossing_and_drafters_import():
    """The checks above, on the real graph with one wrong import planted in each."""
    graph = {name: set(targets) for name, (_, targets, _) in project().items()}
    graph["assisted.ui.shootout.format"].add("assisted.ui.compare.format")
    graph["assisted.ui.tabs"].add("assisted.ui.benchmark.tab")
    graph[f"{DRAFTERS}.static_draft"].add("assisted.engine.engine")
    graph["assisted.engine.decoding"].add(f"{DRAFTERS}.lean")
    graph["assisted.ui.compare.live"].add(f"{DRAFTERS}.draft_graphs")
    graph["assisted.bench.measuring"].add("assisted.engine.observe")
    graph["lab.lean_timing"].add(f"{DRAFTERS}.static_draft")
    assert tab_crossings(graph) == [
        "assisted.ui.shootout.format -> assisted.ui.compare.format",
        "assisted.ui.tabs -> assisted.ui.benchmark.tab",
    ]
    assert drafters_imports(graph) == [f"{DRAFTERS}.static_draft -> assisted.engine.engine"]
    assert drafters_reached(graph) == [f"assisted.engine.decoding -> {DRAFTERS}.lean"]
    assert engine_reaches(graph) == [
        "assisted.bench.measuring -> assisted.engine.observe",
        f"assisted.ui.compare.live -> {DRAFTERS}.draft_graphs",
    ]
