"""The lean loop on a static cache (`assisted.engine.drafters.static_draft`) and its CUDA graphs'
checks (`assisted.engine.drafters.draft_graphs`), on a CPU: it drafts exactly what the loop on a
DynamicCache drafts, across rejections and rollbacks, at an end of sequence and at both
thresholds, eagerly and as a whole draft on the device read back once; the one-token pass
that a capture records traces without a break; the self-check turns a wrong replay away."""

from __future__ import annotations

import copy
import dataclasses
import functools
import gc
import math
import os
import weakref
from itertools import pairwise
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoTokenizer, DynamicCache, GenerationConfig

from assisted import cli
from assisted.analysis import stats
from assisted.core.record import (
    CUDA_GRAPHS,
    EAGER,
    FAILED,
    INCONCLUSIVE,
    PASSED,
    DraftingPath,
)
from assisted.core.settings import DraftSettings, RunSettings
from assisted.engine import decoding
from assisted.engine.decoding import drain, make_plan
from assisted.engine.drafters import draft_graphs, seam, static_draft
from assisted.engine.drafters.static_draft import (
    MIN_JUDGED,
    DraftGraphs,
    LeanDrafter,
    StaticDrafter,
    StaticState,
    cut,
    draft_on_device,
    self_check,
)
from assisted.engine.engine import Engine, encode_prompt
from assisted.models import pairs
from assisted.models.pairs import custom_pair, load_pair
from tests.engine.graph_stand_in import ContractBroken, StandInGraphs
from tests.scripted import Scripted
from tests.tiny import build_model, build_near_model

PROMPT = "def add(a, b):"
CAP = 5
CAPACITY = 128


