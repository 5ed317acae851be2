"""A run only runs: given a ready plan, `decoding.generate_watched` enters few of the
project's modules, and none that prepares a pair or keeps what it learnt. Recorded with
`sys.setprofile` in every thread, the run's worker thread included."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import assisted
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import drain, make_plan
from assisted.engine.engine import Engine, encode_prompt
from assisted.engine.observe import StepObserver
from assisted.models import learnt_store
from assisted.models.pairs import LoadedPair, custom_pair, load_pair
from lab.walk import profiled

PACKAGE = Path(assisted.__file__).resolve().parent
ROOT = PACKAGE.parent
# What prepares a pair (its assistant's precisions) and what keeps what it learnt.
PREPARING_OR_KEEPING = {
    "assisted.models.quantize",
    "assisted.models.learnt_store",
    "assisted.policy.learnt",
}
# The project's modules one greedy assisted run may enter: the watched generate() with its
# clock and its events (modules of their own), the observer, its detokenizer, the seam and
# the drafting path, the record, the drafter kinds and the CPU's linear kernel.
MOST_MODULES = 10
GREEDY = RunSettings(max_new_tokens=16)


@functools.cache
def module_of(filename: str) -> str | None:
    """The project module defined in `filename`; None outside the package."""
    path = Path(filename).resolve()
    if not path.is_relative_to(PACKAGE):
        return None
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@contextmanager
def entered() -> Iterator[set[str]]:
    """The project modules whose functions are called within the block, in any thread."""
    found: set[str] = set()

    def profile(frame, event, arg):
        if event == "call" and (module := module_of(frame.f_code.co_filename)) is not None:
            found.add(module)

    with profiled(profile):  # threads started within the block too: the run's worker
        yield found


@pytest.fixture(scope="module")
def pair(tiny_dirs) -> LoadedPair:
    spec = custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return load_pair(spec, device="cpu", dtype="float32")


def run_entering(
    pair: LoadedPair, mode: str, draft: DraftSettings, settings: RunSettings = GREEDY
) -> set[str]:
    """The modules one run of a ready plan enters."""
    ids = encode_prompt(pair, "def add(a, b):")
    prepared = Engine.of(pair).prepare(draft, settings) if mode == "assisted" else None
    ready = make_plan(pair, ids, mode, settings, prepared)
    with entered() as modules:
        record = drain(decoding.generate_watched(ready))
    assert record.steps
    return modules


def test_a_greedy_assisted_run_enters_at_most_ten_project_modules(pair):
    modules = run_entering(pair, "assisted", pair.spec.draft)
    assert "assisted.engine.decoding" in modules
    assert len(modules) <= MOST_MODULES, sorted(modules)
    assert not modules & PREPARING_OR_KEEPING


AUTO = DraftSettings(num_assistant_tokens=4, schedule="auto")
SAMPLED = RunSettings(max_new_tokens=16, sample=True, temperature=0.8, seed=3)


# The project's modules an `auto` run may enter, greedy or sampled: the watched generate()
# and its observers, as a constant run; the policy that chooses each step (choice, its
# estimates: acceptance, costs and their curve, answers; held back, and the figures it
# prices with) and the sources it chooses between (the candidates' generators, the suffix
# lookup); greedy, the static-cache loop, where its drafts end (`static_draft.DraftEnd`)
# and the end-of-sequence ids it stops at (`models.loading`); sampled, the draft's
# probabilities. Which of them a run enters depends on the steps the
# policy chooses, and so on the machine's timings: the bound is the set, not a count.
AUTO_MODULES = {
    *(f"assisted.core.{m}" for m in ("settings", "record", "cost_curve")),
    *(f"assisted.engine.{m}" for m in ("decoding", "observe")),
    *(f"assisted.engine.drafters.{m}" for m in ("seam", "draft_graphs", "static_draft")),
    *(f"assisted.policy.{m}" for m in ("choice", "estimates")),
    "assisted.models.loading",
}


@pytest.mark.parametrize("settings", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_an_auto_run_enters_only_the_policy_s_and_the_drafters_modules(pair, settings):
    modules = run_entering(pair, "assisted", AUTO, settings)
    assert "assisted.policy.choice" in modules
    assert modules <= AUTO_MODULES, sorted(modules - AUTO_MODULES)


@pytest.mark.parametrize(
    ("mode", "draft", "settings"),
    [
        ("plain", DraftSettings(), GREEDY),
        ("assisted", DraftSettings(num_assistant_tokens=4), GREEDY),
        ("assisted", AUTO, GREEDY),
        ("assisted", AUTO, SAMPLED),
    ],
    ids=["plain", "constant", "auto", "auto-sampled"],
)
def test_a_run_calls_nothing_that_prepares_or_keeps_what_it_learnt(pair, mode, draft, settings):
    """Not the assistant's quantization, nor the learnt state on disk or in memory: its
    callers prepare before it and keep what it learnt after (`assisted.engine.decoding`)."""
    assert run_entering(pair, mode, draft, settings) & PREPARING_OR_KEEPING == set()


def test_the_check_finds_a_planted_call_to_the_learnt_store(pair, monkeypatch):
    """The check itself: a run that reads the learnt state as it ends is caught."""
    flush = StepObserver.flush

    def reading_flush(self):
        learnt_store.calibration(pair.learnt, pair.learnt_file)
        flush(self)

    monkeypatch.setattr(StepObserver, "flush", reading_flush)
    modules = run_entering(pair, "assisted", DraftSettings(num_assistant_tokens=4))
    assert "assisted.models.learnt_store" in modules & PREPARING_OR_KEEPING


def _assigned_pair_fields(tree: ast.AST, fields: set[str]) -> list[str]:
    """Assignments (`=`, `+=`, `setattr`) to an attribute named as one of a pair's `fields`,
    on anything but `self`, where the owner's name says it is a pair or the field's name is
    one only a pair has."""
    common = {"spec", "target", "tokenizer", "assistant", "device", "dtype", "learnt"}

    def of_a_pair(owner: ast.AST, attr: str) -> bool:
        name = ast.unparse(owner)
        return attr in fields and name != "self" and (attr not in common or "pair" in name)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [
                f"{ast.unparse(each)} (line {each.lineno})"
                for target in targets
                for each in ast.walk(target)
                if isinstance(each, ast.Attribute)
                and isinstance(each.ctx, ast.Store)
                and of_a_pair(each.value, each.attr)
            ]
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "setattr":
            owner, name = [*node.args, None, None][:2]
            if isinstance(name, ast.Constant) and of_a_pair(owner, str(name.value)):
                found.append(f"{ast.unparse(node)} (line {node.lineno})")
    return found


def test_a_pair_holds_typed_fields_that_only_the_models_layer_sets():
    """LoadedPair has no untyped field (a bare dict, list or set, or Any), and no module
    outside `assisted/models/` assigns to its fields."""
    import dataclasses

    annotations = {f.name: str(f.type) for f in dataclasses.fields(LoadedPair)}
    untyped = {"dict", "list", "set", "tuple", "Any", "object", "typing.Any"}
    assert [name for name, kind in annotations.items() if kind in untyped] == []
    fields = set(annotations)
    sources = [ROOT / "app.py", *sorted(PACKAGE.rglob("*.py"))]
    outside = [path for path in sources if PACKAGE / "models" not in path.parents]
    wrong = {
        str(path.relative_to(ROOT)): found
        for path in outside
        if (found := _assigned_pair_fields(ast.parse(path.read_text()), fields))
    }
    assert wrong == {}


def test_the_field_scan_finds_a_planted_assignment():
    planted = ast.parse(
        "def f(pair, drafter, run):\n"
        "    pair.learnt = {}\n"
        "    drafter.keeps_assistant = True\n"
        "    run.learnt = None\n"  # not a pair's: a field many objects have
        "    setattr(drafter, 'learnt_file', None)\n"
    )
    fields = {"learnt", "keeps_assistant", "learnt_file"}
    assert _assigned_pair_fields(planted, fields) == [
        "pair.learnt (line 2)",
        "drafter.keeps_assistant (line 3)",
        "setattr(drafter, 'learnt_file', None) (line 5)",
    ]
