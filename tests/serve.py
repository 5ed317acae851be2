"""Serving the app in a test: one launch helper for the HTTP, benchmark and browser tests."""

from __future__ import annotations

import gradio as gr

import app


def launch(config: app.AppConfig, gpu: app.GpuCalls = app.GPU_CALLS) -> tuple[gr.Blocks, str]:
    """Build the app for `config` with `gpu`'s entry points (default: the app's own) and
    serve it on 127.0.0.1 without blocking; close it after."""
    demo = app.build_demo(config, gpu)
    _, url, _ = demo.launch(
        server_name="127.0.0.1", prevent_thread_lock=True, quiet=True, **app.LAUNCH_KWARGS
    )
    return demo, url
