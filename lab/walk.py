"""`python -m lab.walk --target DIR --assistant DIR`: the files of `assisted/` that a
request enters, traced with `sys.setprofile` in every thread (as
`tests/test_calls_go_down.py` traces a request): a comparison under `auto`, on its first
call (it prepares the pair) and again, and a shoot-out of the first four lanes over two
rounds, on the pair of the two model folders (tiny ones in the tests), on the CPU in fp32.

What a newcomer follows to read one request: fewer files, fewer rooms, and fewer returns to
a file already left (each thread's calls followed one by one: a stay is a run of calls in
one file, a return a stay in a file the thread had left before). `--json` prints the files
themselves.
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


def followed(request: Callable[[], object]) -> tuple[list[str], int, int]:
    """What `request` enters of `assisted/`: its files in the order first entered; its
    stays, each a run of consecutive calls into one file, followed call by call in each
    thread; and its returns, the stays in a file that thread had entered and left before."""
    found: dict[str, None] = {}
    latest: dict[int, str] = {}  # each thread's file of its latest call
    visited: dict[int, set[str]] = {}
    counts = {"stays": 0, "returns": 0}
    lock = threading.Lock()

    def profile(frame, event, arg) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        if path.is_absolute() and path.is_relative_to(PACKAGE):
            name = str(path.relative_to(PACKAGE))
            thread = threading.get_ident()
            with lock:
                found.setdefault(name, None)
                if latest.get(thread) != name:
                    counts["stays"] += 1
                    seen = visited.setdefault(thread, set())
                    counts["returns"] += name in seen
                    seen.add(name)
                    latest[thread] = name

    with profiled(profile):
        request()
    return list(found), counts["stays"], counts["returns"]


def walks(pair: LoadedPair) -> dict[str, tuple[list[str], int, int]]:
    """What each request enters (`followed`; the module's note)."""

    def compare() -> None:
        for _ in decoding.compare(pair, PROMPT, SETTINGS, AUTO):
            pass

    def race() -> None:
        lanes = shootout.lanes(pair)[:4]
        for _ in shootout.shootout(pair, PROMPT, SETTINGS, lanes, repeats=2):
            pass

    return {
        "comparison (auto), first": followed(compare),
        "comparison (auto), again": followed(compare),
        "shoot-out (4 lanes, 2 rounds)": followed(race),
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
        print(json.dumps({name: files for name, (files, _, _) in found.items()}, indent=1))
        return
    for name, (files, stays, returns) in found.items():
        print(f"{name}: {len(files)} files of assisted/, {stays} stays, {returns} returns")


if __name__ == "__main__":
    main()
