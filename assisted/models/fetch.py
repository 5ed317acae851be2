"""Model files onto local disk, apart from loading them into memory.

Fetching a model (a Hub download, or the embedded pair's one-time conversion) can take many
minutes. It needs the network or the disk, and not the device, so a request fetches before it
waits for the device. A visitor watching a download's progress holds up no one who compares
on a pair already in memory.
- One job per model: everyone who asks for a model while it is being fetched waits on the
  same job and sees its progress.
- A job that fails is forgotten, so the next request tries again. A job that every waiter
  has left is cancelled at its next progress report.
- Neither leaves a partial model that looks complete. Downloads go to the Hugging Face cache,
  which lists a snapshot only once all its files are there (huggingface_hub checks them
  against the repository's file list), and a failed download deletes its partial files
  (`*.incomplete`). The embedded conversion builds beside its folder, then renames it.
- A Hub model's config is fetched and checked first, so a model that cannot be used costs
  one small file, not its weights.
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path

from assisted.models import embedded, process_state

ByteProgress = Callable[[int, int], None]
"""Called with the bytes written so far and the bytes expected (0 while unknown)."""
Check = Callable[[str, Path], None]
"""Raises if the model whose config is in the folder cannot be used."""

POLL_S = 1.0  # how often a waiter reports progress, and notices that it should stop waiting
EXIT_WAIT_S = 10.0  # at exit, how long cancelled jobs get to notice and clean up
CONFIG_FILES = ["config.json"]
# What from_pretrained reads from a repository: configs, tokenizer files and the weights, as
# safetensors. A repository without safetensors falls back to pickled .bin weights, which
# Transformers reads with torch.load(weights_only=True).
MODEL_FILES = [
    "*.json",
    "*.safetensors",
    "*.model",
    "*.jinja",
    "*.tiktoken",
    "merges.txt",
    "vocab.txt",
]
PICKLED_WEIGHTS = ["*.bin"]
# Never read by from_pretrained: subfolders (Meta's original/, ONNX and GGUF exports) and
# Mistral's second copy of the weights.
IGNORED = ["*/*", "consolidated.safetensors"]


class FetchCancelled(Exception):
    """Every request that waited for the job has gone."""


@dataclass
class _Job:
    """One model being fetched, and the requests waiting for it."""

    ref: str
    message: str
    fraction: float | None = None
    waiters: int = 0
    folder: Future = field(default_factory=Future)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def report(self, message: str, fraction: float | None) -> None:
        """Progress, from the job's thread; where the job stops once no one waits."""
        if self.cancelled.is_set():
            raise FetchCancelled(f"no request waits for {self.ref} any more")
        self.message, self.fraction = message, fraction


_jobs: dict[str, _Job] = {}
_fetched: dict[str, Path] = {}  # finished jobs: ref → folder
# ZeroGPU forks a GPU worker while fetches may run in other threads (a request's, or the
# start-up's fetch ahead). The child has none of those threads, so their jobs would never
# end there: it starts with none (`process_state`). What was fetched before the fork it keeps.
_fetches = process_state.register(process_state.State("fetches", forget_in_child=_jobs.clear))
_exiting = threading.Event()  # set at exit: no new jobs


def fetching(ref: str, check: Check) -> Generator[tuple[str, float | None], None, Path]:
    """The local folder of `ref` (an embedded name, an absolute folder path or a Hub id).

    Yields (message, fraction done or None) every POLL_S while a job runs, and returns the
    folder. Closing the generator stops waiting; the job goes on while anyone else waits."""
    if os.path.isabs(ref):  # a local folder (validated ids are never absolute paths)
        check(ref, Path(ref))
        return Path(ref)
    while True:
        if (folder := fetched(ref)) is not None:
            return folder
        job = _join(ref, check)
        try:
            while not wait([job.folder], timeout=POLL_S).done:
                yield job.message, job.fraction
        finally:
            _leave(job)
        try:
            return job.folder.result()
        except FetchCancelled:
            continue  # everyone before us left just as we joined: start again


def fetched(ref: str) -> Path | None:
    """The folder of a model fetched earlier in this process, if every file of it is still
    there. On ZeroGPU the start-up packs the preloaded models' weights and deletes the files
    it read them from in the Hugging Face cache (`spaces/zero/torch/patching.py`, `pack`):
    their links in the snapshot folder then lead nowhere, and the model is fetched again."""
    folder = _fetched.get(ref)
    if folder is None or not folder.is_dir():
        return None
    return folder if all(path.exists() for path in folder.iterdir()) else None