def load(target, assistant):
    return load_pair(custom_pair(str(target), str(assistant)), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def near_pair(tiny_dirs):
    """The tiny target with an assistant that agrees with it on some tokens: drafts are
    accepted in part, in full and not at all."""
    folder = tiny_dirs["target"].parent / "near-static"
    build_near_model(folder, tiny_dirs["target"], scale=0.05)
    return load(tiny_dirs["target"], folder)


@pytest.fixture(scope="module")
def sliding_pair(tiny_dirs):
    folder = tiny_dirs["target"].parent / "sliding-static"
    tokenizer = AutoTokenizer.from_pretrained(tiny_dirs["target"])
    build_model(folder, tokenizer, seed=6, model_type="mistral", sliding_window=8)
    return load(tiny_dirs["target"], folder)


def prompt_ids(pair) -> torch.Tensor:
    return torch.tensor([encode_prompt(pair, PROMPT)])


def graphed(model, cap: int = CAP) -> DraftGraphs:
    """A CPU's stand-in for captured graphs: each replay runs the passes a capture would
    record, eagerly. What it checks is the draft read back once and cut afterwards."""
    state = StaticState(model, CAPACITY, cap)
    replays = {
        gamma: functools.partial(draft_on_device, state, gamma) for gamma in range(1, cap + 1)
    }
    return DraftGraphs(state, replays, 0.0)


def drafters(model, threshold=0.0, eos=(), cumulative=0.0) -> dict[str, object]:
    """The loop on a DynamicCache, on a static cache, and on a static cache as one draft
    read back once."""
    return {
        "dynamic": LeanDrafter(model, threshold, eos, cumulative),
        "static": StaticDrafter(StaticState(model, CAPACITY, CAP), threshold, eos, cumulative),
        "whole": whole_drafter(model, threshold, eos, cumulative),
    }


def whole_drafter(model, threshold=0.0, eos=(), cumulative=0.0) -> StaticDrafter:
    graphs = graphed(model)
    return StaticDrafter(graphs.state, threshold, eos, cumulative, graphs)


def test_a_static_draft_follows_the_dynamic_loop_across_rejections_and_rollbacks(near_pair):
    """A greedy `auto` run whose steps draft, reject, accept everything, take a lookup match
    or draft nothing (so the next draft reads several committed ids first): its output is
    plain decoding's, and the loop on a DynamicCache and the whole draft read back once,
    fed the same calls, draft what the static loop drafted at every call."""
    pair = near_pair
    pair.assistant.generation_config.num_assistant_tokens_schedule = "constant"
    pair.assistant.generation_config.assistant_confidence_threshold = 0.0
    calls: list[tuple[list[int], int, list[int]]] = []
    draft = StaticDrafter.draft

    def recording(self, input_ids, gamma, ids=None, floors=()):
        drafted = draft(self, input_ids, gamma, ids, floors)
        calls.append((input_ids[0].tolist(), gamma, drafted))
        return drafted

    ids = prompt_ids(pair)
    policy = Scripted([4, 2, 0, 5, 3, 1], sources=(None, None, None, None, seam.LOOKUP, None))
    StaticDrafter.draft = recording
    try:
        with seam.drafting_policy(pair.target, policy):
            out = pair.target.generate(
                ids, max_new_tokens=40, assistant_model=pair.assistant, do_sample=False
            )
    finally:
        StaticDrafter.draft = draft
    plain = pair.target.generate(ids, max_new_tokens=40, do_sample=False)
    assert out.tolist() == plain.tolist()
    outcomes = {"rejected": 0, "all accepted": 0}
    for drafted, accepted in policy.seen:
        if drafted:
            outcomes["rejected" if accepted < drafted else "all accepted"] += 1
    assert min(outcomes.values()) >= 2, outcomes
    assert len(calls) >= 6
    dynamic = LeanDrafter(pair.assistant, 0.0, ())
    whole = whole_drafter(pair.assistant)
    for committed, gamma, drafted in calls:
        tensor = torch.tensor([committed])
        assert dynamic.draft(tensor, gamma) == drafted
        assert whole.draft(tensor, gamma) == drafted
    assert whole.counts.graphed == len(calls) and whole.counts.eager == 0


def continuation(model, ids: list[int], count: int) -> tuple[list[int], list[float]]:
    """The model's greedy `count` tokens after `ids`, with the probability it gave each."""
    seq, probs = list(ids), []
    with torch.inference_mode():
        for _ in range(count):
            logits = model(input_ids=torch.tensor([seq])).logits[0, -1].float()
            seq.append(int(logits.argmax()))
            probs.append(logits.softmax(-1).max().item())
    return seq[len(ids) :], probs


def midway(values: list[float]) -> float:
    """Half-way in the widest gap between `values`, away from each, so that float rounding
    cannot move one across it."""
    ordered = sorted(values)
    return max((b - a, (a + b) / 2) for a, b in pairwise(ordered))[1]


@pytest.mark.parametrize("rule", ["eos", "threshold", "cumulative", "floors"])
def test_every_stopping_rule_cuts_the_static_drafts_as_the_dynamic_loop(near_pair, rule):
    """After prefixes that go forward and back (each draft a rollback of the last), the
    three drafters draft the same, and the rule under test ends some drafts and not all
    (the `auto` policy's floors on the reach, given with each draft, among them)."""
    model = near_pair.assistant
    prompt = prompt_ids(near_pair)[0].tolist()
    tokens, probs = continuation(model, prompt, 24)
    starts = range(len(tokens) - CAP)
    rules: dict = {}
    if rule == "eos":
        rules["eos"] = {next(t for i, t in enumerate(tokens[6:], 6) if t not in tokens[:i])}
    elif rule == "threshold":
        # Below about one token in five: some drafts run to the cap, others stop early.
        rules["threshold"] = midway(sorted(probs)[1 : len(probs) // 4 + 2])
    else:
        whole = [math.prod(probs[s : s + CAP]) for s in starts]
        reaches = [math.prod(probs[s : s + j + 1]) for s in starts for j in range(CAP)]
        rules[rule] = midway([r for r in reaches if min(whole) <= r <= max(whole)])
    floors = (rules["floors"],) * (CAP - 1) if "floors" in rules else ()
    kinds = drafters(
        model, rules.get("threshold", 0.0), rules.get("eos", ()), rules.get("cumulative", 0.0)
    )
    order = [*starts, 3, 9, 2, 12, 12, 0]  # forward, then back: each a rollback
    lengths = []
    for start in order:
        prefix = torch.tensor([prompt + tokens[:start]])
        drafted = {name: d.draft(prefix, CAP, None, floors) for name, d in kinds.items()}
        assert len(set(map(tuple, drafted.values()))) == 1, (start, drafted)
        assert drafted["dynamic"] == tokens[start : start + len(drafted["dynamic"])]
        lengths.append(len(drafted["dynamic"]))
    assert min(lengths) < CAP and CAP in lengths, lengths


def test_cut_keeps_what_the_loop_keeps():
    assert cut([1, 2, 3], [0.9, 0.9, 0.9], {2}, 0.0, 0.0) == [1, 2]  # up to the end of sequence
    assert cut([1, 2, 3], [0.9, 0.3, 0.9], (), 0.5, 0.0) == [1, 2]  # the first unsure token
    assert cut([1, 2, 3], [0.9, 0.9, 0.9], (), 0.0, 0.85) == [1, 2]  # 0.9, then 0.81
    assert cut([1, 2, 3], [0.1, 0.1, 0.1], (), 0.0, 0.0) == [1, 2, 3]  # no rule: all of it
    # The policy's floors, one per candidate but the last: 0.9 ≥ 0.85, then 0.81 < 0.85.
    assert cut([1, 2, 3], [0.9, 0.9, 0.9], (), 0.0, 0.0, (0.85, 0.85)) == [1, 2]
    assert cut([1, 2, 3], [0.9, 0.9, 0.9], (), 0.0, 0.0, (0.95, 0.0)) == [1]


def test_greedy_runs_draft_on_the_static_cache_and_say_so(near_pair, monkeypatch):
    """Through `decoding.run`: an `auto` run drafts with the lean loop on a static cache
    (eager: no CUDA here) and its output is plain decoding's; its record says which path
    ran and why, as the JSON does, with the drafting time per token. (The tiny pair's
    costs would make the policy draft nothing: a scripted one drafts.)"""
    pair = near_pair
    monkeypatch.setattr(decoding, "auto_policy", lambda *_: Scripted([3, 1, 4]))
    settings = RunSettings(max_new_tokens=24)
    draft = DraftSettings(schedule="auto", assistant_quant="none")
    ids = encode_prompt(pair, PROMPT)
    plain = drain(decoding.run(pair, ids, "plain", settings))
    assisted = drain(decoding.run(pair, ids, "assisted", settings, draft))
    assert assisted.token_ids == plain.token_ids
    assert assisted.drafting_path == DraftingPath(EAGER, "not on CUDA: eager on a static cache")
    assert plain.drafting_path is None
    summary = decoding.report(pair, plain, assisted)["assisted"]
    assert summary["drafting_path"] == EAGER
    assert "not on CUDA" in summary["drafting_path_reason"]
    assert summary["drafting_s_per_token"] > 0


def test_a_sliding_window_assistant_keeps_the_dynamic_cache(sliding_pair):
    """A static sliding layer is a rolling buffer, which a length cannot take back."""
    generator = SimpleNamespace(
        assistant_model=sliding_pair.assistant, assistant_confidence_threshold=0.0
    )
    config = GenerationConfig(eos_token_id=0, max_length=100)
    lean = seam._lean_drafter(generator, config, DraftSettings())
    assert isinstance(lean, LeanDrafter) and "sliding-window" in lean.path.reason


def test_the_pass_a_capture_records_traces_whole(near_pair):
    """The one-token pass on the static cache, and the whole draft, trace as one graph
    (`torch.compile(fullgraph=True)` refuses a data-dependent branch or a host read, which
    would break a CUDA graph's capture too), and compute what the eager passes compute."""
    model = near_pair.assistant
    prompt = prompt_ids(near_pair)
    state = StaticState(model, CAPACITY, 3)
    with torch.inference_mode():
        state.feed(prompt[:, :-2])
        base = prompt.shape[1] - 2

        def replay():
            draft_on_device(state, 3)

        static_draft.start(state, base, prompt[0, -2:])
        replay()
        expected = state.out.clone()
        traced = torch.compile(replay, fullgraph=True, backend="eager")
        static_draft.start(state, base, prompt[0, -2:])
        traced()
        assert torch.equal(state.out[0], expected[0])
        assert torch.allclose(state.out[1], expected[1], rtol=1e-5)


def checked_graphs(model, prompt: torch.Tensor, cap: int = CAP) -> DraftGraphs:
    """The CPU's stand-in for captured graphs (`graphed`), the prompt's ids but the last
    two in their cache, as a capture leaves it."""
    graphs = graphed(model, cap)
    with torch.inference_mode():
        graphs.state.feed(prompt[:, :-2])
    return graphs


def test_the_self_check_passes_a_faithful_replay_having_judged_enough(near_pair):
    prompt = prompt_ids(near_pair)
    verdict = self_check([checked_graphs(near_pair.assistant, prompt)], prompt)
    assert verdict.check == PASSED
    assert verdict.judged >= MIN_JUDGED
    assert verdict.gap == 0.0  # every replay bit for bit as the eager passes


def test_the_self_check_refuses_a_fault_the_replays_share_with_the_static_cache(
    near_pair, monkeypatch
):
    """A rollback that keeps one position too many (one never written) is wrong in the
    eager passes on the static cache as in the replays: the loop on a DynamicCache, with
    its own cache and rollback, drafts otherwise, and the self-check says so."""
    prompt = prompt_ids(near_pair)
    graphs = checked_graphs(near_pair.assistant, prompt)
    monkeypatch.setattr(StaticState, "rewind", one_too_many)
    verdict = self_check([graphs], prompt)
    assert verdict.check == FAILED
    assert "differed from the DynamicCache loop at candidate" in verdict.detail


def test_the_self_check_passes_a_faithful_replay_the_dynamic_loop_rounds_otherwise(near_pair):
    """The DynamicCache loop's attention runs other kernels, which round otherwise: here its
    logits are 5% sharper, so its probabilities differ by far more than rounding, its
    candidates not at all. A faithful replay still passes: the loop judges candidates, and
    probabilities are held bit for bit to the eager passes on the same cache."""
    model = near_pair.assistant
    prompt = prompt_ids(near_pair)
    graphs = checked_graphs(model, prompt)

    def sharper_on_a_dynamic_cache(module, args, kwargs, output):
        if isinstance(kwargs.get("past_key_values"), DynamicCache):
            output.logits = output.logits * 1.05
        return output

    hook = model.register_forward_hook(sharper_on_a_dynamic_cache, with_kwargs=True)
    try:
        verdict = self_check([graphs], prompt)
    finally:
        hook.remove()
    assert verdict.check == PASSED, verdict.detail


def test_near_uniform_logits_leave_the_self_check_inconclusive(flat_assistant, near_pair):
    """Random weights give near-uniform logits: every candidate of the DynamicCache loop is
    a near-tie, so it judges no position, and that is no pass."""
    prompt = prompt_ids(near_pair)
    verdict = self_check([checked_graphs(flat_assistant, prompt)], prompt)
    assert verdict.check == INCONCLUSIVE
    assert verdict.judged < MIN_JUDGED
    assert f"fewer than {MIN_JUDGED}" in verdict.detail


@pytest.fixture
def flat_assistant(near_pair):
    """The near pair's assistant with its output layer scaled down 10⁴ times: its logits
    nearly uniform, as random weights give."""
    model = copy.deepcopy(near_pair.assistant)
    with torch.no_grad():
        head = model.get_output_embeddings()
        head.weight = torch.nn.Parameter(head.weight * 1e-4, requires_grad=False)
    return model


def one_too_many(state, length):
    """A rollback that keeps one position too many: a fault of the static cache's path."""
    with torch.inference_mode():
        for layer in state.cache.layers:
            layer.cumulative_length.fill_(length + 1)


@pytest.mark.parametrize("verdict", [FAILED, INCONCLUSIVE])
def test_after_a_failed_or_inconclusive_self_check_the_dynamic_cache_loop_drafts(
    near_pair, flat_assistant, monkeypatch, verdict
):
    """The product's capture and self-check on the CPU's stand-in, as if on CUDA: where the
    check fails (a static cache that rolls back wrong) or cannot judge (near-uniform
    logits), the run drafts with the lean loop on a DynamicCache, not on the static cache
    the check distrusts; it is priced at that loop's time as the check timed it, and its
    record, JSON and page say why."""
    pair = near_pair
    draft = DraftSettings(schedule="auto", assistant_quant="none", num_assistant_tokens=CAP)
    prepared = Engine.of(pair).prepare(draft)
    monkeypatch.setattr(draft_graphs, "GRAPHS", StandInGraphs())
    prompt = prompt_ids(pair)
    if verdict == FAILED:
        with monkeypatch.context() as broken:
            broken.setattr(StaticState, "rewind", one_too_many)
            outcome = draft_graphs._captured(prepared.assistant, CAP, prompt)
    else:
        outcome = draft_graphs._captured(flat_assistant, CAP, prompt)
    assert outcome.graphs is None and outcome.verdict.check == verdict
    assert outcome.reason.startswith(f"self-check {verdict}: ")
    assert outcome.reason.endswith("the lean loop on a DynamicCache")
    assert outcome.loop_s > 0
    monkeypatch.setattr(prepared.assistant, draft_graphs.OUTCOME, outcome, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    ids = encode_prompt(pair, PROMPT)
    built = draft_graphs.drafter_for_run(prepared.assistant, 0.0, (), 0.0, len(ids) + 24, CAP)
    assert type(built) is LeanDrafter
    ready = decoding.make_plan(pair, ids, "assisted", RunSettings(max_new_tokens=24), prepared)
    assert ready.policy.costs.drafter_s[seam.ASSISTANT] == outcome.loop_s

    monkeypatch.setattr(decoding, "auto_policy", lambda *_: Scripted([3, 1, 4, 2]))
    settings = RunSettings(max_new_tokens=24)
    plain = drain(decoding.run(pair, ids, "plain", settings))
    assisted = drain(decoding.run(pair, ids, "assisted", settings, draft))
    assert assisted.token_ids == plain.token_ids
    path = assisted.drafting_path
    assert (path.path, path.check, path.reason) == (EAGER, verdict, outcome.reason)
    assert path.judged == outcome.verdict.judged
    summary = decoding.report(pair, plain, assisted)["assisted"]
    assert summary["drafting_self_check"] == verdict
    assert summary["drafting_self_check_judged"] == outcome.verdict.judged


def test_graphs_stay_off_the_cpu_and_off_when_turned_off(near_pair, monkeypatch):
    model = near_pair.assistant
    prompt = prompt_ids(near_pair)
    assert not draft_graphs.pending(model, CAP)
    assert draft_graphs.capture(model, CAP, prompt) is None  # nothing captured on a CPU
    assert draft_graphs.for_run(model, 64, CAP)[0] is None
    monkeypatch.setenv(draft_graphs.ENV, "0")
    assert not draft_graphs.enabled()
    assert CUDA_GRAPHS != EAGER


def test_the_drafting_path_reads_in_words_with_its_cost_and_reason():
    summary = {
        "drafting_path": CUDA_GRAPHS,
        "drafting_path_reason": "captured in 0.40 s",
        "drafting_s_per_token": 0.0021,
    }
    assert (
        stats.describe_drafting(summary)
        == "cuda-graphs, 2.10 ms a drafted token (captured in 0.40 s)"
    )
    assert stats.describe_drafting({"drafting_path": None}) is None
    assert cli.build_parser().parse_args(["a prompt", "--no-cuda-graphs"]).no_cuda_graphs


def test_a_greedy_policy_prices_drafting_by_the_path_its_run_takes(near_pair, monkeypatch):
    """The calibration times an eager pass; where a run's drafts replay captured graphs,
    their own time per token (timed after the capture) prices the policy's drafting, else
    it would rarely draft with them. A run longer than the graphs' cache drafts eagerly
    (`draft_graphs.for_run`), and is priced at the eager cost, as is every run with graphs
    off. Through the run's plan, on the CPU's stand-in as if on CUDA."""
    pair = near_pair
    draft = DraftSettings(schedule="auto", assistant_quant="none", num_assistant_tokens=CAP)
    prepared = Engine.of(pair).prepare(draft)
    eager_s = pair.learnt.precision("none").draft_s
    graphs = graphed(prepared.assistant)
    graphs.replay_s = {gamma: 1e-6 * gamma for gamma in range(1, CAP + 1)}
    captured = draft_graphs._Outcome(os.getpid(), (graphs,), "captured")
    monkeypatch.setattr(prepared.assistant, draft_graphs.OUTCOME, captured, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    ids = encode_prompt(pair, PROMPT)

    def priced_at(max_new_tokens: int) -> float:
        settings = RunSettings(max_new_tokens=max_new_tokens)
        ready = decoding.make_plan(pair, ids, "assisted", settings, prepared)
        return ready.policy.costs.drafter_s[seam.ASSISTANT]

    fits = CAPACITY - len(ids)  # the longest answer the graphs' cache holds
    assert draft_graphs.for_run(prepared.assistant, len(ids) + fits, CAP)[0] is graphs
    assert priced_at(fits) == pytest.approx(1e-6)
    assert draft_graphs.for_run(prepared.assistant, len(ids) + fits + 1, CAP)[0] is None
    assert priced_at(fits + 1) == eager_s != 1e-6
    monkeypatch.setenv(draft_graphs.ENV, "0")  # graphs off: the eager cost again
    assert priced_at(fits) == eager_s


def test_each_draft_length_is_priced_from_its_own_replay(near_pair, monkeypatch):
    """A replay pays its launch and its one read whatever its length, so a draft of 2 costs
    more than 2/5 of a draft of 5: the policy prices each length at its own replay's time
    (timed after the capture), not at an even share of the longest's."""
    pair = near_pair
    draft = DraftSettings(schedule="auto", assistant_quant="none", num_assistant_tokens=CAP)
    prepared = Engine.of(pair).prepare(draft)
    graphs = graphed(prepared.assistant)
    graphs.replay_s = {1: 4e-6, 2: 5e-6, 3: 6e-6, 4: 7e-6, 5: 8e-6}
    captured = draft_graphs._Outcome(os.getpid(), (graphs,), "captured")
    monkeypatch.setattr(prepared.assistant, draft_graphs.OUTCOME, captured, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    ids = encode_prompt(pair, PROMPT)
    ready = decoding.make_plan(pair, ids, "assisted", RunSettings(max_new_tokens=16), prepared)
    costs = ready.policy.costs
    for gamma, seconds in graphs.replay_s.items():
        assert costs.drafting_s(seam.ASSISTANT, gamma) == pytest.approx(seconds), gamma
    assert costs.drafting_s(seam.ASSISTANT, 2) > 2 / 5 * graphs.replay_s[5]
    verify = costs.verify_s[3] + costs.call_s
    assert costs.cost_s(seam.ASSISTANT, 2) == pytest.approx(5e-6 + verify)


@pytest.fixture
def long_assistant(near_pair):
    """The near pair's assistant, its positions raised to 4,096 so that every cache size
    of `draft_graphs.BUCKETS` is captured (its rotary positions are computed, not kept)."""
    model = copy.deepcopy(near_pair.assistant)
    model.config.max_position_embeddings = 4096
    return model


def test_a_run_drafts_on_the_smallest_cache_that_holds_it(near_pair, long_assistant, monkeypatch):
    """Every pass attends over its whole cache, so the product's capture (on the CPU's
    stand-in) makes a cache of each size of `BUCKETS`, all its graphs in one memory pool
    and behind one module for the hooks; a run of at most 300 tokens drafts on the 512
    cache, replaying its graphs, and is priced at that cache's replays."""
    model = long_assistant
    stand_in = StandInGraphs()
    monkeypatch.setattr(draft_graphs, "GRAPHS", stand_in)
    outcome = draft_graphs._captured(model, CAP, prompt_ids(near_pair))
    assert outcome.graphs is not None, outcome.reason
    assert [graphs.state.capacity for graphs in outcome.graphs] == [512, 1024, 2048, 4096]
    assert len(stand_in.pools) == 4 * CAP and len({id(pool) for pool in stand_in.pools}) == 1
    assert len({id(graphs.module) for graphs in outcome.graphs}) == 1
    monkeypatch.setattr(model, draft_graphs.OUTCOME, outcome, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    capacity = {
        length: draft_graphs.for_run(model, length, CAP)[0].state.capacity
        for length in (300, 512, 513, 2049, 4096)
    }
    assert capacity == {300: 512, 512: 512, 513: 1024, 2049: 4096, 4096: 4096}
    assert draft_graphs.for_run(model, 4097, CAP)[0] is None
    assert draft_graphs.draft_costs(model, 300, CAP) == outcome.graphs[0].replay_s
    drafter = draft_graphs.drafter_for_run(model, 0.0, (), 0.0, 300, CAP)
    assert drafter.graphs is outcome.graphs[0] and "a cache of 512" in drafter.reason
    replayed = stand_in.replays
    prompt = prompt_ids(near_pair)
    assert drafter.draft(prompt, CAP) == LeanDrafter(model, 0.0, ()).draft(prompt, CAP)
    assert stand_in.replays == replayed + 1 and drafter.counts.graphed == 1


def test_a_run_drafting_through_replays_is_plain_decoding_and_says_so(near_pair, monkeypatch):
    """`decoding.run` with the assistant's drafts replayed (here by the CPU's stand-in, as
    if on CUDA): the output is plain decoding's, the record says the graphed path ran, and
    the replays were timed as drafting, a token computed at a time."""
    pair = near_pair
    monkeypatch.setattr(decoding, "auto_policy", lambda *_: Scripted([3, 1, 4, 2]))
    draft = DraftSettings(schedule="auto", assistant_quant="none", num_assistant_tokens=CAP)
    prepared = Engine.of(pair).prepare(draft)
    graphs = graphed(prepared.assistant)
    captured = draft_graphs._Outcome(os.getpid(), (graphs,), "stand-in replays")
    monkeypatch.setattr(prepared.assistant, draft_graphs.OUTCOME, captured, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    replays = []
    graphs.module.register_forward_hook(lambda _, args, out: replays.append(args[0]))
    settings = RunSettings(max_new_tokens=24)
    ids = encode_prompt(pair, PROMPT)
    plain = drain(decoding.run(pair, ids, "plain", settings))
    assisted = drain(decoding.run(pair, ids, "assisted", settings, draft))
    assert assisted.token_ids == plain.token_ids
    reason = f"stand-in replays; a cache of {CAPACITY}"
    assert assisted.drafting_path == DraftingPath(CUDA_GRAPHS, reason, 0.0)
    drafted = [step.drafted for step in assisted.steps if step.drafted]
    assert len(replays) == len(drafted) >= 4  # every draft a replay of the length asked
    # Each replay's time went to the passes as its γ tokens' (the prefill's pass aside).
    assert len(assisted.draft_forward_s) >= sum(replays)


def test_a_cache_made_in_inference_mode_drafts_outside_it(near_pair):
    """On a GPU the cache's length moves to the device at its first pass, in inference
    mode: an inference tensor, which only inference mode may change. A draft called
    outside it (the lab's timings, a bare `generate()`) still rolls it back."""
    model = near_pair.assistant
    drafter = StaticDrafter(StaticState(model, CAPACITY, CAP), 0.0, ())
    with torch.inference_mode():
        for layer in drafter.state.cache.layers:
            layer.cumulative_length = layer.cumulative_length.clone()  # as `.to("cuda")` makes
    prompt = prompt_ids(near_pair)
    first = drafter.draft(prompt, CAP)
    assert drafter.draft(prompt, CAP) == first  # rolled back to the prompt, drafted again


def test_a_padded_vocabulary_assistant_drafts_on_the_static_cache(padded_dirs):
    """Qwen2.5-7B ← 0.5B's widths: loading wraps the assistant's input embedding
    (`assisted.models.vocab`), which has no weight of its own to tell the device by."""
    pair = load(padded_dirs["target"], padded_dirs["assistant"])
    ids = prompt_ids(pair)
    loop = LeanDrafter(pair.assistant, 0.0, ())
    static = StaticDrafter(StaticState(pair.assistant, CAPACITY, CAP), 0.0, ())
    assert static.draft(ids, CAP) == loop.draft(ids, CAP)
    assert draft_graphs.device_of(pair.assistant).type == "cpu"


def test_an_evicted_pair_takes_its_assistant_and_graphs_with_it(tiny_dirs, monkeypatch):
    """Graphs captured for a pair's assistant (the CPU's stand-in, kept where `prepare`
    keeps a capture) hold the assistant: once the pair is evicted for another
    (`ASSISTED_MAX_PAIRS`), nothing keeps the assistant, its cache or its graphs alive."""
    monkeypatch.setattr(pairs, "MAX_LOADED_PAIRS", 1)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    stand_in = draft_graphs._Outcome(os.getpid(), None, "")

    def captured(model, cap, probe):
        return dataclasses.replace(stand_in, graphs=(graphed(model, cap),), reason="stand-in")

    monkeypatch.setattr(draft_graphs, "_captured", captured)
    folder = tiny_dirs["target"].parent / "near-evicted"
    build_near_model(folder, tiny_dirs["target"], scale=0.05)
    pair = load(tiny_dirs["target"], folder)
    draft = DraftSettings(schedule="auto", assistant_quant="none", num_assistant_tokens=CAP)
    Engine.of(pair).prepare(draft)
    graphs, _ = draft_graphs.for_run(pair.assistant, 64, CAP)
    assert graphs is not None and graphs.state.model is pair.assistant
    assistant, cache = weakref.ref(pair.assistant), weakref.ref(graphs.state.cache)
    del pair, graphs
    load(tiny_dirs["target"], tiny_dirs["other"])  # evicts the pair
    gc.collect()
    assert assistant() is None and cache() is None


def test_the_capture_s_recorded_includes_the_self_check(near_pair, monkeypatch):
    """A worker pays the self-check before it drafts as it pays the capture: the seconds
    recorded for the capture cover both (here a clock that the capture and the check each
    advance by a second, on the CPU's stand-in for captured graphs)."""
    clock = iter(range(100))
    tick = SimpleNamespace(perf_counter=lambda: float(next(clock)))  # draft_graphs' clock only
    monkeypatch.setattr(draft_graphs, "time", tick)

    def captured(model, cap, probe):
        next(clock)  # a second of capture
        graphs = graphed(model, cap)
        with torch.inference_mode():
            graphs.state.feed(probe[:, :-2])
        return (graphs,)

    def checked(buckets, probe):
        next(clock)  # a second of self-check
        return self_check(buckets, probe)

    monkeypatch.setattr(draft_graphs, "_capture", captured)
    monkeypatch.setattr(draft_graphs, "self_check", checked)
    monkeypatch.setattr(draft_graphs, "_replay_s", lambda graphs, probe: {CAP: 0.01})
    outcome = draft_graphs._captured(near_pair.assistant, CAP, prompt_ids(near_pair))
    assert outcome.graphs is not None, outcome.reason
    # Started at 0, then a second each for the capture and the check: read at 3, not 2.
    assert outcome.graphs[0].capture_s == 3.0
    assert outcome.reason.startswith("captured and self-checked:")  # the seconds apart


def test_a_draft_after_a_fully_accepted_one_replays_with_no_eager_pass(self_pair, monkeypatch):
    """The target as its own assistant accepts every draft, so each step leaves two ids for
    the assistant to read (its last candidate and the target's token): the replay's first
    pass reads both. In a run on the CPU's stand-in as if on CUDA, the assistant's only
    pass outside a replay is its first read of the prompt."""
    pair = self_pair
    assert pair.assistant is not pair.target  # a pass of the assistant is the assistant's
    policy = Scripted([CAP, 3])
    monkeypatch.setattr(decoding, "auto_policy", lambda *_: policy)
    # No threshold: a cut draft leaves its uncut rest in the cache, which the target's
    # token then matches, and the step leaves one id to read, not two.
    draft = DraftSettings(
        schedule="auto", assistant_quant="none", num_assistant_tokens=CAP, confidence_threshold=0.0
    )
    prepared = Engine.of(pair).prepare(draft)
    graphs = graphed(prepared.assistant)
    captured = draft_graphs._Outcome(os.getpid(), (graphs,), "stand-in replays")
    monkeypatch.setattr(prepared.assistant, draft_graphs.OUTCOME, captured, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    replaying, eager_widths = [], []
    graphs.module.register_forward_pre_hook(lambda *_: replaying.append(True))
    graphs.module.register_forward_hook(lambda *_: replaying.pop())

    def eager_pass(module, args, kwargs):
        if not replaying:
            eager_widths.append(kwargs["input_ids"].shape[1])

    settings = RunSettings(max_new_tokens=32)
    ids = encode_prompt(pair, PROMPT)
    # The run alone: its hindsight, once it is done, reads the output with the assistant.
    ready = make_plan(pair, ids, "assisted", settings, prepared)
    hook = prepared.assistant.register_forward_pre_hook(eager_pass, with_kwargs=True)
    try:
        assisted = drain(decoding.generate_watched(ready))
    finally:
        hook.remove()
    plain = drain(decoding.generate_watched(make_plan(pair, ids, "plain", settings)))
    assert assisted.token_ids == plain.token_ids
    assert assisted.drafting_path.path == CUDA_GRAPHS
    assert [drafted for drafted, _ in policy.seen[:4]] == [CAP, 3, CAP, 3]
    assert all(accepted == drafted > 0 for drafted, accepted in policy.seen), policy.seen
    assert eager_widths == [len(ids) - 2]  # the prompt, all but the two the replay reads


def test_the_capture_holds_the_graphs_contract_and_its_run_is_plain_decoding(
    near_pair, monkeypatch
):
    """The product's capture, warm-up, buffers, self-check and timing on the stand-in,
    which raises where a replay would read or write other memory than its capture: they
    pass, and a run drafting through those replays, as if on CUDA, is plain decoding."""
    pair = near_pair
    monkeypatch.setattr(decoding, "auto_policy", lambda *_: Scripted([3, 1, 4, 2, CAP]))
    draft = DraftSettings(schedule="auto", assistant_quant="none", num_assistant_tokens=CAP)
    prepared = Engine.of(pair).prepare(draft)
    stand_in = StandInGraphs()
    monkeypatch.setattr(draft_graphs, "GRAPHS", stand_in)
    outcome = draft_graphs._captured(prepared.assistant, CAP, prompt_ids(pair))
    assert outcome.graphs is not None, outcome.reason
    assert outcome.reason.startswith("captured and self-checked")
    monkeypatch.setattr(prepared.assistant, draft_graphs.OUTCOME, outcome, raising=False)
    monkeypatch.setattr(draft_graphs, "device_of", lambda model: torch.device("cuda"))
    checked = stand_in.replays
    settings = RunSettings(max_new_tokens=24)
    ids = encode_prompt(pair, PROMPT)
    plain = drain(decoding.run(pair, ids, "plain", settings))
    assisted = drain(decoding.run(pair, ids, "assisted", settings, draft))
    assert assisted.token_ids == plain.token_ids
    assert assisted.drafting_path.path == CUDA_GRAPHS
    drafted = [step.drafted for step in assisted.steps if step.drafted]
    assert stand_in.replays - checked == len(drafted) >= 4


def test_the_stand_in_refuses_what_a_graph_would_replay_wrong(near_pair):
    """The stand-in for CUDA graphs raises where a graph would replay other memory than the
    eager region reads (a rollback that replaces the cache's length, a tensor made inside a
    capture and kept), where no warm-up ran the region first, and at a host read."""
    model = near_pair.assistant
    prompt = prompt_ids(near_pair)
    stand_in = StandInGraphs()
    state = StaticState(model, CAPACITY, 2)
    region = functools.partial(draft_on_device, state, 2)
    with torch.inference_mode():
        state.feed(prompt[:, :-2])
        with pytest.raises(ContractBroken, match="no warm-up"):
            stand_in.record(region)
        with stand_in.side_stream(state.token.device):
            static_draft.start(state, prompt.shape[1] - 2, prompt[0, -2:])
            region()
        replay = stand_in.record(region)
        state.rewind(prompt.shape[1] - 2)
        replay()  # the same memory, written in place: as a graph replays it
        for layer in state.cache.layers:
            layer.cumulative_length = layer.cumulative_length.clone()
        with pytest.raises(ContractBroken, match="replaced, not written in place"):
            replay()
        with pytest.raises(ContractBroken, match="host read"):
            stand_in.record(lambda: state.out.sum().item())
        kept: list[torch.Tensor] = []

        def lazily():  # a buffer made at the first call, as a lazy module makes one
            made = torch.zeros(1)
            if not kept:
                kept.append(made)
            kept[0].add_(1)

        with pytest.raises(ContractBroken, match="its capture made, which outlived it"):
            stand_in.record(lazily)()


def baked_slice(buffer: torch.Tensor, out: torch.Tensor, at: list[int]) -> None:
    out.copy_(buffer[at[0] : at[0] + 1] * 2)  # an offset read by Python value


def baked_arange(buffer: torch.Tensor, out: torch.Tensor, at: list[int]) -> None:
    out.copy_(torch.arange(at[0], at[0] + 2, dtype=out.dtype).sum())  # positions


def baked_fill(buffer: torch.Tensor, out: torch.Tensor, at: list[int]) -> None:
    out.fill_(at[0])  # a rollback length


@pytest.mark.parametrize("region", [baked_slice, baked_arange, baked_fill])
def test_the_stand_in_refuses_a_python_int_baked_into_the_capture(region):
    """A Python int read inside a captured region is baked in: a graph replays the value of
    its capture whatever the int is now (moved from 2 to 7, `buffer[k : k + 1] * 2` gives
    4.0 on a GPU where eager Python gives 14.0). The stand-in replays the Python, so it
    must refuse a value that moved rather than compute the eager one."""
    buffer, out, at = torch.arange(10.0), torch.zeros(1), [2]
    stand_in = StandInGraphs()
    with stand_in.side_stream(torch.device("cpu")):
        region(buffer, out, at)
    replay = stand_in.record(functools.partial(region, buffer, out, at))
    replay()  # the value of its capture: as a graph replays it
    at[0] = 7
    with pytest.raises(ContractBroken, match="baked in at capture"):
        replay()


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.nonzero(),
        lambda t: t.masked_select(t > 0),
        lambda t: t.tolist(),
        lambda t: t.sum().item(),
    ],
    ids=["nonzero", "masked_select", "tolist", "item"],
)
def test_the_stand_in_refuses_a_host_read_inside_the_capture(read):
    """Each reads the device's data back to the host (`nonzero` and `masked_select` to size
    their output), which a capture refuses."""
    values = torch.arange(4.0)
    with pytest.raises(ContractBroken, match="host read"):
        StandInGraphs().record(lambda: read(values))


def test_the_stand_in_refuses_a_view_moved_along_its_storage():
    """A view made outside the region and replaced by another of the same storage, shape
    and dtype at another offset: a graph still reads the capture's offset."""
    buffer, out = torch.arange(10.0), torch.zeros(1)
    views = [buffer[2:3]]
    stand_in = StandInGraphs()
    with stand_in.side_stream(torch.device("cpu")):
        out.copy_(views[0] * 2)
    replay = stand_in.record(lambda: out.copy_(views[0] * 2))
    replay()
    views[0] = buffer[7:8]
    with pytest.raises(ContractBroken, match="replaced, not written in place"):
        replay()
