"""A benchmark's folder (`--out DIR`), written as the benchmark goes, so that no finished
run is lost to a later error or a Ctrl-C, and read back to make the report again.

- `meta.json`, written as the timed runs start: what the report needs beside the runs.
  `pair`, `device`, `dtype`; `settings` (`RunSettings`) and `repeats`; `variants`, each
  `name`, `drafter` and `draft` (`DraftSettings`); `timed_runs`, how many are planned;
  `overhead_pct` and `assisted_overhead_pct` (null until measured, or not asked for);
  `sampling_check`, the check's result (null until it ends, or not asked for). It is
  replaced whole as each of the last three arrives.
- `runs.jsonl`: one line per timed run (`Run.to_dict`), appended as the run ends, in the
  order they ran; the lines are those of a benchmark written all at once.
- `report.json` and `speedup.png`, once the report is made.

`rebuild(folder)` makes the report again from `meta.json` and `runs.jsonl` alone, without
a model (`python -m assisted.bench --report-from DIR`). From a benchmark that stopped early
the report holds the runs that finished, each prompt pairing the repeats it finished, and
says so in `partial`. `write_out` writes the same runs.jsonl and report at once, for a
command that has its own reasons to write only at the end (`lab.precisions`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from assisted.bench.planning import BenchError, Variant
from assisted.bench.reporting import Run, draw_chart, report
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings

META = "meta.json"
RUNS = "runs.jsonl"


class Journal:
    """The folder a benchmark keeps its runs in as it goes (the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.kept = 0  # timed runs in runs.jsonl
        self._meta: dict = {}

    @property
    def runs_path(self) -> Path:
        return self.folder / RUNS

    def start(
        self,
        info: dict,
        variants: Sequence[Variant],
        settings: RunSettings,
        repeats: int,
        timed_runs: int,
    ) -> None:
        """Make the folder and write `meta.json`; runs.jsonl starts empty. A report left in
        the folder by an earlier benchmark goes, so that it is never read as this one's."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in ("report.json", "speedup.png"):
            (self.folder / name).unlink(missing_ok=True)
        self._meta = {
            **info,
            "settings": dataclasses.asdict(settings),
            "repeats": repeats,
            "variants": [
                {"name": v.name, "drafter": v.drafter, "draft": dataclasses.asdict(v.draft)}
                for v in variants
            ],
            "timed_runs": timed_runs,
            "overhead_pct": None,
            "assisted_overhead_pct": None,
            "sampling_check": None,
        }
        self._write_meta()
        self.runs_path.write_text("", encoding="utf-8")

    def keep(self, run: Run) -> None:
        """Append `run`'s line; the file is closed, and so flushed, before the next run."""
        with open(self.runs_path, "a", encoding="utf-8") as file:
            file.write(run_line(run))
        self.kept += 1

    def note(self, **facts: object) -> None:
        """Record the overheads or the sampling check's result in `meta.json`."""
        self._meta.update(facts)
        self._write_meta()

    def finish(self, result: dict) -> None:
        """Write the report beside the runs."""
        write_report(self.folder, result)

    def kept_line(self) -> str:
        """Where the finished runs are, for a benchmark that ended without its report."""
        return (
            f"{self.kept} run{'' if self.kept == 1 else 's'} kept in {self.runs_path}; "
            f"rebuild the report with python -m assisted.bench --report-from {self.folder}"
        )

    def _write_meta(self) -> None:
        # Replaced whole, never half written: a rebuild must be able to read it.
        staging = self.folder / f".{META}.tmp"
        staging.write_text(
            json.dumps(self._meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        os.replace(staging, self.folder / META)


def rebuild(folder: Path) -> dict:
    """The report of the benchmark kept in `folder`, as `benchmark()` made it (`report`)."""
    folder = Path(folder)
    meta = _read_json(folder / META)
    runs = read_runs(folder / RUNS)
    variants = [
        Variant(v["name"], DrafterKind(v["drafter"]), DraftSettings(**v["draft"]))
        for v in meta["variants"]
    ]
    info = {name: meta[name] for name in ("pair", "device", "dtype")}
    settings = RunSettings(**meta["settings"])
    overheads = meta["overhead_pct"], meta["assisted_overhead_pct"]
    result = report(runs, variants, info, settings, meta["repeats"], *overheads)
    if meta["sampling_check"] is not None:
        result["sampling_check"] = meta["sampling_check"]
    if len(runs) < meta["timed_runs"]:
        result["partial"] = {"timed_runs": len(runs), "planned": meta["timed_runs"]}
    return result


def read_runs(path: Path) -> list[Run]:
    """The runs of a runs.jsonl, in the order they ran."""
    runs = []
    for number, text in enumerate(_read_text(path).splitlines(), 1):
        if text:
            try:
                runs.append(Run.from_dict(json.loads(text)))
            except (ValueError, KeyError, TypeError) as error:
                raise BenchError(f"{path}:{number}: not a run ({error})") from None
    return runs


def run_line(run: Run) -> str:
    """`run`'s line of runs.jsonl."""
    return json.dumps(run.to_dict(), ensure_ascii=False) + "\n"


def write_report(folder: Path, result: dict) -> None:
    """Write report.json and speedup.png into `folder`."""
    (folder / "report.json").write_text(
        json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    draw_chart(result).savefig(folder / "speedup.png", dpi=120)


def write_out(folder: Path, result: dict, runs: Sequence[Run]) -> None:
    """Write runs.jsonl, report.json and speedup.png into `folder`, all or nothing: files
    are made in a temporary folder beside it and moved in once every one is written."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        with open(staging / RUNS, "w", encoding="utf-8") as file:
            file.writelines(run_line(run) for run in runs)
        write_report(staging, result)
        folder.mkdir(exist_ok=True)
        for path in staging.iterdir():
            os.replace(path, folder / path.name)
    finally:
        for path in staging.glob("*"):
            path.unlink()
        staging.rmdir()


def _read_json(path: Path) -> dict:
    try:
        return json.loads(_read_text(path))
    except ValueError as error:
        raise BenchError(f"{path}: not valid JSON ({error})") from None


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise BenchError(f"{path}: no such file; --report-from needs a folder that --out wrote")
    return path.read_text(encoding="utf-8")
