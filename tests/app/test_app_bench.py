"""The app's Benchmark tab over HTTP: the /benchmark endpoint on a tiny pair, called through
`gradio_client` as an API user would (one short category, 8 new tokens)."""

from __future__ import annotations

import gradio as gr
import pytest

gradio_client = pytest.importorskip("gradio_client")

import app  # noqa: E402
from assisted.models import pairs  # noqa: E402
from tests.serve import launch  # noqa: E402

GROUP_KEYS = {
    "speedup",
    "speedup_geomean",
    "acceptance_rate",
    "tokens_per_step",
    "predicted_speedup",
    "prompts",
    "identical_prompts",
}
OVERALL_KEYS = (GROUP_KEYS - {"speedup"}) | {"speedup_median", "overhead_pct"}


def inputs(**changes) -> dict:
    """The /benchmark endpoint's inputs by name: one short prompt, 8 new tokens."""
    values = {
        "pair": "tiny",
        "categories": ["chat"],
        "prompts_per_category": 1,
        "max_new_tokens": 8,
        "repeats": 1,
        "drafters": ["assistant", "prompt-lookup"],
    }
    return {**values, **changes}


@pytest.fixture(scope="module")
def server(tiny_dirs):
    registry = {"tiny": pairs.custom_pair(str(tiny_dirs["target"]), str(tiny_dirs["other"]))}
    config = app.AppConfig(registry=registry, default_pair="tiny", dtype="float32")
    demo, url = launch(config)
    yield url
    demo.close()


@pytest.fixture
def client(server):
    return gradio_client.Client(server, verbose=False)


def test_the_benchmark_and_shootout_tabs_build_beside_compare_without_loading_a_model():
    before = pairs.loaded_pairs()
    demo = app.build_demo(app.AppConfig())
    tabs = [block.label for block in demo.blocks.values() if isinstance(block, gr.Tab)]
    assert tabs == ["Compare", "Benchmark", "Shoot-out"]
    named = {fn.api_name for fn in demo.fns.values()}
    assert {"compare", "benchmark", "shootout"} <= named
    assert pairs.loaded_pairs() == before


def test_benchmark_streams_progress_and_ends_with_the_report(client):
    job = client.submit(**inputs(), api_name="/benchmark")
    yields = list(job)
    statuses = [values[0] for values in yields]
    assert any("Run 1 of 3 done" in status for status in statuses), statuses
    status, categories, prompts, overall, chart, report = job.result()
    assert "Done" in status and "3 timed runs" in status
    assert "target" in report["pair"] and report["settings"]["max_new_tokens"] == 8
    assert list(report["categories"]) == ["chat"]
    assert set(report["categories"]["chat"]) >= GROUP_KEYS
    assert set(report["overall"]) >= OVERALL_KEYS
    assert set(report["drafters"]) == {"assistant", "prompt-lookup"}
    # Greedy fp32: every drafter reproduces plain decoding.
    assert report["overall"]["identical_prompts"] == report["overall"]["prompts"] == 1
    assert categories["headers"][:4] == ["category", "drafter", "prompts", "speedup"]
    assert [row[:2] for row in categories["data"]] == [
        ["chat", "assistant"],
        ["chat", "prompt-lookup"],
    ]
    assert len(prompts["data"]) == 2 and prompts["data"][0][-1] == "yes"
    assert "geometric mean" in overall and chart is not None


def test_assistant_precisions_are_compared_with_the_same_plain_runs(client):
    report = client.predict(
        **inputs(drafters=["assistant"], assistant_quants=["none", "int8"]),
        api_name="/benchmark",
    )[-1]
    assert set(report["drafters"]) == {"assistant quant=none", "assistant quant=int8"}
    precisions = {row["drafter"]: row["assistant_precision"] for row in report["prompts"]}
    assert precisions == {"assistant quant=none": "float32", "assistant quant=int8": "int8"}
    assert report["overall"]["identical_prompts"] == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"categories": []}, "at least one category"),
        ({"drafters": []}, "at least one drafter"),
        ({"categories": ["poetry"]}, "poetry"),
        ({"prompts_per_category": 4}, "maximum value 3"),
        ({"max_new_tokens": 5000}, "5000"),
    ],
)
def test_bad_input_is_a_clear_error(client, changes, message):
    with pytest.raises(gradio_client.exceptions.AppError, match=message):
        client.predict(**inputs(**changes), api_name="/benchmark")


def test_stop_ends_the_benchmark_without_a_report(client):
    job = client.submit(
        **inputs(categories=["chat", "write-code"], drafters=["assistant"], repeats=3),
        api_name="/benchmark",
    )
    for values in job:
        if "Run 1 of 12 done" in values[0]:
            break
    else:
        pytest.fail("the benchmark never reported a finished run")
    # What the Benchmark tab's Stop button does for this session (it is not in the API).
    app._stops[f"{client.session_hash}:benchmark"].set()
    status, categories, _, _, _, report = job.result()
    assert "Stopped" in status and "of 12 timed runs" in status
    assert report is None and categories["data"] == []


def test_a_failure_inside_the_benchmark_is_an_error_not_a_hang(client, monkeypatch):
    from assisted import bench

    def broken(*args, **kwargs):
        yield bench.Progress(0, 3, "warming up")
        raise RuntimeError("device on fire")

    monkeypatch.setattr(bench, "benchmark", broken)
    with pytest.raises(gradio_client.exceptions.AppError, match="device on fire"):
        client.predict(**inputs(), api_name="/benchmark")


def test_the_sampling_check_is_the_last_input_and_off_unless_asked(client):
    report = client.predict(**inputs(drafters=["assistant"]), api_name="/benchmark")[-1]
    assert "sampling_check" not in report  # today's benchmark, for callers who leave it out
    *_, overall, _, report = client.predict(
        **inputs(drafters=["assistant"], sampling_check=10), api_name="/benchmark"
    )
    check = report["sampling_check"]
    assert check["n"] == 10 and check["control"] is not None
    assert "Sampling check**: Checked on 10 samples" in overall
