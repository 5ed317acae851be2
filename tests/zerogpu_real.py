"""A Space's start on ZeroGPU with `spaces`' real patching, on this CPU: run as a program
(`python -m tests.zerogpu_real SCRATCH`) by `tests/app/test_zerogpu_real.py`, since the
patching holds for the whole process it is imported in.

What `spaces` 0.51 does on a Space runs as it is: importing it patches torch (the fake CUDA
tensors, the guard on every other thread); `python app.py` preloads the offered pairs onto
that emulated device; the launch packs their weights and prunes the files it mapped them
from in the Hugging Face cache (`spaces/zero/torch/patching.py`, `pack`); handler threads
then fetch and check pairs; each GPU call forks a worker, which unpatches torch and moves
the packed weights onto the device before its task (`spaces/zero/wrappers.py`,
`worker_init`). The Hub cache is a scratch folder laid out as the Hub's (SCRATCH/hub).

Stubbed, each for something this machine lacks, and nothing else:
- CUDA, in torch: a CPU build reports no CUDA version and has no `_cuda_init`, and its
  `_is_in_bad_fork` is a lambda, which `spaces`' import-time check cannot pickle into the
  fork it asks it in (`cuda_build`). In a worker, the CPU stands in for the GPU while
  `init` and `move` run: what they copy onto the GPU is copied in memory
  (`cpu_stands_for_the_gpu`);
- ZeroGPU's servers: the scheduler's HTTP calls (`client.schedule`, `release`, `allow`,
  `startup_report`, `duration_warning`), each answered as a free GPU would be;
- the Hub: a download (`fetch.hub_files`) copies the model's files back from SCRATCH/origin;
- Gradio's blocking serve loop, so that the program goes on once the app is launched.

It prints one JSON object, what it saw, as its last line.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import mmap
import runpy
import shutil
import sys
import threading
from pathlib import Path

import torch


def _not_in_bad_fork() -> bool:
    return False


def cuda_build() -> None:
    """What `spaces.zero.torch` reads of a CUDA build of torch, on this CPU build."""
    torch.version.cuda = "12.8"
    torch._C._cuda_init = lambda: None
    torch.cuda._is_in_bad_fork = _not_in_bad_fork


@contextlib.contextmanager
def cpu_stands_for_the_gpu():
    """Copies onto the GPU made in memory, in every thread (the move runs in threads of its
    own): `Tensor.cuda` copies, pinning copies into page-aligned memory (as pinned memory
    is, which the move's direct reads from disk need), tensors asked for on CUDA are made
    on the CPU, and a synchronisation has nothing to wait for."""
    saved = {
        (torch.Tensor, "cuda"): torch.Tensor.cuda,
        (torch.Tensor, "pin_memory"): torch.Tensor.pin_memory,
        (torch, "empty"): torch.empty,
        (torch, "tensor"): torch.tensor,
        (torch.cuda, "synchronize"): torch.cuda.synchronize,
    }
    empty, tensor = torch.empty, torch.tensor

    def on_cpu(kwargs: dict) -> dict:
        return {**kwargs, "device": "cpu"} if "cuda" in str(kwargs.get("device", "")) else kwargs

    torch.Tensor.cuda = lambda self, *args, **kwargs: self.clone()
    torch.Tensor.pin_memory = lambda self, *args, **kwargs: page_aligned(self)
    torch.empty = lambda *args, **kwargs: empty(*args, **on_cpu(kwargs))
    torch.tensor = lambda *args, **kwargs: tensor(*args, **on_cpu(kwargs))
    torch.cuda.synchronize = lambda *args, **kwargs: None
    try:
        yield
    finally:
        for (owner, name), value in saved.items():
            setattr(owner, name, value)


def page_aligned(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` in memory that starts on a page (an anonymous mapping)."""
    pages = mmap.mmap(-1, max(tensor.numel() * tensor.element_size(), 1))
    copy = torch.frombuffer(pages, dtype=tensor.dtype, count=tensor.numel())
    return copy.view(tensor.shape).copy_(tensor)


def stub_servers(scratch: Path, seen: dict) -> None:
    from spaces.zero import client, gradio
    from spaces.zero import torch as zero_torch
    from spaces.zero.api import ScheduleResponse

    from assisted.models import fetch

    def schedule(task_id, request=None, duration=None, gpu_size=None, **kwargs):
        seen["requests_s"].append(duration.total_seconds() if duration is not None else None)
        return ScheduleResponse(idle=True, nvidiaIndex=0, nvidiaUUID="cpu", allowToken="t")

    client.schedule = schedule
    client.release = lambda *args, **kwargs: None
    client.allow = lambda token: None
    client.startup_report = lambda: None
    client.duration_warning = lambda: None
    init, move = zero_torch.init, zero_torch.move

    def init_on_cpu(nvidia_uuid: str) -> None:
        with cpu_stands_for_the_gpu():
            init(nvidia_uuid)

    def move_on_cpu(callback=None) -> None:
        with cpu_stands_for_the_gpu():
            move(callback)

    zero_torch.init, zero_torch.move = init_on_cpu, move_on_cpu

    def download(repo_id: str, patterns: list[str], progress) -> Path:
        seen["downloads"].append(repo_id)
        folder = snapshot(scratch / "hub", repo_id)
        for file in (scratch / "origin" / repo_id).iterdir():
            blob = (folder / file.name).resolve()
            if not blob.exists():
                shutil.copyfile(file, blob)
        return folder

    fetch.hub_files = download
    # Gradio's serve loop: the launch (`spaces` wraps it with its start-up) returns once the
    # server is up.
    gradio.gr.Blocks.block_thread = lambda self: None


COMMIT = "c0ffee"  # the one revision of each model in the scratch Hub cache


def hub_cache(hub: Path, repo_id: str, folder: Path) -> None:
    """`folder`'s files as huggingface_hub caches `repo_id`: blobs named by their hash,
    linked from a snapshot that refs/main names."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    for file in folder.iterdir():
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copyfile(file, repo / "blobs" / digest)
        (snapshot / file.name).symlink_to(Path("../../blobs") / digest)


def snapshot(hub: Path, repo_id: str) -> Path:
    """The snapshot folder of `repo_id` in a Hub cache laid out as huggingface_hub lays it."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    return repo / "snapshots" / (repo / "refs" / "main").read_text().strip()


def main(scratch: Path) -> dict:
    cuda_build()
    seen: dict = {"requests_s": [], "downloads": []}
    import spaces  # the real patching, as on a Space (SPACES_ZERO_GPU is set)
    from spaces.zero.torch import patching

    from assisted.models import registry
    from assisted.models.registry import PairSpec

    stub_servers(scratch, seen)
    registry.PAIRS.clear()  # the pairs the Space offers: the one in the scratch Hub cache
    registry.PAIRS["tiny"] = PairSpec("tiny", "tiny/target", "assistant", "tiny/assistant")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        app = runpy.run_path(str(Path(__file__).parent.parent / "app.py"), run_name="__main__")
    seen["printed"] = printed.getvalue()
    seen["zero_gpu"] = spaces.config.Config.zero_gpu
    pair = app["pairs"].loaded_spec(registry.PAIRS["tiny"])  # on the emulated device
    seen["preloaded_on"] = f"{pair.device.type} {pair.dtype}" if pair else None
    seen["packs"] = len(patching.tensor_packs)
    hub = scratch / "hub"
    seen["pruned"] = sorted(
        str(link.relative_to(hub)) for link in hub.rglob("snapshots/*/*") if not link.exists()
    )
    # After the start, as a visitor's request runs: the handler thread fetches and checks
    # the pair (here a custom one, whose models the start-up preloaded and pruned), then its
    # GPU call loads it in a worker, from disk, and compares on it.
    spec = app["pairs"].custom_pair("tiny/target", "tiny/assistant")
    seen["handler"] = in_a_handler_thread(lambda: handler_request(app, spec))
    app["demo"].close()
    return seen


def in_a_handler_thread(work):
    """What `work` returns, run in a thread of its own, as Gradio runs a handler; or the
    error it raised, as text."""
    result: list = []

    def run() -> None:
        try:
            result.append(work())
        except Exception as error:
            result.append(f"{type(error).__name__}: {error}")

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(240)
    return result[0] if result else "no answer"


def handler_request(app: dict, spec) -> dict:
    """A Compare request's work after the start: the pair fetched and checked, then the GPU
    call (the real `@spaces.GPU` wrapper: a worker forked, its start, the task)."""
    from assisted.core.settings import DraftSettings, RunSettings
    from assisted.ui.compare.format import CompareOutputs, ComparisonRequest
    from assisted.ui.requests import PairPlace

    done: dict = {}
    try:
        torch.zeros(1).to("cuda")
    except Exception as error:  # ZeroGPU emulates CUDA only in the importing thread
        done["cuda_here"] = f"{type(error).__name__}: {error}"
    app["pairs"].fetch_pair(spec, allow_local=False)
    stop = app["_stops"].open("real-patching")
    place = PairPlace(spec, "cpu", "float32", allow_local=False)
    request = ComparisonRequest(
        place, "Say hi.", RunSettings(max_new_tokens=6), DraftSettings(), stop
    )
    outputs = list(app["GPU_CALLS"]["compare"](request))
    finals = [out for out in outputs if isinstance(out, CompareOutputs)]
    result = finals[-1].result if finals else None
    done["identical"] = result["identical"] if result else None
    done["new_tokens"] = result["assisted"]["new_tokens"] if result else None
    return done


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
