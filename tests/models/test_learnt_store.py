"""What the `auto` policy learnt, kept on disk: the state comes back from its file as it
was, a new process reads the costs instead of timing them, a file that cannot be used costs
a calibration and nothing else, each pair, machine and dtype has a file of its own, and
"off" keeps nothing."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import logging
import platform
from collections import OrderedDict
from types import SimpleNamespace

import pytest
import torch
import transformers

from assisted.analysis import stats
from assisted.core.record import Calibration, RunRecord
from assisted.core.settings import DrafterKind, DraftSettings, RunSettings
from assisted.engine import decoding, engine
from assisted.engine.decoding import RunDone
from assisted.engine.engine import encode_prompt
from assisted.models import learnt_store, loading, pairs
from assisted.models.learnt_store import LearntFile
from assisted.policy.estimates import WINDOW, Answer
from assisted.policy.learnt import LearntState

AUTO = DraftSettings(num_assistant_tokens=4, schedule="auto", confidence_threshold=0.0)
A, L = DrafterKind.ASSISTANT, DrafterKind.PROMPT_LOOKUP
KEY = {"pair": "p", "machine": "cpu"}


def restart(monkeypatch) -> None:
    """As a new process would: no pair in memory, so the next load reads the file."""
    monkeypatch.setattr(pairs._loaded, "entries", OrderedDict())


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A learnt folder of the test's own, and no pair in memory."""
    monkeypatch.setenv("ASSISTED_LEARNT_DIR", str(tmp_path / "learnt"))
    restart(monkeypatch)
    return tmp_path / "learnt"


def load(tiny_dirs) -> pairs.LoadedPair:
    spec = pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))
    return pairs.load_pair(spec, device="cpu", dtype="float32")


def auto_run(pair: pairs.LoadedPair) -> RunRecord:
    ids = encode_prompt(pair, "def add(a, b):")
    events = decoding.run(pair, ids, "assisted", RunSettings(max_new_tokens=12), AUTO)
    return next(event.record for event in events if isinstance(event, RunDone))


def learnt() -> LearntState:
    state = LearntState(verify_s={1: 0.012, 3: 0.0151, 5: 0.02})
    none = state.precision("none")
    none.draft_s, none.prefill_s = 0.003, 0.0004
    none.acceptance = {
        (A, False, 0): ([1.5, 0.25], [3.0, 1.0]),
        (A, True, 0): ([2.0, 1.9], [2.0, 2.0]),
        (L, False, 2): ([0.0, 0.0], [1.0, 0.0]),
    }
    state.precision("int8").acceptance = {(L, True, 4): ([0.1], [0.2])}  # no costs timed
    none.sampled_draft_s = 0.005
    none.sampled["t<=1"] = {(A, False, 0): ([0.5, 0.1], [3.0, 1.0])}
    return state


def test_a_learnt_state_comes_back_from_its_file_as_it_was(folder):
    file = LearntFile(folder / "p.json", KEY)
    learnt_store.save(file, learnt())
    again = learnt_store.load(file)
    assert again == learnt()
    keys = [key for p in again.precisions.values() for key in p.acceptance]
    assert all(
        type(source) is DrafterKind and type(streak) is bool and type(bucket) is int
        for source, streak, bucket in keys
    )
    # No temporary file left beside it, only the lock that saves take.
    assert sorted(folder.iterdir()) == [file.path, folder / "p.json.lock"]


