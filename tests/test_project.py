"""Project hygiene that a fresh machine or a Space depends on."""

from pathlib import Path

import gradio

ROOT = Path(__file__).resolve().parent.parent


def front_matter() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("---")[1]
    return dict(line.split(":", 1) for line in block.strip().splitlines() if ":" in line)


def test_space_card_pins_the_installed_gradio():
    card = {key.strip(): value.strip() for key, value in front_matter().items()}
    assert card["sdk"] == "gradio"
    assert card["app_file"] == "app.py"
    assert card["sdk_version"] == gradio.__version__


def test_requirements_pin_torch_and_leave_gradio_to_the_space_card():
    lines = [
        line.split("#")[0].strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert "torch==2.13.0" in lines  # an unpinned torch pulls a multi-GB CUDA build
    assert not [line for line in lines if line.split("=")[0] == "gradio"]
    parts = [line for line in lines if "-part" in line]
    assert len(parts) == 22 + 6  # every GGUF part of the embedded pair
