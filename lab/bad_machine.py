"""Reproduce a bad machine: a run of the CLI (a comparison or a shoot-out) or of the
benchmark that starts from a disturbed learnt file, or shares the cores with a busy
neighbour, or both. A free CPU Space is such a machine: the `auto` policy must survive it.

- `--learnt FILE`: a learnt file written elsewhere (its key names another machine:
  `shared/fixtures/learnt-disturbed-epyc-avx512.json` was written while a test job shared a
  2-core AMD EPYC's cores). Its costs, acceptance and answers are carried over to the pair
  of the same name on the machine at hand: written under this machine's key where the pair
  keeps its learnt file, just before the pair first reads it, so the run starts from them
  as a process would that found them on disk, and the calibration checks them as it
  checks any file (`assisted.engine.engine`).
- `--busy`: a neighbour process spinning on one of the two cores from before the models
  load (so through the calibration) to the end of the runs, at the same priority.

Point ASSISTED_LEARNT_DIR at an empty folder to start from nothing but the file given.

    ASSISTED_LEARNT_DIR=$(mktemp -d) python -m lab.bad_machine \\
        --learnt ../shared/fixtures/learnt-disturbed-epyc-avx512.json --busy -- \\
        "Write a Python function that checks whether a string is a palindrome." \\
        --shootout --max-new-tokens 32 --json
    python -m lab.bad_machine --busy --bench -- --categories edit-code --repeats 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from assisted.models import learnt_store


def carried_over(path: Path) -> contextlib.AbstractContextManager:
    """Within the block, the first read of the learnt file of the pair `path`'s key names
    finds `path`'s state there, under this machine's key (the module's note)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    name = data["key"]["pair"]
    load = learnt_store.load

    def load_carried(file: learnt_store.LearntFile | None):
        if file is not None and file.key.get("pair") == name and not file.path.exists():
            file.path.parent.mkdir(parents=True, exist_ok=True)
            file.path.write_text(json.dumps(data | {"key": file.key}), encoding="utf-8")
        return load(file)

    @contextlib.contextmanager
    def patched() -> Iterator[None]:
        learnt_store.load = load_carried
        try:
            yield
        finally:
            learnt_store.load = load

    return patched()


@contextlib.contextmanager
def busy_neighbour() -> Iterator[int]:
    """A process spinning on one core for the block's length (the module's note); its pid."""
    neighbour = multiprocessing.get_context("spawn").Process(target=_spin, daemon=True)
    neighbour.start()
    try:
        yield neighbour.pid
    finally:
        neighbour.terminate()
        neighbour.join()


def _spin() -> None:
    with contextlib.suppress(AttributeError, OSError):  # where affinity cannot be set
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    while True:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.bad_machine",
        description="A CLI or benchmark run on a disturbed learnt file or a busy machine.",
    )
    parser.add_argument("--learnt", type=Path, help="a learnt file to start from")
    parser.add_argument("--busy", action="store_true", help="a neighbour spinning on one core")
    parser.add_argument(
        "--bench", action="store_true", help="run the benchmark (python -m assisted.bench)"
    )
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the run's own arguments")
    args = parser.parse_args(argv)
    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    with contextlib.ExitStack() as stack:
        if args.learnt is not None:
            stack.enter_context(carried_over(args.learnt))
        if args.busy:
            stack.enter_context(busy_neighbour())
        if args.bench:
            from assisted.bench.__main__ import main as run
        else:
            from assisted.cli import main as run
        return run(rest)


if __name__ == "__main__":
    raise SystemExit(main())
