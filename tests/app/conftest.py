"""The app tests' shared server: the app on the tiny target drafting for itself."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def self_client(tiny_dirs):
    """A gradio_client on the app serving one pair, "tiny-self": the tiny target as its own
    assistant (every draft accepted), in fp32 on the CPU."""
    import gradio_client

    import app
    from assisted.models import pairs
    from tests.serve import launch

    target = str(tiny_dirs["target"])
    config = app.AppConfig(
        registry={"tiny-self": pairs.custom_pair(target, target)},
        default_pair="tiny-self",
        dtype="float32",
        allow_local=True,
    )
    demo, url = launch(config)
    yield gradio_client.Client(url, verbose=False)
    demo.close()
