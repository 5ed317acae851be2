"""The Gradio app end to end over HTTP: launched on 127.0.0.1 with tiny pairs built in the
test session, called through `gradio_client` as an API user would."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

gradio_client = pytest.importorskip("gradio_client")

import gradio as gr  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

import app  # noqa: E402
from assisted.engine import decoding  # noqa: E402
from assisted.engine.decoding import StepEvent  # noqa: E402
from assisted.models import pairs  # noqa: E402
from assisted.ui.benchmark.format import BenchmarkOutputs  # noqa: E402
from assisted.ui.compare.chunks import ORACLE  # noqa: E402
from assisted.ui.compare.format import CompareOutputs  # noqa: E402
from tests.serve import launch  # noqa: E402

RESULT_KEYS = {
    "pair",
    "device",
    "dtype",
    "prompt_tokens",
    "plain",
    "assisted",
    "speedup",
    "predicted_speedup",
    "prediction",
    "identical",
    "first_divergence",
    "alpha",
    "cost_ratio",
    "mean_drafted",
}
RUN_KEYS = {"text", "new_tokens", "ttft_s", "total_s", "tokens_per_s", "steps", "stopped"}
ASSISTED_KEYS = {"drafted", "accepted", "acceptance_rate", "tokens_per_step", "accept_histogram"}
STEP_KEYS = {"text", "t_s", "step_s"}
DRAFT_KEYS = {"drafted", "accepted", "accepted_text", "rejected_text", "draft_s", "source"}
RUNS = ("plain", "assisted")
PROMPT = "def add(a, b):"


def settings(**changes) -> dict:
    """The /compare endpoint's inputs by name; greedy, short runs."""
    values = {
        "prompt": PROMPT,
        "pair": "tiny",
        "custom_target": "",
        "custom_assistant": "",
        "max_new_tokens": 24,
        "decoding_mode": "greedy",
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 0,
        "draft_length": 4,
        "schedule": "constant",
        "confidence_threshold": 0.0,
        "chat_template": True,
    }
    return {**values, **changes}


@pytest.fixture(scope="module")
def tiny_registry(tiny_dirs):
    target = str(tiny_dirs["target"])
    return {
        "tiny": pairs.custom_pair(target, str(tiny_dirs["other"])),
        "tiny-self": pairs.custom_pair(target, target),
        "tiny-lookup": pairs.custom_pair(target, None),
    }


@pytest.fixture(scope="module")
def server(tiny_registry):
    config = app.AppConfig(
        registry=tiny_registry, default_pair="tiny", dtype="float32", allow_local=True
    )
    demo, url = launch(config)
    yield url
    demo.close()


@pytest.fixture
def client(server):
    return gradio_client.Client(server, verbose=False)


def final_result(job) -> dict:
    """The JSON result of the job's last yield, once the job has finished."""
    return job.result()[-1]


def test_the_default_app_builds_without_loading_a_model():
    before = pairs.loaded_pairs()
    demo = app.build_demo(app.AppConfig())
    assert demo.fns and pairs.loaded_pairs() == before
    assert app.AppConfig.from_env().allow_local is False


def test_the_tab_keeps_the_pairs_cumulative_threshold():
    from assisted.models.registry import PAIRS
    from assisted.ui.compare.tab import draft_settings

    # A pair whose draft sets one (the registry's leave the draft's end to the policy).
    spec = PAIRS["embedded"]
    draft = dataclasses.replace(spec.draft, cumulative_threshold=0.6)
    spec = dataclasses.replace(spec, draft=draft)
    draft = draft_settings(spec, 6, "auto", 0.3, "auto")
    assert draft.cumulative_threshold == 0.6
    assert (draft.num_assistant_tokens, draft.confidence_threshold) == (6, 0.3)


