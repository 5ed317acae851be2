"""Refusals: input the app will not run (bad settings, an unknown or unusable pair), told
to the visitor as a `gr.Error` and to the server's log as one line, what was refused and
why. Gradio prints the traceback of every `gr.Error` a handler raises unless it is made
with `print_exception=False` (`gradio/queueing.py`), which showed each mistyped setting in
a Space's log as a crash. Faults (a failure inside generation, a load that broke) are
raised as they are, and keep their tracebacks.

ZeroGPU's `spaces` keeps `print_exception` across its process boundary: a refusal raised
in a GPU worker is logged there, once, and reaches the handler quiet.

ZeroGPU's refusals and aborts, in words a visitor can act on.

The `spaces` wrapper refuses a call before it starts, as `gr.Error`s titled by what
happened (`spaces/zero/client.py`'s `schedule`): the visitor's quota is used up, the call
asks for more than one call may have, too many of their calls run at once, or no GPU came
free in time. It aborts a call whose worker ended without a result ("GPU task aborted",
`spaces/zero/wrappers.py`), as ZeroGPU does to a call that runs past the time it asked
for. `explained` turns each into a `Refused`: a status line for the page and an error for
the API, both saying what happened and what to try. The request's turn and stop flag are
released as for any error, so the next request runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, TypeVar

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


T = TypeVar("T")

QUOTA = "ZeroGPU quota exceeded"
TOO_LONG = "ZeroGPU illegal duration"
PENDING = "ZeroGPU pending credits exceeded"
QUEUE = "ZeroGPU queue timeout"
WORKER = "ZeroGPU worker error"
CLIENT = "ZeroGPU client error"
ABORTED = "GPU task aborted"

# What happened, and what to try, by the wrapper's title.
WORDS = {
    QUOTA: (
        "ZeroGPU refused the call: the GPU quota is used up",
        "Sign in to Hugging Face for a larger daily quota, ask for fewer new tokens (a "
        "shorter call asks for less time), or try again once the quota refills.",
    ),
    TOO_LONG: (
        "ZeroGPU refused the call: it asks for more GPU time than one call may have",
        "Ask for fewer new tokens, or on the Benchmark tab fewer prompts or repeats.",
    ),
    PENDING: (
        "ZeroGPU refused the call: too many of your GPU calls are running",
        "Try again once they have finished.",
    ),
    QUEUE: ("No GPU became free in time", "Try again in a minute."),
    CLIENT: ("ZeroGPU could not take the call", "Reload the page and try again."),
}
ABORTED_WORDS = (
    "ZeroGPU aborted the call before it finished",
    "Try again, with fewer new tokens if it ran long: the next call asks for more time.",
)


class Refused(gr.Error):
    """A ZeroGPU refusal or abort, explained: `status` for the page, the message for the
    API, under the wrapper's own title. Expected, so the log gets one line, no traceback
    (as `refusal` logs it)."""

    def __init__(self, status: str, message: str, title: str, aborted: bool = False):
        super().__init__(message, title=title, print_exception=False)
        self.status = status
        self.aborted = aborted  # ZeroGPU ended the call: it may have asked too little time


def explain(error: gr.Error) -> Refused | None:
    """`error` explained, where the ZeroGPU wrapper raised it; None for any other error."""
    title, said = getattr(error, "title", None), str(error.message)
    if title == WORKER:
        # The worker's own failures come as its exception's class name: not ZeroGPU's.
        if said != ABORTED:
            return None
        happened, advice = ABORTED_WORDS
    elif title in WORDS:
        happened, advice = WORDS[title]
    else:
        return None
    detail = f" ({said.strip().rstrip('.')})" if said and said != ABORTED else ""
    status, message = f"**{happened}**{detail}. {advice}", f"{happened}{detail}. {advice}"
    return Refused(status, message, title, aborted=said == ABORTED)


def explained(items: Iterator[T]) -> Iterator[T]:
    """`items`, a GPU call's yields, with a ZeroGPU refusal or abort raised as `Refused`."""
    try:
        yield from items
    except Refused:
        raise
    except gr.Error as error:
        refused = explain(error)
        if refused is None:
            raise
        log_refused(refused.title or "ZeroGPU", refused.message)
        raise refused from error
