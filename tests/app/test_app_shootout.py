"""The Shoot-out tab over HTTP (gradio_client): the ranking of every lane against one plain
baseline, its budget's refusals, and Stop, which keeps the rounds that finished."""

from __future__ import annotations

import pytest
from gradio_client.exceptions import AppError

import app
from assisted.bench.shootout import MAX_LANES
from assisted.ui.shootout.format import RANKING_HEADERS

PROMPT = "def add(a, b):"


def shootout(client, **changes):
    inputs = {"prompt": PROMPT, "pair": "tiny-self", "max_new_tokens": 8, "repeats": 1}
    return client.submit(**inputs | changes, api_name="/shootout")


def test_the_shootout_streams_the_lanes_then_ranks_them(self_client):
    job = shootout(self_client)
    updates = list(job)
    status, lanes, ranking, why, race, sweep, result = updates[-1]
    assert any("running" in values[1] for values in updates[:-1])  # a lane as it streamed
    assert status.startswith("**Done**")
    assert 5 <= len(result["lanes"]) <= MAX_LANES
    assert all(lane["comparison"]["identical"] for lane in result["lanes"])
    assert ranking["headers"] == RANKING_HEADERS
    assert [row[1] for row in ranking["data"]] == [lane["lane"] for lane in result["lanes"]]
    assert result["winner"] in why
    names = {lane["lane"] for lane in result["lanes"]}
    assert {row[2] for row in race["data"]} == {"plain"} | names
    assert {row[2] for row in sweep["data"]} == set(result["sweep"]["curves"])
    assert all(name in lanes for name in names)  # each lane's latest run, with its speed
    assert not any("per_step" in lane["comparison"]["assisted"] for lane in result["lanes"])


def test_the_shootout_keeps_each_lanes_steps_where_asked(self_client):
    *_, result = shootout(self_client, per_step=True).result()
    assert all(lane["comparison"]["assisted"]["per_step"] for lane in result["lanes"])


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"max_new_tokens": 129}, "128"), ({"repeats": 6}, "5"), ({"prompt": " "}, "prompt")],
)
def test_a_shootout_past_its_budget_is_refused_before_it_runs(self_client, changes, message):
    with pytest.raises(AppError, match=message):
        shootout(self_client, **changes).result()


def test_stop_ends_the_shootout_and_ranks_what_finished(self_client):
    job = shootout(self_client, repeats=3)
    for values in job:
        if "Running" in values[0] and "of" in values[0]:  # a timed run has finished
            break
    else:
        pytest.fail("no timed run finished")
    # What the Stop button does for this session (its handler is not part of the API).
    app._stops[f"{self_client.session_hash}:shootout"].set()
    status, *_, result = job.result()
    assert status.startswith("**Stopped**") and result["stopped"] is True
    assert all(lane["repeats"] < 3 for lane in result["lanes"])