def test_the_endpoints_outputs_are_the_tabs_named_outputs_in_order():
    api = app.build_demo(app.AppConfig()).get_api_info()["named_endpoints"]
    compare = [output["label"] for output in api["/compare"]["returns"]]
    assert compare == list(CompareOutputs._fields[:-1])  # not `race`, the page's state
    benchmark = [output["label"] for output in api["/benchmark"]["returns"]]
    assert len(benchmark) == len(BenchmarkOutputs._fields)
    assert benchmark == [
        "status",
        "Per category",
        "Per prompt",
        "overall",
        "Speedup per category",
        "report",
    ]


def test_compare_streams_and_ends_with_the_json_result(client):
    job = client.submit(**settings(), api_name="/compare")
    yields = list(job)
    assert len(yields) >= 3, "expected intermediate yields before the final one"
    statuses = [values[0] for values in yields]
    assert any("plain" in status for status in statuses[:-1])
    result = final_result(job)
    assert set(result) >= RESULT_KEYS
    assert set(result["plain"]) >= RUN_KEYS
    assert set(result["assisted"]) >= RUN_KEYS | ASSISTED_KEYS
    assert result["dtype"] == "float32" and result["device"] == "cpu"
    # Greedy fp32: assisted generation reproduces plain decoding.
    assert result["identical"] is True
    assert result["plain"]["text"] == result["assisted"]["text"]
    assert result["plain"]["new_tokens"] == result["assisted"]["new_tokens"] == 24
    final = yields[-1]
    assert "Done" in final[0]
    assert "target steps" in final[3] and "acceptance rate" in final[4]
    assert "speedup" in final[5].lower()
    assert final[6]["data"] and final[7]["data"]  # both charts carry rows


def test_each_step_of_the_result_carries_its_draft_split_at_the_first_rejection(
    client, tiny_dirs, monkeypatch
):
    drafts: list[tuple] = []  # each assisted step's (token ids, draft ids), as recorded
    compare = decoding.compare

    def recording(*args, **kwargs):
        for event in compare(*args, **kwargs):
            if isinstance(event, StepEvent) and event.mode == "assisted":
                drafts.append((event.step.token_ids, event.step.draft_ids))
            yield event

    monkeypatch.setattr(decoding, "compare", recording)
    job = client.submit(**settings(), api_name="/compare")
    *streamed, final = list(job)
    # Updates as the runs stream leave the growing list out; the last one carries it.
    # An API caller gets every output whole in each update, never Gradio's skip.
    assert all(value != gr.skip() for values in streamed for value in values)
    partial = [values[-1][run] for values in streamed if values[-1] for run in RUNS]
    assert any(partial) and all("per_step" not in run for run in partial if run)
    result = final[-1]
    plain, assisted = result["plain"], result["assisted"]
    assert len(plain["per_step"]) == plain["steps"]
    assert len(assisted["per_step"]) == assisted["steps"]
    assert all(set(step) == STEP_KEYS for step in plain["per_step"])
    assert all(set(step) == STEP_KEYS | DRAFT_KEYS for step in assisted["per_step"])
    assert "".join(step["text"] for step in assisted["per_step"]) == assisted["text"]
    assert sum(step["drafted"] for step in assisted["per_step"]) == assisted["drafted"]
    assert sum(step["accepted"] for step in assisted["per_step"]) == assisted["accepted"]

    # Each step's draft, decoded after the text committed before it, as the app decodes it.
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs["target"])

    def text(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True).rstrip("\ufffd")

    committed: list[int] = []
    assert len(drafts) == assisted["steps"]
    for step, (token_ids, draft_ids) in zip(assisted["per_step"], drafts, strict=True):
        draft = text(committed + list(draft_ids))[len(text(committed)) :]
        assert step["accepted_text"] + step["rejected_text"] == draft
        assert step["text"].startswith(step["accepted_text"])
        assert step["rejected_text"] == "" or step["accepted"] < step["drafted"]
        assert step["draft_s"] >= 0  # an assistant model: its drafting is timed
        committed += token_ids
    # Two different random models: some drafts are rejected.
    assert any(step["rejected_text"] for step in assisted["per_step"])
    assert final[8]["data"] and final[9]["data"]  # acceptance by position, time per step


