"""Rehearse a Space's build: resolve requirements.txt as the Space builder installs it, for
the Python the card names (python_version) on Linux x86-64, from PyPI's wheels alone.

The Gradio SDK's build runs `pip install -r requirements.txt`, then installs the card's
Gradio (`gradio[oauth,mcp]==sdk_version`, uvicorn and `spaces`) into the same environment,
so all of them must resolve together. uv reads the packages' metadata only, so the
rehearsal costs seconds, not the wheels' gigabytes. It exits 1, naming each package that
does not fit, where the build would fail.

    python .ci/space_build.py                  # the card's Python
    python .ci/space_build.py --python 3.10.13 # another one, to see what it would refuse
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from uv import find_uv_bin

ROOT = Path(__file__).resolve().parent.parent
# The oldest glibc tag of the wheels the build may pick; Spaces build on Debian, newer.
PLATFORM = "x86_64-manylinux_2_28"


def card() -> dict[str, str]:
    """The README's front matter, key by key (the Space's card)."""
    front = (ROOT / "README.md").read_text().split("---")[1]
    pairs = (line.split(":", 1) for line in front.splitlines() if ":" in line)
    return {key.strip(): value.strip().strip('"') for key, value in pairs}


def builder_lines(sdk_version: str) -> list[str]:
    """What the Space builder installs beside requirements.txt."""
    return [f"gradio[oauth,mcp]=={sdk_version}", "uvicorn>=0.14.0", "spaces"]


def misfits(message: str) -> list[str]:
    """The packages uv names as not fitting the Python, from its explanation."""
    found = re.findall(r"(\S+==\S+) depends on Python\s*(\S+?)[,.]?(?:\s|$)", message)
    return sorted({f"{package} needs Python {needed}" for package, needed in found})


def main() -> int:
    front = card()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=front["python_version"])
    python = parser.parse_args().python
    with tempfile.TemporaryDirectory() as scratch:
        wanted = Path(scratch, "space-build.in")
        wanted.write_text(
            "\n".join(
                ["-r " + str(ROOT / "requirements.txt"), *builder_lines(front["sdk_version"])]
            )
            + "\n"
        )
        done = subprocess.run(
            [
                find_uv_bin(),
                "pip",
                "compile",
                str(wanted),
                "--python-version",
                python,
                "--python-platform",
                PLATFORM,
                "--only-binary",
                ":all:",
                "--no-header",
                "--no-annotate",
                "--quiet",
                "--output-file",
                str(Path(scratch, "resolved.txt")),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        resolved = Path(scratch, "resolved.txt")
        pins = resolved.read_text().splitlines() if done.returncode == 0 else []
    if done.returncode != 0:
        print(f"The Space's build would fail on Python {python}:", file=sys.stderr)
        for line in misfits(done.stderr) or ["(uv names no package; its answer follows)"]:
            print(f"  {line}", file=sys.stderr)
        print(done.stderr.strip(), file=sys.stderr)
        return 1
    torch = next((pin for pin in pins if pin.startswith("torch==")), "no torch")
    print(f"The Space's build resolves on Python {python}: {len(pins)} packages, {torch}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
