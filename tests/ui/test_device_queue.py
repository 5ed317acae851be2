"""The device's line: one request at a time, in order of arrival, each seeing its place."""

from __future__ import annotations

import threading
import time

from assisted.ui.device_queue import DeviceQueue


def test_the_first_request_gets_the_device_at_once():
    turn = DeviceQueue().turn()
    assert list(turn.waiting()) == []
    turn.leave()


def test_requests_take_turns_in_order_of_arrival_and_see_their_place():
    queue = DeviceQueue()
    first = queue.turn()
    list(first.waiting())
    turns = {name: queue.turn() for name in ("second", "third")}
    waits = {name: turn.waiting(poll_s=0.05) for name, turn in turns.items()}
    assert next(waits["second"]) == 1 and next(waits["third"]) == 2  # they arrive in order
    order: list[str] = []
    places: dict[str, list[int]] = {}

    def use_the_device(name: str) -> None:
        places[name] = list(waits[name])
        order.append(name)
        time.sleep(0.1)
        turns[name].leave()

    threads = [threading.Thread(target=use_the_device, args=(name,)) for name in reversed(turns)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    assert order == []  # the first request still holds the device
    first.leave()
    for thread in threads:
        thread.join(5)
    assert order == ["second", "third"]
    assert set(places["third"]) == {1, 2}  # one ahead once the first had left


def test_leaving_the_line_moves_the_others_up():
    queue = DeviceQueue()
    holder, leaving, staying = queue.turn(), queue.turn(), queue.turn()
    list(holder.waiting())
    leaving_wait, staying_wait = leaving.waiting(), staying.waiting(poll_s=0.05)
    assert next(leaving_wait) == 1 and next(staying_wait) == 2
    leaving_wait.close()
    leaving.leave()
    assert next(staying_wait) == 1
    holder.leave()
    assert list(staying_wait) == []
    staying.leave()
    queue.turn().leave()  # leaving a line never joined is harmless
