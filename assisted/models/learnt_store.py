"""What the `auto` policy learnt on a pair, kept on disk so that a new process starts from it.

Timing the costs takes seconds (5.6 s for the embedded pair on 2 busy CPU cores,
`assisted.engine.auto`); kept in memory only, each CLI call and each Space restart would pay it
again and start with no acceptance. So a pair reads what earlier processes learnt when it
loads (`assisted.models.pairs`), and every `auto` run writes it back once its clock has stopped
(`assisted.engine.decoding`). A process that lives on while others write (a ZeroGPU worker, forked
from the main process or reused) brings their learning in with `refresh`.

Where: `learnt/` in the cache of the converted models (`assisted.models.embedded.cache_root`), or
the folder ASSISTED_LEARNT_DIR names; ASSISTED_LEARNT_DIR set to "" or "off" keeps nothing
on disk. One file per key, `<pair>-<hash of the key>.json`: model ids hold slashes, so the
hash names the file, and the key is written inside it too, and checked on reading. Deleting
the file resets what that pair learnt on this machine.

The key: the pair (its name, drafter and both model ids, so that custom pairs never share a
file), the machine (`machine`: for a CUDA device its name, compute capability, memory and
the CUDA version; for a CPU its model, the instruction set torch uses and the threads it
runs on: the same CPU given fewer cores verifies slower), the dtype, whether the target
verifies with the few-row product (`loading.use_few_rows_linear`: ASSISTED_CPU_FEW_ROWS,
fp32 on a CPU), and the torch and Transformers versions, whose kernels and generation loop
set the costs. The costs are facts about all of these; the acceptance, per assistant
precision, is already keyed inside the state.

Each save stamps the file with when it was written and with which versions (`written`),
outside the key: a stamp that differs never makes a file unusable.

A file that cannot be read, holds another key or another format version is ignored with a
warning, and the next save replaces it: it costs a calibration, never the loaded models.
Format 3, written without the temperature bands (`assisted.core.settings`), is read: its costs
hold, and its acceptance, which greedy and sampled runs shared, is read as greedy's (most
runs are greedy). Formats 3 and 4 hold T(k) without counts or times, interpolated rows
among them, and no answers: their rows are read as measured, count unknown, and the
calibration retimes those that disagree with the others (`assisted.engine.engine`).
The next save writes format 5.

Several processes write one file, each holding a copy read earlier, so a save never writes
its copy whole (the last writer would undo the others): holding a lock on `<file>.lock`
(`fcntl.flock`; where locking fails, logged once, it saves without), it reads the file,
merges in what this process learnt since it last read or wrote it (the rules:
`assisted.policy.learnt.merge`), writes a temporary file and renames it over the old one (a crash
mid-write leaves the old file whole), and takes the merged state into memory. Temporary
files that crashed writers left are removed once they are `STALE_TMP_S` old. A save that
fails is logged, and the run's result stands.

No torch at import.
"""

from __future__ import annotations

import contextlib
import datetime
import glob
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from assisted.core.record import Calibration
from assisted.models import embedded
from assisted.policy.learnt import LearntState, merge

if TYPE_CHECKING:
    import torch

    from assisted.models.registry import PairSpec

FORMAT_VERSION = 5  # raised when the file's shape changes: older files are then ignored,
_READS = (3, 4, FORMAT_VERSION)  # except these, which `LearntState.from_dict` still reads
_OFF = ("", "off")  # ASSISTED_LEARNT_DIR values that keep nothing on disk
# A writer holds the lock for one small read and write (milliseconds): one that holds it
# longer has hung, and waiting on it would hold the run's result back.
LOCK_TIMEOUT_S = 10.0
# A writer renames its temporary file within milliseconds of making it: one this old was
# left by a writer that crashed.
STALE_TMP_S = 300.0

_log = logging.getLogger(__name__)
_warned: set[Path] = set()  # files whose failed save was logged: once each is enough
_warned_unlocked: set[Path] = set()  # files saved without the lock, logged once each


@dataclass(frozen=True)
class LearntFile:
    """Where one pair's learnt state is kept, and the key it is kept under."""

    path: Path
    key: dict[str, str | None]


