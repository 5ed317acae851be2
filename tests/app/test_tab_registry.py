"""A new tab is a folder and its name in `app.py`'s registry (`assisted.ui.tabs.registry`):
a throwaway fourth tab, written as a folder beside the three and registered by name, is on
the page after them, its endpoint answers through the API, and its GPU call runs in a
forked worker as on ZeroGPU, wrapped by the harness from the registry as `app.py` wraps
every tab's call with `spaces.GPU`."""

from __future__ import annotations

import os
import textwrap

import pytest

gradio_client = pytest.importorskip("gradio_client")

import app  # noqa: E402
import assisted.ui  # noqa: E402
from assisted.models import pairs  # noqa: E402
from assisted.ui.tabs import registry  # noqa: E402
from tests.serve import launch  # noqa: E402
from tests.zerogpu import ZeroGPU  # noqa: E402

# The folder's three files, as a tab's are: its values (the request), its GPU call, its tab.
FORMAT = '''
"""The echo tab's values: its request, a frozen dataclass of plain values, as every call's is."""

from dataclasses import dataclass

from assisted.ui.requests import PairPlace
from assisted.ui.requests import StopFlag


@dataclass(frozen=True)
class EchoRequest:
    pair: PairPlace
    text: str
    stop: StopFlag

    def timed_tokens(self) -> tuple[int, int]:
        return 0, 0

    def drafting_cap(self) -> int:
        return 1
'''
GPU = '''
"""The echo tab's GPU call: the text back, and the process that answered."""

import os


def stream_echo(request):
    yield f"{request.text} from {os.getpid()}"
'''
TAB = '''
"""The echo tab: a text in, the text back from its GPU call."""

import gradio as gr

from assisted.ui.echo.gpu import stream_echo
from assisted.ui.echo.format import EchoRequest
from assisted.ui.requests import PairPlace
from assisted.ui.tabs import Tab


def build_echo_tab(demo, tab, shared, stream):
    config = shared.pairs.config
    place = PairPlace(config.registry[config.default_pair], "cpu", "float32", True)
    text = gr.Textbox(label="Text", elem_id="echo-text")
    answer = gr.Textbox(label="Echo", elem_id="echo-answer")

    def run(value):
        yield from stream(EchoRequest(place, value, shared.stops.open("echo")))

    gr.Button("Echo").click(run, inputs=[text], outputs=[answer], api_name="echo")


TAB = Tab("Echo", "echo", build_echo_tab, stream_echo)
'''


@pytest.fixture
def echo_folder(tmp_path, monkeypatch):
    """The folder `echo/` beside the app's tabs (on `assisted.ui`'s path)."""
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""A throwaway tab."""\n')
    for name, text in (("format", FORMAT), ("gpu", GPU), ("tab", TAB)):
        (folder / f"{name}.py").write_text(textwrap.dedent(text).lstrip())
    monkeypatch.setattr(assisted.ui, "__path__", [*assisted.ui.__path__, str(tmp_path)])
    return folder


def test_a_fourth_tab_is_a_folder_and_its_name_in_the_registry(echo_folder, tiny_dirs):
    tabs = registry("compare", "benchmark", "shootout", "echo")  # app.py's line, one name more
    assert [tab.name for tab in tabs] == [*app.GPU_CALLS, "echo"]
    config = app.AppConfig(
        registry={"tiny": pairs.custom_pair(str(tiny_dirs["target"]), None)},
        default_pair="tiny",
        device="cpu",
        dtype="float32",
        allow_local=True,
        zerogpu=True,
    )
    with pytest.MonkeyPatch.context() as patch:
        zerogpu = ZeroGPU(patch)
        demo, url = launch(config, zerogpu.calls(tabs), tabs)
        try:
            client = gradio_client.Client(url, verbose=False)
            answer = client.predict("hello", api_name="/echo")
        finally:
            demo.close()
    text, _, pid = answer.rpartition(" from ")
    assert text == "hello" and int(pid) != os.getpid()  # a forked worker answered
    assert zerogpu.worker_pids == [int(pid)]
    ids = [block["props"].get("elem_id") for block in demo.get_config_file()["components"]]
    tab_ids = [found for found in ids if found and found.startswith("tab-")]
    assert tab_ids == ["tab-compare", "tab-benchmark", "tab-shootout", "tab-echo"]
