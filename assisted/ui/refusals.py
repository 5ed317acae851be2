"""ZeroGPU's refusals and aborts, in words a visitor can act on.

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

from collections.abc import Iterator
from typing import TypeVar

import gradio as gr

from assisted.ui.errors import log_refused

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
    (`assisted.ui.errors`)."""

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
