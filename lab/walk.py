"""`python -m lab.walk --target DIR --assistant DIR`: the files of `assisted/` that a
request enters, traced with `sys.setprofile` in every thread (as
`tests/test_calls_go_down.py` traces a request): a comparison under `auto`, on its first
call (it prepares the pair) and again, and a shoot-out of the first four lanes over two
rounds, on the pair of the two model folders (tiny ones in the tests), on the CPU in fp32.

What a newcomer follows to read one request: fewer files, fewer rooms. `--json` prints the
files themselves.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import assisted
from assisted.bench import shootout
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.models.pairs import LoadedPair, custom_pair, load_pair

PACKAGE = Path(assisted.__file__).resolve().parent
PROMPT = "Write a palindrome check."
SETTINGS = RunSettings(max_new_tokens=8)
AUTO = DraftSettings(schedule="auto", num_assistant_tokens=4)


@contextmanager
def profiled(profile: Callable[..., None]) -> Iterator[None]:
    """`profile` (`sys.setprofile`'s) on every call within the block, in this thread and in
    the threads started within it (a run's worker)."""
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


def entered(request: Callable[[], object]) -> list[str]:
    """The files of `assisted/` (relative to it) whose functions `request` calls, in any
    thread, in the order first entered."""
    found: dict[str, None] = {}
    lock = threading.Lock()

    def profile(frame, event, arg) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        if path.is_absolute() and path.is_relative_to(PACKAGE):
            with lock:
                found.setdefault(str(path.relative_to(PACKAGE)), None)

    with profiled(profile):
        request()
    return list(found)


def walks(pair: LoadedPair) -> dict[str, list[str]]:
    """The files each request enters (the module's note)."""

    def compare() -> None:
        for _ in decoding.compare(pair, PROMPT, SETTINGS, AUTO):
            pass

    def race() -> None:
        lanes = shootout.lanes(pair)[:4]
        for _ in shootout.shootout(pair, PROMPT, SETTINGS, lanes, repeats=2):
            pass

    return {
        "comparison (auto), first": entered(compare),
        "comparison (auto), again": entered(compare),
        "shoot-out (4 lanes, 2 rounds)": entered(race),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.walk", description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="a local model folder")
    parser.add_argument("--assistant", required=True, help="a local model folder")
    parser.add_argument("--json", action="store_true", help="print the files entered")
    args = parser.parse_args(argv)
    pair = load_pair(custom_pair(args.target, args.assistant), device="cpu", dtype="float32")
    found = walks(pair)
    if args.json:
        print(json.dumps(found, indent=1))
        return
    for name, files in found.items():
        print(f"{name}: {len(files)} files of assisted/")


if __name__ == "__main__":
    main()