def free_bytes() -> int:
    """Free bytes on the disk of the Hugging Face cache (of its nearest folder that exists)."""
    from huggingface_hub import constants

    folder = Path(constants.HF_HUB_CACHE)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def hub_files(repo_id: str, patterns: list[str], progress: ByteProgress) -> Path:
    """The files of `repo_id` that match `patterns`, in the Hugging Face cache, downloaded
    where missing or out of date. On failure, the partial files of the download go."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(
            repo_id,
            allow_patterns=patterns,
            ignore_patterns=IGNORED,
            tqdm_class=_progress_bars(progress),
        )
    except Exception:
        _delete_partial_files(repo_id)
        raise
    return Path(folder)


def _join(ref: str, check: Check) -> _Job:
    with _fetches.lock:
        if _exiting.is_set():
            raise FetchCancelled(f"the program is exiting: {ref} was not fetched")
        job = _jobs.get(ref)
        if job is None:
            job = _jobs[ref] = _Job(ref, f"Fetching {ref}")
            thread = threading.Thread(target=_run, args=(job, check), name=f"fetch {ref}")
            thread.daemon = True  # an exiting program cancels it instead (_cancel_at_exit)
            thread.start()
        job.waiters += 1
        job.cancelled.clear()  # someone waits again: carry on, unless it is too late
        return job


def _leave(job: _Job) -> None:
    with _fetches.lock:
        job.waiters -= 1
        if job.waiters == 0 and not job.folder.done():
            job.cancelled.set()


@atexit.register
def _cancel_at_exit() -> None:
    """Cancel the jobs still running, and give them a moment to delete their partial files.
    Downloads and the assembly of GGUF parts stop at their next progress report; a GGUF
    conversion inside Transformers reports none, and leaves its scratch folder."""
    with _fetches.lock:
        _exiting.set()
        jobs = list(_jobs.values())
    for job in jobs:
        job.cancelled.set()
    wait([job.folder for job in jobs], timeout=EXIT_WAIT_S)


def _run(job: _Job, check: Check) -> None:
    try:
        folder = _fetch(job, check)
    except Exception as error:
        with _fetches.lock:
            del _jobs[job.ref]
        job.folder.set_exception(error)
    else:
        with _fetches.lock:
            _fetched[job.ref] = folder
            del _jobs[job.ref]
        job.folder.set_result(folder)


def _fetch(job: _Job, check: Check) -> Path:
    ref = job.ref
    if ref in embedded.MODELS:
        folder = embedded.converted_dir(embedded.MODELS[ref], job.report)
        check(ref, folder)
        return folder
    config = hub_files(ref, CONFIG_FILES, lambda done, total: job.report(f"Checking {ref}", None))
    check(ref, config)

    def report(done: int, total: int) -> None:
        if total:
            job.report(f"Downloading {ref}: {done / 1e9:.2f} of {total / 1e9:.2f} GB", done / total)
        else:
            job.report(f"Downloading {ref}", None)

    folder = hub_files(ref, MODEL_FILES, report)
    if not any(folder.glob("*.safetensors")):
        folder = hub_files(ref, PICKLED_WEIGHTS, report)
    return folder


class _Discard(io.TextIOBase):
    """Where the progress bars draw: nowhere."""

    def write(self, text: str) -> int:
        return len(text)


def _progress_bars(progress: ByteProgress) -> type:
    """A tqdm class for snapshot_download that draws nothing and reports bytes written.

    huggingface_hub 2.4 keeps two byte bars: bytes received ("Downloading bytes", compressed
    by Xet, against a guessed total) and bytes written, against the files' sizes. Only the
    second reads as a fraction of the download. An exception from `progress` (cancellation)
    ends the download at its next report."""
    from tqdm import tqdm

    class Bars(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "file": _Discard()})

        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            if self.unit == "B" and not str(self.desc).startswith("Downloading bytes"):
                progress(int(self.n), int(self.total or 0))
            return shown

    return Bars


def _delete_partial_files(repo_id: str) -> None:
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    blobs = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
    for partial in (blobs / "blobs").glob("*.incomplete"):
        partial.unlink(missing_ok=True)