def test_a_new_process_reads_the_costs_an_earlier_one_timed_and_checks_two_of_them(
    tiny_dirs, folder, monkeypatch
):
    first = load(tiny_dirs)
    record = auto_run(first)
    path = first.learnt_file.path
    assert path.parent == folder and path.is_file()
    assert record.calibration.source == "timed" and record.calibration.seconds > 0
    assert record.calibration.file == str(path) and record.calibration.checked == ()
    # Costs as an undisturbed machine leaves them: on a busy one the run's timings can set
    # T(5) above five T(1), which the next process rightly takes as disturbed and times
    # again, up to three times.
    first.learnt.verify_s.update({1: 1e-3, 2: 1.2e-3, 5: 1.5e-3})
    learnt_store.save(first.learnt_file, first.learnt)

    restart(monkeypatch)
    second = load(tiny_dirs)
    assert second is not first and second.learnt == first.learnt
    on_disk = second.learnt.copy()
    timed = []

    def timing(model, prefix, rows, device):  # 10x slower than the disk: the disk's stand
        timed.append((model is second.target, rows))
        if model is second.target:
            return {k: 10.0 for k in rows}
        kept = on_disk.precision("none")  # the read a little dearer beside drafting
        return {k: 10 * kept.draft_s if k == 1 else 11 * kept.prefill_s * k for k in rows}

    monkeypatch.setattr(engine, "_time_forwards", timing)
    record = auto_run(second)
    record = auto_run(second)  # prepared already: nothing timed again
    # T(1), T(2) and T(cap + 1) of the target, the assistant's drafting row and read: each once.
    assert timed == [(True, [1, 2, 5]), (False, [1, engine._PREFILL_ROWS])]
    checked = ("T(1)", "T(2)", "T(5)", "drafting none", "read none")
    seconds = second.learnt.timed_s
    assert record.calibration == Calibration("disk", seconds, str(path), checked, ())
    assert stats.summarize(record)["calibration"] == {
        "source": "disk",
        "seconds": round(seconds, 2),
        "file": str(path),
        "checked": list(checked),
        "corrected": [],
    }
    # Slower now: the disk's drafting time stands (T(k) the runs refined since).
    assert second.learnt.precision("none").draft_s == on_disk.precision("none").draft_s
    assert learnt_store.load(second.learnt_file) == second.learnt  # saved after the run


GOOD = {"version": learnt_store.FORMAT_VERSION, "key": KEY, **learnt().to_dict()}


def spoilt(**changes) -> str:
    return json.dumps({**GOOD, **changes})


def entry(**changes) -> dict:
    """Precisions whose one acceptance entry is changed."""
    good = {"source": A.value, "streak": False, "match": 0, "accepted": [1.0], "tried": [2.0]}
    return {"none": {"draft_s": None, "prefill_s": None, "acceptance": [{**good, **changes}]}}


def sampled(band: str = "t<=1", sampled_draft_s: object = None, **changes) -> dict:
    """Precisions whose one sampled band, its entry or its drafting time is changed."""
    good = entry(**changes)["none"]["acceptance"]
    none = {"draft_s": None, "prefill_s": None, "acceptance": []}
    return {"none": {**none, "sampled_draft_s": sampled_draft_s, "sampled": {band: good}}}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[]",
        spoilt(version=learnt_store.FORMAT_VERSION + 1),
        spoilt(key={**KEY, "dtype": "bfloat16"}),
        spoilt(verify_s=[[1, float("nan")]]),
        spoilt(verify_s=[[1, 0.0]]),
        spoilt(verify_s=[[0, 0.1]]),
        spoilt(verify_s={"1": 0.1}),
        spoilt(precisions=entry(source="oracle")),
        spoilt(precisions=entry(streak="yes")),
        spoilt(precisions=entry(match=9)),
        spoilt(precisions=entry(tried=[2.0, 1.0])),
        spoilt(precisions=entry(accepted=[-1.0])),
        spoilt(precisions=[]),
        spoilt(version=2),
        spoilt(precisions=sampled(band="t<=2")),
        spoilt(precisions=sampled(sampled_draft_s=-1.0)),
        spoilt(precisions=sampled(match=9)),
    ],
)
def test_a_file_that_cannot_be_used_is_ignored_with_a_warning(folder, caplog, text):
    file = LearntFile(folder / "p.json", KEY)
    folder.mkdir()
    file.path.write_text(text)
    with caplog.at_level(logging.WARNING, logger="assisted.models.learnt_store"):
        assert learnt_store.load(file) == LearntState()
    assert f"ignoring {file.path}" in caplog.text


def test_a_pair_loads_past_a_corrupt_file_and_its_next_run_replaces_it(
    tiny_dirs, folder, monkeypatch, caplog
):
    path = load(tiny_dirs).learnt_file.path
    folder.mkdir()
    path.write_text('{"version": 1, "key": ')  # cut short, as by a full disk
    restart(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="assisted.models.learnt_store"):
        pair = load(tiny_dirs)
    assert "ignoring" in caplog.text and pair.learnt == LearntState()
    assert auto_run(pair).calibration.source == "timed"
    assert learnt_store.load(pair.learnt_file) == pair.learnt