def learnt_dir() -> Path | None:
    """The folder of the learnt files; None where nothing is kept on disk."""
    setting = os.environ.get("ASSISTED_LEARNT_DIR")
    if setting is None:
        return embedded.cache_root() / "learnt"
    if setting.strip().lower() in _OFF:
        return None
    return Path(setting).expanduser()


def learnt_file(
    spec: PairSpec,
    target_id: str,
    assistant_id: str | None,
    device: torch.device,
    dtype: torch.dtype,
) -> LearntFile | None:
    """The file of what `spec`, with the models `target_id` and `assistant_id` as resolved,
    learns on `device` in `dtype`; None where nothing is kept on disk."""
    folder = learnt_dir()
    if folder is None:
        return None
    import torch
    import transformers

    from assisted.models.loading import few_rows_linear

    key = {
        "pair": spec.name,
        "drafter": spec.drafter.value,
        "target_id": target_id,
        "assistant_id": assistant_id,
        "machine": machine(device),
        "dtype": str(dtype).removeprefix("torch."),
        "cpu_few_rows": "on" if few_rows_linear(device, dtype) else "off",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name).strip("-.")[:40] or "pair"
    return LearntFile(folder / f"{name}-{digest}.json", key)


def machine(device: torch.device) -> str:
    """What sets the speed of `device`, as far as the costs go: for a CUDA device its name,
    compute capability, memory (a MIG slice has less) and the CUDA version torch was built
    with; for a CPU its model, the instruction set torch uses and its thread count."""
    import torch

    if device.type == "cuda":
        card = torch.cuda.get_device_properties(device)
        memory_mib = card.total_memory // 2**20
        return (
            f"cuda {card.name} capability {card.major}.{card.minor} {memory_mib} MiB "
            f"CUDA {torch.version.cuda}"
        )
    capability = torch.backends.cpu.get_cpu_capability()
    return f"cpu {_cpu_model()} {capability} {torch.get_num_threads()} threads"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    # Elsewhere, or an ARM Linux that names no model: the architecture at least.
    return platform.processor() or platform.machine()


def load(file: LearntFile | None) -> LearntState:
    """What earlier processes learnt under `file`'s key; nothing learnt where there is no
    file or it cannot be used (logged)."""
    state = _read(file)
    state.synced = state.copy()
    return state


def refresh(file: LearntFile | None, state: LearntState) -> None:
    """Bring into `state`, in place, what other processes wrote to `file` since this one
    last read or wrote it, keeping what this process learnt and has not written yet (the
    rules: `assisted.policy.learnt.merge`). A ZeroGPU worker calls it as each GPU call starts, so
    that a fresh fork (holding what the main process read at load) and a reused worker
    (holding what it last wrote) both start from the latest. Nothing where `file` is None;
    a file that cannot be used is ignored (logged), and `state` stays as it is."""
    if file is None:
        return
    disk = _read(file)
    state.adopt(merge(disk, state), synced=disk)


def save(file: LearntFile | None, state: LearntState) -> None:
    """Merge what `state` learnt into `file`, and take what other processes wrote there into
    `state` (the module's note); nothing where `file` is None. A failure is logged (once
    per file), never raised, and leaves `state` as it was."""
    if file is None:
        return
    temporary = None
    try:
        file.path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(file.path):
            _remove_stale_temporaries(file.path)
            merged = merge(_read(file), state)
            stamp = {"version": FORMAT_VERSION, "key": file.key, "written": written()}
            text = json.dumps({**stamp, **merged.to_dict()})
            handle, temporary = tempfile.mkstemp(
                dir=file.path.parent, prefix=f"{file.path.name}.", suffix=".tmp"
            )
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.replace(temporary, file.path)
            state.adopt(merged, synced=merged)
    except OSError as error:
        if temporary is not None:
            with contextlib.suppress(OSError):
                Path(temporary).unlink(missing_ok=True)
        if file.path not in _warned:
            _warned.add(file.path)
            _log.warning("cannot keep what the auto policy learnt in %s: %s", file.path, error)


