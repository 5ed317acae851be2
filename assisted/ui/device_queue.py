"""Turns on the one device: one request at a time, in order of arrival.

Timed runs must not share the device, and loading a pair into memory competes with them too.
A Gradio concurrency group gives the same order, but a request holds its place there for the
whole event, downloads included, so one visitor's large download stalls everyone. Here a
request joins the line only once its files are on disk, and sees its place while it waits.

On ZeroGPU there is no one device to share: each call gets a GPU of its own, and ZeroGPU
schedules the calls itself. A queue made with `one_at_a_time=False` lets every request
through at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

POLL_S = 2.0  # a waiter hears of its place at least this often (and can notice a Stop)


class DeviceQueue:
    """The line for the device: the request using it first, then the waiting ones."""

    def __init__(self, one_at_a_time: bool = True) -> None:
        self.one_at_a_time = one_at_a_time
        self._changed = threading.Condition()
        self._line: list[Turn] = []

    def turn(self) -> Turn:
        """A place to take in the line: `Turn.waiting()` joins it, `Turn.leave()` leaves."""
        return Turn(self)


class Turn:
    """One request's turn on the device."""

    def __init__(self, queue: DeviceQueue) -> None:
        self._queue = queue

    def waiting(self, poll_s: float = POLL_S) -> Iterator[int]:
        """Join the line. Yields how many requests are ahead, whenever that changes and at
        least every `poll_s`; ends once the device is ours, to keep until `leave()`."""
        if not self._queue.one_at_a_time:
            return
        changed, line = self._queue._changed, self._queue._line
        with changed:
            line.append(self)
            ahead = line.index(self)
        while ahead:
            yield ahead
            with changed:
                if line.index(self) == ahead:
                    changed.wait(poll_s)
                ahead = line.index(self)

    def leave(self) -> None:
        """Give up the place, or the device (nothing, if the line was never joined)."""
        changed, line = self._queue._changed, self._queue._line
        with changed:
            if self in line:
                line.remove(self)
                changed.notify_all()
