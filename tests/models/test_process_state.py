"""What a process keeps between requests has one owner (`assisted.models.process_state`):
every per-process cache registers there, and its one fork handler readies them all for a
child forked, as ZeroGPU forks a GPU worker, while other threads hold their locks."""

from __future__ import annotations

import ast
import os

from assisted.engine import engine
from assisted.models import fetch, pairs, process_state
from tests.imports import project

OWNER = "assisted.models.process_state"


def test_the_caches_register_with_the_owner():
    assert engine and pairs and fetch  # imported: each registered its state
    names = sorted(state.name for state in process_state.STATES)
    assert names == ["fetches", "loaded pairs", "pair checks", "preparations"]


def test_a_forked_child_starts_every_state_afresh():
    """Forked while every lock is held (by the threads a child does not have) and a fetch
    runs: the child takes every lock, has no job running, and keeps the pairs in memory."""
    held = [state.lock for state in process_state.STATES]
    fetch._jobs["owner/model"] = fetch._Job("owner/model", "Fetching owner/model")
    pairs._loaded.entries["kept"] = None
    for lock in held:
        lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if it starts clean
            free = all(state.lock.acquire(timeout=1) for state in process_state.STATES)
            clean = free and not fetch._jobs and "kept" in pairs._loaded.entries
            os._exit(0 if clean else 1)
    finally:
        for lock in held:
            lock.release()
        fetch._jobs.pop("owner/model")
        pairs._loaded.entries.pop("kept")
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def fork_handlers() -> list[str]:
    """The modules of the app and the package that name `register_at_fork`."""
    return sorted(
        name
        for name, (path, _, _) in project().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.Attribute) and node.attr == "register_at_fork")
        or (isinstance(node, ast.Name) and node.id == "register_at_fork")
        or (isinstance(node, ast.alias) and node.name == "register_at_fork")
    )


def test_only_the_owner_registers_a_fork_handler():
    assert fork_handlers() == [OWNER]