def written() -> dict[str, str | None]:
    """The stamp of a save: when (ISO 8601, UTC), and with which versions of this project
    (None where it is not installed as a package), torch, Transformers and Python. For
    people reading the file; reading it never checks the stamp (the key decides)."""
    return {
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "assisted": _version("assisted-decoding"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "python": platform.python_version(),
    }


def _version(package: str) -> str | None:
    """The installed version of `package`, read from its metadata (importing nothing)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _read(file: LearntFile | None) -> LearntState:
    """What `file` holds; nothing learnt where there is no file or it cannot be used
    (logged)."""
    if file is None:
        return LearntState()
    try:
        data = json.loads(file.path.read_text())
        if data.get("version") not in _READS:
            raise ValueError(f"format version {data.get('version')!r}, not {FORMAT_VERSION}")
        if data.get("key") != file.key:
            raise ValueError("it was written for another pair, machine or dtype")
        return LearntState.from_dict(data)
    except FileNotFoundError:
        return LearntState()
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        _log.warning(
            "ignoring %s, what the auto policy learnt on an earlier run (%s): this pair "
            "calibrates again, and its next run replaces the file",
            file.path,
            error,
        )
        return LearntState()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Within the block, this process alone reads and writes `path` among those that lock
    it, as long as locking works (`_lock`)."""
    lock = _lock(path)
    try:
        yield
    finally:
        if lock is not None:
            lock.close()  # which releases the lock


def _lock(path: Path) -> IO | None:
    """The lock file beside `path`, open and locked; None where it cannot be locked
    (logged once per file): a save then runs unlocked, and may lose what a writer saving at
    the same moment learnt, never the file itself."""
    try:
        import fcntl  # Unix only
    except ImportError as error:
        return _unlocked(path, error)
    try:
        lock = open(path.with_name(f"{path.name}.lock"), "a")  # noqa: SIM115 (held past here)
    except OSError as error:
        return _unlocked(path, error)
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            error = TimeoutError(f"another writer held the lock for {LOCK_TIMEOUT_S:.0f} s")
        except OSError as failure:  # a file system without locks, as some network ones
            error = failure
        lock.close()
        return _unlocked(path, error)


def _unlocked(path: Path, error: Exception) -> None:
    if path not in _warned_unlocked:
        _warned_unlocked.add(path)
        _log.warning("saving %s without a lock (%s): a concurrent save may be lost", path, error)


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files of `path` that crashed writers left (`STALE_TMP_S`)."""
    stale = time.time() - STALE_TMP_S
    for temporary in path.parent.glob(f"{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):  # removed already, by another writer
            if temporary.stat().st_mtime < stale:
                temporary.unlink()


def calibration(state: LearntState, file: LearntFile | None) -> Calibration:
    """Where the costs of a run starting now came from: "timed" where this process timed a
    cost the pair lacked (its first preparation for `auto`, as a rule), else read from the
    file ("disk"), with what this process timed again of them
    (`assisted.engine.engine.calibrate`)."""
    path = None if file is None else str(file.path)
    timing = state.timed_here()
    source = "timed" if timing.fresh else "disk"
    return Calibration(source, timing.seconds, path, tuple(timing.checked), tuple(timing.corrected))


def describe(calibration: dict | None) -> str | None:
    """One sentence on a run's `calibration` (`stats.summarize`), for people; None without
    one (schedules other than `auto`)."""
    if not calibration:
        return None
    checked = calibration.get("checked") or []
    corrected = calibration.get("corrected") or []
    seconds = calibration["seconds"]
    if calibration["source"] == "disk" and not checked:
        return "Costs loaded from an earlier run on this machine: nothing timed again."
    if calibration["source"] == "disk":
        sentence = (
            f"Costs loaded from an earlier run on this machine, {_listed(checked)} checked "
            f"again in {seconds:.1f} s"
        )
    else:
        kept = ", kept for the next start" if calibration["file"] else ""
        sentence = f"Costs calibrated once on this machine in {seconds:.1f} s{kept}"
        if checked:
            sentence += f"; {_listed(checked)} from an earlier run checked again"
    if corrected:
        sentence += f"; {_listed(corrected)} ran faster now, and replaced the earlier value"
        sentence += "s" if len(corrected) > 1 else ""
    return sentence + "."


def _listed(names: list[str]) -> str:
    """ "T(1)", "T(1) and T(9)", "T(1), T(9) and drafting int8"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