def test_each_pair_machine_and_dtype_has_a_file_of_its_own(folder, monkeypatch):
    spec = pairs.custom_pair("owner/target", "owner/assistant")

    def path(spec=spec, assistant="owner/assistant", device="cpu", dtype=torch.float32):
        device = torch.device(device)
        return learnt_store.learnt_file(spec, "owner/target", assistant, device, dtype).path

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: H200)
    paths = [
        path(),
        path(dtype=torch.bfloat16),
        path(device="cuda"),
        path(pairs.custom_pair("owner/target", "owner/other"), "owner/other"),
        path(pairs.custom_pair("owner/target", None), None),
    ]
    monkeypatch.setattr(torch, "get_num_threads", lambda: 64)  # the same CPU, more cores
    paths.append(path())
    monkeypatch.setattr(learnt_store, "_cpu_model", lambda: "Another CPU")
    paths.append(path())
    assert len(set(paths)) == len(paths)
    assert all(p.parent == folder for p in paths)  # the ids' slashes make no folders
    assert paths[-1] == path()  # the same key, the same file
    machine = learnt_store.machine(torch.device("cpu"))
    assert torch.backends.cpu.get_cpu_capability() in machine
    assert "Another CPU" in machine and "64 threads" in machine


H200 = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=150_000 * 2**20)


def key_of() -> dict:
    spec = pairs.custom_pair("owner/target", "owner/assistant")
    file = learnt_store.learnt_file(
        spec, "owner/target", "owner/assistant", torch.device("cpu"), torch.float32
    )
    return file.key


def test_the_key_holds_the_few_row_product_and_the_versions(folder, monkeypatch):
    base = key_of()
    assert base["cpu_few_rows"] == ("on" if loading.CPU_FEW_ROWS_LINEAR else "off")
    assert (base["torch"], base["transformers"]) == (torch.__version__, transformers.__version__)
    on = loading.CPU_FEW_ROWS_LINEAR
    monkeypatch.setattr(loading, "CPU_FEW_ROWS_LINEAR", not on)  # ASSISTED_CPU_FEW_ROWS=0
    few_rows = key_of()
    monkeypatch.setattr(loading, "CPU_FEW_ROWS_LINEAR", on)
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    newer_torch = key_of()
    assert len({json.dumps(key, sort_keys=True) for key in (base, few_rows, newer_torch)}) == 3
    # The product only ever runs in fp32 on a CPU: elsewhere the setting changes nothing.
    bf16 = learnt_store.learnt_file(
        pairs.custom_pair("t", "a"), "t", "a", torch.device("cpu"), torch.bfloat16
    )
    assert bf16.key["cpu_few_rows"] == "off"


def test_a_cuda_machine_is_its_card_capability_memory_and_cuda_version(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: H200)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    machine = learnt_store.machine(torch.device("cuda"))
    assert machine == "cuda NVIDIA H200 capability 9.0 150000 MiB CUDA 12.8"
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert learnt_store.machine(torch.device("cuda")) != machine
    slice_ = SimpleNamespace(**{**vars(H200), "total_memory": 35_000 * 2**20})  # a MIG slice
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: slice_)
    assert "35000 MiB" in learnt_store.machine(torch.device("cuda"))


def test_a_save_stamps_the_file_outside_the_key(folder, monkeypatch):
    file = LearntFile(folder / "p.json", KEY)
    learnt_store.save(file, learnt())
    data = json.loads(file.path.read_text())
    assert data["key"] == KEY and data["version"] == learnt_store.FORMAT_VERSION
    stamp = data["written"]
    assert set(stamp) == {"at", "assisted", "torch", "transformers", "python"}
    at = datetime.datetime.fromisoformat(stamp["at"])
    assert at.utcoffset() == datetime.timedelta(0)
    assert abs(datetime.datetime.now(datetime.UTC) - at) < datetime.timedelta(minutes=1)
    assert stamp["torch"] == torch.__version__ and stamp["python"] == platform.python_version()
    # Another version's stamp leaves the file usable, and the next save stamps it anew.
    data["written"] = {**stamp, "at": "2020-01-01T00:00:00+00:00", "assisted": "0.0.1"}
    file.path.write_text(json.dumps(data))
    assert learnt_store.load(file) == learnt()
    installed = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "2.99.0" if name == "torch" else installed(name)
    )
    learnt_store.save(file, learnt_store.load(file))
    assert json.loads(file.path.read_text())["written"]["torch"] == "2.99.0"
    assert learnt_store.load(file) == learnt()


def test_the_learnt_folder_is_beside_the_cached_models_unless_set_elsewhere(tmp_path, monkeypatch):
    monkeypatch.delenv("ASSISTED_LEARNT_DIR")
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path))
    assert learnt_store.learnt_dir() == tmp_path / "learnt"
    for off in ("", "off", "OFF"):
        monkeypatch.setenv("ASSISTED_LEARNT_DIR", off)
        assert learnt_store.learnt_dir() is None


