"""Serving the app in a test: one launch helper for the HTTP, benchmark and browser tests."""

from __future__ import annotations

from collections.abc import Mapping

import gradio as gr

import app


def launch(
    config: app.AppConfig, gpu: Mapping[str, app.GpuWork] = app.GPU_CALLS, tabs=app.TABS
) -> tuple[gr.Blocks, str]:
    """Build the app for `config` with `tabs` (default: the app's) and `gpu`'s calls
    (default: the app's own) and serve it on 127.0.0.1 without blocking; close it after."""
    demo = app.build_demo(config, gpu, tabs)
    _, url, _ = demo.launch(
        server_name="127.0.0.1", prevent_thread_lock=True, quiet=True, **app.LAUNCH_KWARGS
    )
    return demo, url
