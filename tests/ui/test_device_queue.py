"""The device's line: one request at a time, in order of arrival, each seeing its place."""

from __future__ import annotations

import threading

from assisted.ui.pair_access import DeviceQueue

# How long a test waits for an event that takes milliseconds, before it fails rather than
# hangs: generous, as a busy 2-core machine can leave a thread unscheduled for seconds.
WAIT_S = 60.0


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
    places: dict[str, list[int]] = {name: [] for name in turns}
    heard = {name: threading.Event() for name in turns}  # a place heard in the thread
    third_one_ahead = threading.Event()

    def use_the_device(name: str) -> None:
        for place in waits[name]:
            places[name].append(place)
            heard[name].set()
            if name == "third" and place == 1:
                third_one_ahead.set()
        order.append(name)
        if name == "second":
            # It keeps the device until the third has heard that it is next, whenever the
            # third's thread runs: place 1 is then a state to see, not a window to catch.
            third_one_ahead.wait(WAIT_S)
        turns[name].leave()

    threads = [threading.Thread(target=use_the_device, args=(name,)) for name in reversed(turns)]
    for thread in threads:
        thread.start()
    for event in heard.values():
        assert event.wait(WAIT_S)
    assert order == []  # both wait in their threads, and the first still holds the device
    first.leave()
    for thread in threads:
        thread.join(WAIT_S)
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
