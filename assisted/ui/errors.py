"""Refusals: input the app will not run (bad settings, an unknown or unusable pair), told
to the visitor as a `gr.Error` and to the server's log as one line, what was refused and
why. Gradio prints the traceback of every `gr.Error` a handler raises unless it is made
with `print_exception=False` (`gradio/queueing.py`), which showed each mistyped setting in
a Space's log as a crash. Faults (a failure inside generation, a load that broke) are
raised as they are, and keep their tracebacks.

ZeroGPU's `spaces` keeps `print_exception` across its process boundary: a refusal raised
in a GPU worker is logged there, once, and reaches the handler quiet.
"""

from __future__ import annotations

import sys
from typing import Any

import gradio as gr


def log_refused(title: str, message: str) -> None:
    """One line on stderr, beside Gradio's own: what was refused and why."""
    print(f"Refused ({title}): {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def refusal(message: str, title: str) -> gr.Error:
    """The error to raise for a refused input: shown to the visitor, logged as one line."""
    log_refused(title, message)
    return gr.Error(message, title=title, print_exception=False)


def quiet_component_refusals(demo: gr.Blocks) -> None:
    """Make the input components' own refusals one line each too. A value an input
    component refuses (a slider's number out of range, a dropdown's value not among its
    choices) is a `gr.Error` that Gradio raises in `Blocks.preprocess_data`, before any
    handler runs, and prints with a traceback: this wraps that method of `demo` to log it
    as a refusal instead. Only component errors pass through it, so a fault stays loud."""
    preprocess = demo.preprocess_data

    async def preprocess_data(*args: Any, **kwargs: Any) -> Any:
        try:
            return await preprocess(*args, **kwargs)
        except gr.Error as error:
            if error.print_exception:
                log_refused("Input" if error.title == "Error" else error.title, error.message)
                error.print_exception = False
            raise

    demo.preprocess_data = preprocess_data
