"""What the `auto` policy learnt on a pair, kept on disk so that a new process starts from it.

Timing the costs takes seconds (5.6 s for the embedded pair on 2 busy CPU cores,
`assisted.auto`); kept in memory only, each CLI call and each Space restart would pay it
again and start with no acceptance. So a pair reads what earlier processes learnt when it
loads (`assisted.pairs`), and every `auto` run writes it back once its clock has stopped
(`assisted.decoding`).

Where: `learnt/` in the cache of the converted models (`assisted.embedded.cache_root`), or
the folder ASSISTED_LEARNT_DIR names; ASSISTED_LEARNT_DIR set to "" or "off" keeps nothing
on disk. One file per key, `<pair>-<hash of the key>.json`: model ids hold slashes, so the
hash names the file, and the key is written inside it too, and checked on reading. Deleting
the file resets what that pair learnt on this machine.

The key: the pair (its name, drafter and both model ids, so that custom pairs never share a
file), the machine (for a CUDA device its name; for a CPU its model, the instruction set
torch uses and the threads it runs on: the same CPU given fewer cores verifies slower) and
the dtype. The costs are facts about that machine and dtype; the acceptance, per assistant
precision, is already keyed inside the state.

A file that cannot be read, holds another key or another format version is ignored with a
warning, and the next save replaces it: it costs a calibration, never the loaded models. A
save writes a temporary file and renames it over the old one, so that a crash mid-write
leaves the old file whole; a save that fails is logged, and the run's result stands.

No torch at import.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from assisted import embedded
from assisted.learnt import LearntState
from assisted.record import Calibration

if TYPE_CHECKING:
    import torch

    from assisted.registry import PairSpec

FORMAT_VERSION = 2  # raised when the file's shape changes: older files are then ignored
_OFF = ("", "off")  # ASSISTED_LEARNT_DIR values that keep nothing on disk

_log = logging.getLogger(__name__)
_warned: set[Path] = set()  # files whose failed save was logged: once each is enough


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
    key = {
        "pair": spec.name,
        "drafter": spec.drafter.value,
        "target_id": target_id,
        "assistant_id": assistant_id,
        "machine": machine(device),
        "dtype": str(dtype).removeprefix("torch."),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name).strip("-.")[:40] or "pair"
    return LearntFile(folder / f"{name}-{digest}.json", key)


def machine(device: torch.device) -> str:
    """What sets the speed of `device`, as far as the costs go."""
    import torch

    if device.type == "cuda":
        return f"cuda {torch.cuda.get_device_name(device)}"
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
    if file is None:
        return LearntState()
    try:
        data = json.loads(file.path.read_text())
        if data.get("version") != FORMAT_VERSION:
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


def save(file: LearntFile | None, state: LearntState) -> None:
    """Keep `state` in `file`, replacing what was there at once; nothing where `file` is
    None. A failure is logged (once per file), never raised."""
    if file is None:
        return
    text = json.dumps({"version": FORMAT_VERSION, "key": file.key, **state.to_dict()})
    temporary = None
    try:
        file.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=file.path.parent, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(temporary, file.path)
    except OSError as error:
        if temporary is not None:
            with contextlib.suppress(OSError):
                Path(temporary).unlink(missing_ok=True)
        if file.path not in _warned:
            _warned.add(file.path)
            _log.warning("cannot keep what the auto policy learnt in %s: %s", file.path, error)


def calibration(state: LearntState, file: LearntFile | None) -> Calibration:
    """Where the costs of a run starting now came from: timed by this process (the pair's
    first `auto` run, a comparison's warm-up as a rule) or read from the file."""
    path = None if file is None else str(file.path)
    if state.timed_s > 0:
        return Calibration("timed", state.timed_s, path)
    return Calibration("disk", 0.0, path)


def describe(calibration: dict | None) -> str | None:
    """One sentence on a run's `calibration` (`stats.summarize`), for people; None without
    one (schedules other than `auto`)."""
    if not calibration:
        return None
    if calibration["source"] == "disk":
        return "Costs loaded from an earlier run on this machine: nothing timed again."
    kept = ", kept for the next start" if calibration["file"] else ""
    return f"Costs calibrated once on this machine in {calibration['seconds']:.1f} s{kept}."