def test_with_persistence_off_nothing_is_kept_on_disk(tiny_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("ASSISTED_CACHE", str(tmp_path))
    monkeypatch.setenv("ASSISTED_LEARNT_DIR", "off")
    restart(monkeypatch)
    pair = load(tiny_dirs)
    record = auto_run(pair)
    assert pair.learnt_file is None and pair.learnt.verify_s  # learnt, in memory only
    assert record.calibration.source == "timed" and record.calibration.file is None
    assert list(tmp_path.iterdir()) == []


def test_a_save_that_fails_is_logged_not_raised(tmp_path, caplog):
    (tmp_path / "file").write_text("")
    file = LearntFile(tmp_path / "file" / "p.json", KEY)  # its folder is a file
    with caplog.at_level(logging.WARNING, logger="assisted.models.learnt_store"):
        learnt_store.save(file, learnt())
    assert f"cannot keep what the auto policy learnt in {file.path}" in caplog.text


def test_the_sentence_for_people_says_where_the_costs_came_from():
    timed = {"source": "timed", "seconds": 5.64, "file": "/cache/learnt/p.json"}
    assert learnt_store.describe(timed) == (
        "Costs calibrated once on this machine in 5.6 s, kept for the next start."
    )
    assert learnt_store.describe({**timed, "file": None}).endswith("in 5.6 s.")
    disk = {"source": "disk", "seconds": 0.0, "file": "/cache/learnt/p.json"}
    assert learnt_store.describe(disk) == (
        "Costs loaded from an earlier run on this machine: nothing timed again."
    )
    checked = {**disk, "seconds": 0.43, "checked": ["T(1)", "T(9)"], "corrected": []}
    assert learnt_store.describe(checked) == (
        "Costs loaded from an earlier run on this machine, T(1) and T(9) checked again in 0.4 s."
    )
    corrected = {**checked, "checked": [*checked["checked"], "drafting int8"]}
    corrected["corrected"] = ["T(9)"]
    assert learnt_store.describe(corrected) == (
        "Costs loaded from an earlier run on this machine, T(1), T(9) and drafting int8 "
        "checked again in 0.4 s; T(9) ran faster now, and replaced the earlier value."
    )
    mixed = {**timed, "checked": ["T(1)"], "corrected": ["T(1)"]}
    assert learnt_store.describe(mixed) == (
        "Costs calibrated once on this machine in 5.6 s, kept for the next start; T(1) "
        "from an earlier run checked again; T(1) ran faster now, and replaced the earlier "
        "value."
    )
    assert learnt_store.describe(None) is None


def test_a_format_3_file_is_read_with_its_acceptance_as_greedys(folder):
    """Format 3 kept one acceptance for greedy and sampled runs alike, and no sampled
    drafting time: its costs hold, its acceptance is greedy's, and the next save writes
    format 4 with both."""
    file = LearntFile(folder / "p.json", KEY)
    folder.mkdir()
    format_3 = learnt().to_dict()
    for precision in format_3["precisions"].values():
        del precision["sampled_draft_s"], precision["sampled"]
    file.path.write_text(json.dumps({"version": 3, "key": KEY, **format_3}))
    read = learnt_store.load(file)
    assert read.verify_s == learnt().verify_s
    for name, expected in learnt().precisions.items():
        got = read.precision(name)
        assert (got.draft_s, got.prefill_s) == (expected.draft_s, expected.prefill_s)
        assert got.acceptance == expected.acceptance and got.acceptance
        assert got.sampled == {} and got.sampled_draft_s is None
    learnt_store.save(file, read)
    assert json.loads(file.path.read_text())["version"] == learnt_store.FORMAT_VERSION == 5
    assert learnt_store.load(file) == read


def test_measured_rows_keep_their_count_and_time_and_the_answers_come_back():
    state = LearntState()
    state.keep_verify(3, 0.2, timings=5)
    state.keep_verify(3, 0.21, timings=2)  # a later run: the count adds up
    state.keep_answer(stats_answer := Answer(31, ended=True))
    back = LearntState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert back.verify_s == {3: 0.21} and back.verify_timed[3][0] == 7
    assert back.verify_timed[3][1] > 0 and back.answers == [stats_answer]
    for _ in range(WINDOW + 3):
        state.keep_answer(Answer(8, ended=False))
    assert len(state.answers) == WINDOW  # the latest only


def test_a_format_4_file_is_read_its_rows_without_counts():
    data = {"verify_s": [[1, 0.1], [9, 0.2]], "precisions": {}}
    state = LearntState.from_dict(data)
    assert state.verify_s == {1: 0.1, 9: 0.2} and state.verify_timed == {}
    assert state.answers == []
