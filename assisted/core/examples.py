"""Prompt sets: the `examples/` folder (one text file per prompt, one folder per category)
and JSONL files (one object per line: `category`, `turns`, optional `question_id`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"


class ExamplesError(ValueError):
    """A prompt file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Example:
    question_id: str
    category: str
    prompt: str

    @property
    def label(self) -> str:
        return f"{self.category} / {self.question_id}"


def load_folder(folder: Path = EXAMPLES_DIR) -> list[Example]:
    """`folder/CATEGORY/NAME.txt` → Example(question_id=NAME, category=CATEGORY)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ExamplesError(f"{folder}: not a folder")
    examples = []
    for path in sorted(folder.glob("*/*.txt")):
        prompt = path.read_text(encoding="utf-8").strip()
        if not prompt:
            raise ExamplesError(f"{path}: the prompt file is empty")
        examples.append(Example(path.stem, path.parent.name, prompt))
    if not examples:
        raise ExamplesError(f"{folder}: no prompt files (expected CATEGORY/NAME.txt)")
    return examples


def load_jsonl(path: Path) -> list[Example]:
    """Each line: {"category": str, "turns": [str, ...], "question_id"?: str|int}; the first
    turn is the prompt."""
    path = Path(path)
    examples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ExamplesError(f"{where}: not valid JSON ({error.msg})") from None
        if not isinstance(item, dict):
            raise ExamplesError(f"{where}: expected a JSON object")
        category, turns = item.get("category"), item.get("turns")
        if not isinstance(category, str) or not category:
            raise ExamplesError(f"{where}: 'category' must be a non-empty string")
        if not (
            isinstance(turns, list) and turns and isinstance(turns[0], str) and turns[0].strip()
        ):
            raise ExamplesError(f"{where}: 'turns' must be a list starting with a non-empty string")
        question_id = str(item.get("question_id", f"{path.stem}-{number}"))
        examples.append(Example(question_id, category, turns[0]))
    if not examples:
        raise ExamplesError(f"{path}: no prompts")
    return examples


def load(source: Path) -> list[Example]:
    source = Path(source)
    return load_folder(source) if source.is_dir() else load_jsonl(source)
