"""`python -m lab.walk` on the tiny pair: each request's files, traced in every thread."""

from __future__ import annotations

import json
import re

from lab import walk


def test_each_request_names_the_files_it_enters(tiny_dirs, capsys):
    arguments = ["--target", str(tiny_dirs["target"]), "--assistant", str(tiny_dirs["other"])]
    walk.main([*arguments, "--json"])
    found = json.loads(capsys.readouterr().out)
    first, again, race = found.values()
    # The run itself, entered in its worker thread; the shoot-out's own module in it alone.
    for files in (first, again):
        assert {"engine/decoding.py", "engine/drafters/seam.py"} <= set(files)
    assert "bench/shootout.py" in race and "bench/shootout.py" not in first
    assert all(not name.startswith("..") for names in found.values() for name in names)
    walk.main(arguments)  # which files depends on the steps the policy chose: counts vary
    lines = capsys.readouterr().out.splitlines()
    assert [line.partition(": ")[0] for line in lines] == list(found)
    pattern = r"[^:]+: \d+ files of assisted/, (\d+) stays, (\d+) returns"
    counts = [re.fullmatch(pattern, line) for line in lines]
    # Every file entered is a stay; a return is a stay in a file entered before.
    assert all(m and int(m[2]) < int(m[1]) for m in counts), lines
    assert all(int(m[1]) >= len(files) for m, files in zip(counts, found.values(), strict=True))