def test_an_assistant_equal_to_the_target_accepts_everything(client):
    result = client.predict(**settings(pair="tiny-self"), api_name="/compare")[-1]
    assert result["assisted"]["acceptance_rate"] == 1.0 and result["identical"] is True
    assert result["assisted"]["tokens_per_step"] > 1


def test_the_auto_schedule_runs_and_returns_its_cost_curve(client):
    final = client.predict(**settings(schedule="auto"), api_name="/compare")
    result = final[-1]
    assert [k for k, _ in result["assisted"]["verify_cost_s"]] == [1, 2, 3, 4, 5]
    assert result["identical"] is True
    steps = result["assisted"]["per_step"]
    assert all(0 <= step["chosen"] <= 4 for step in steps)
    # Auto may draft from a prompt-lookup match instead of the assistant, step by step.
    sources = [(step["source"], step["drafted"] > 0) for step in steps]
    assert all(
        source in ("assistant", "prompt-lookup") if drafted else source is None
        for source, drafted in sources
    )
    # The summary reads the cost curve; the draft-length chart has a point per step.
    assert "**Cost model:** verifying" in final[5] and "one row here" in final[5]
    # The prediction is the policy's own, and the summary says so.
    assert result["prediction"] == "policy" and "the `auto` policy's own" in final[5]
    # And where the costs came from: timed by the server, or read from its earlier file.
    timed = result["assisted"]["calibration"]["source"] == "timed"
    assert ("Costs calibrated once" if timed else "Costs loaded from an earlier") in final[5]
    columns, rows = final[10]["columns"], final[10]["data"]
    points = [dict(zip(columns, row, strict=True)) for row in rows if row[0] is not None]
    chosen = [p["candidates"] for p in points if p["source"] not in ("headroom", ORACLE)]
    assert chosen == [step["chosen"] for step in steps]
    # Over them, the oracle's schedule, one point per step of it.
    overlay = [p["candidates"] for p in points if p["source"] == ORACLE]
    assert overlay == [move["gamma"] for move in result["oracle"]["schedule"]]


def test_an_int8_assistant_is_named_in_the_result_the_card_and_the_summary(client):
    final = client.predict(**settings(assistant_quant="int8"), api_name="/compare")
    result = final[-1]
    assert result["assisted"]["assistant_precision"] == "int8" and result["identical"] is True
    assert "assistant precision" in final[4] and "int8" in final[4]
    assert "assistant in int8 and the target in float32" in final[5]


def test_int8_is_refused_for_prompt_lookup(client):
    with pytest.raises(gradio_client.exceptions.AppError, match="runs no separate model"):
        client.predict(**settings(pair="tiny-lookup", assistant_quant="int8"), api_name="/compare")


def test_prompt_lookup_and_sampling_runs_complete(client):
    lookup = client.predict(**settings(pair="tiny-lookup", draft_length=3), api_name="/compare")
    assert lookup[-1]["assisted"]["drafter"] == "prompt-lookup"
    assert lookup[-1]["identical"] is True
    sampled = client.predict(
        **settings(decoding_mode="sampling", temperature=0.9, seed=7), api_name="/compare"
    )
    assert sampled[-1]["plain"]["new_tokens"] > 0 and "Done" in sampled[0]


def test_an_empty_prompt_is_a_clear_error(client):
    # Like any invalid input (the browser shows a warning instead: test_app_browser).
    with pytest.raises(gradio_client.exceptions.AppError, match="prompt is empty"):
        client.predict(**settings(prompt="   "), api_name="/compare")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"prompt": "x" * 40_000}, "limit is 32,000"),
        ({"prompt": "word " * 300}, "context"),
        ({"max_new_tokens": 5000}, "5000"),
        ({"decoding_mode": "sampling", "temperature": 0.0}, "0.0"),
    ],
)
def test_bad_input_is_a_clear_error(client, changes, message):
    with pytest.raises(gradio_client.exceptions.AppError, match=message):
        client.predict(**settings(**changes), api_name="/compare")


@pytest.mark.parametrize(
    ("target", "assistant", "message"),
    [
        ("not a model id!", "", "not a model id"),
        ("{target}", "{other_tokenizer}", "different tokenizers"),
    ],
)
def test_a_bad_custom_pair_is_an_error_and_the_previous_pair_stays(
    client, tiny_dirs, target, assistant, message
):
    client.predict(**settings(), api_name="/compare")
    kept = pairs.loaded_pairs()[-1]
    folders = {name: str(path) for name, path in tiny_dirs.items()}
    custom = settings(
        pair="custom",
        custom_target=target.format(**folders),
        custom_assistant=assistant.format(**folders),
    )
    with pytest.raises(gradio_client.exceptions.AppError, match=message):
        client.predict(**custom, api_name="/compare")
    assert kept in pairs.loaded_pairs()
    result = client.predict(**settings(), api_name="/compare")[-1]
    assert result["identical"] is True


def test_a_public_app_refuses_local_folders(tiny_registry, tiny_dirs):
    config = app.AppConfig(registry=tiny_registry, default_pair="tiny", dtype="float32")
    demo, url = launch(config)
    try:
        client = gradio_client.Client(url, verbose=False)
        custom = settings(pair="custom", custom_target=str(tiny_dirs["target"]))
        with pytest.raises(gradio_client.exceptions.AppError, match="owner/name"):
            client.predict(**custom, api_name="/compare")
    finally:
        demo.close()


def test_stop_keeps_what_was_produced_and_marks_it_stopped(client, slow_steps):
    job = client.submit(**settings(max_new_tokens=200), api_name="/compare")
    for values in job:
        if "Running plain" in values[0] and "running" in values[1]:
            break
    else:
        pytest.fail("the plain run never streamed")
    # What the Stop button does for this session (its handler is not part of the API).
    app._stops[f"{client.session_hash}:compare"].set()
    final = job.result()
    result = final[-1]
    assert result["plain"]["stopped"] is True and 0 < result["plain"]["new_tokens"] < 200
    assert result["assisted"] is None
    assert "Stopped" in final[0] and "stopped" in final[1] and "stopped" in final[3]
    assert "Not run" in final[2]


def test_a_failure_inside_generation_is_an_error_not_a_hang(client, monkeypatch):
    def broken(*args, **kwargs):
        yield decoding.Phase("plain")
        raise RuntimeError("device on fire")

    monkeypatch.setattr(decoding, "compare", broken)
    start = time.perf_counter()
    with pytest.raises(gradio_client.exceptions.AppError, match="device on fire"):
        client.predict(**settings(), api_name="/compare")
    assert time.perf_counter() - start < 30


def test_two_clients_at_once_are_queued_and_both_complete(server):
    clients = [gradio_client.Client(server, verbose=False) for _ in range(2)]
    results: list = [None, None]

    def call(index: int) -> None:
        prompt = ["def add(a, b):", "for i in range(10):"][index]
        results[index] = clients[index].predict(**settings(prompt=prompt), api_name="/compare")

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(r is not None and r[-1]["identical"] is True for r in results)


@pytest.mark.integration
def test_the_app_on_the_embedded_pair():
    demo, url = launch(app.AppConfig())  # the real registry and default pair
    try:
        client = gradio_client.Client(url, verbose=False)
        job = client.submit(**settings(pair="embedded", max_new_tokens=8), api_name="/compare")
        assert len(list(job)) >= 3
        result = final_result(job)
    finally:
        demo.close()
    assert result["pair"] == "embedded"
    assert result["plain"]["new_tokens"] == result["assisted"]["new_tokens"] == 8
    if result["dtype"] == "float32":
        assert result["identical"] is True
