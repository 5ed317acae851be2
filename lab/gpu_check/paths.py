"""What drafting costs on this device by path: the GPU check's drafting table.

Drafting per token, the assistant drafting `gamma` tokens a draft after a context of
`context` tokens (no stopping rule, so every draft runs to its length), medians of
`repeats` drafts after warm-up ones, the device synchronised around each:
- the lean loop on a DynamicCache (`assisted.engine.drafters.static_draft.LeanDrafter`), a
  pass and a read a token;
- the same loop on a static cache (`static_draft.StaticDrafter`), eager;
- the draft replayed as CUDA graphs (`assisted.engine.drafters.draft_graphs`), read back
  once, where they were captured (CUDA, and graphs on); with the capture's seconds, and
  the self-check's verdict and the positions it judged (the caller peaks a random model,
  else near-uniform logits leave the check inconclusive), and the replay of a draft of
  `gamma` per token on each cache size (`draft_graphs.BUCKETS`), as the capture timed it.
Host synchronisations per draft are counted with CUDA's sync debug mode (none to count on a
CPU), the committed ids given as a run's lookup read them.
"""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import asdict, dataclass

import torch

from assisted.engine.drafters import draft_graphs
from assisted.engine.drafters.static_draft import LeanDrafter, StaticDrafter, StaticState
from assisted.engine.observe import synchronize

GAMMA = 8  # the drafts timed: the registry's cap under `auto`
WARMUP_DRAFTS = 2  # untimed drafts after the one that prefills the context
PROBE_TOKENS = 32  # the context the graphs' self-check drafts after


@dataclass(frozen=True)
class Drafting:
    """An assistant's seconds per drafted token by path on this device (the module's note);
    the graphs' capture seconds and why the graphed path did or did not run; host
    synchronisations per draft (None where they cannot be counted: a CPU); the graphs'
    self-check verdict and the positions it judged (None where none ran)."""

    loop_s: float
    static_s: float
    graphed_s: float | None
    capture_s: float | None
    reason: str
    loop_syncs: int | None
    graphed_syncs: int | None
    check: str | None = None
    judged: int | None = None
    by_cache_s: dict[int, float] | None = None  # capacity: a replay's seconds per token

    def to_dict(self) -> dict:
        return asdict(self)


SYNC_WARNING = "called a synchronizing CUDA operation"  # what the debug mode warns per read


def time_drafting(model, device: torch.device, context: int, gamma: int, repeats: int) -> Drafting:
    """`model`'s drafting by path (the module's note)."""
    prefix = torch.randint(0, model.config.vocab_size, (1, context), device=device)
    ids = prefix[0].tolist()
    length = context + gamma + 1
    loop = LeanDrafter(model, 0.0, ())
    static = StaticDrafter(StaticState(model, length, gamma), 0.0, ())
    loop_s = _seconds_per_token(loop, prefix, ids, gamma, repeats)
    static_s = _seconds_per_token(static, prefix, ids, gamma, repeats)
    draft_graphs.capture(model, gamma, prefix[:, :PROBE_TOKENS])
    graphs, reason = draft_graphs.for_run(model, length, gamma)
    outcome = draft_graphs.outcome_of(model)
    verdict = outcome.verdict if outcome is not None else None
    by_cache_s = None
    if outcome is not None and outcome.graphs is not None:
        by_cache_s = {g.state.capacity: g.replay_s[gamma] / gamma for g in outcome.graphs}
    graphed_s = graphed_syncs = capture_s = None
    if graphs is not None:
        graphed = StaticDrafter(graphs.state, 0.0, (), 0.0, graphs, reason)
        graphed_s = _seconds_per_token(graphed, prefix, ids, gamma, repeats)
        graphed_syncs = _syncs(graphed, prefix, ids, gamma)
        capture_s = graphs.capture_s
    return Drafting(
        loop_s,
        static_s,
        graphed_s,
        capture_s,
        reason,
        _syncs(loop, prefix, ids, gamma),
        graphed_syncs,
        verdict.check if verdict else None,
        verdict.judged if verdict else None,
        by_cache_s,
    )


def _seconds_per_token(drafter, prefix: torch.Tensor, ids: list[int], gamma: int, repeats: int):
    """The median seconds of a draft of `gamma` after `prefix`, per token; the first
    draft prefills the cache, the next ones each read the last id again and draft."""
    device = prefix.device
    for _ in range(1 + WARMUP_DRAFTS):
        drafter.draft(prefix, gamma, ids)
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        drafted = drafter.draft(prefix, gamma, ids)
        synchronize(device)
        seconds.append(time.perf_counter() - started)
        if len(drafted) != gamma:
            raise RuntimeError(f"a draft of {len(drafted)}, not {gamma}: a rule cut it")
    return statistics.median(seconds) / gamma


def _syncs(drafter, prefix: torch.Tensor, ids: list[int], gamma: int) -> int | None:
    """Host synchronisations in one draft, as CUDA's sync debug mode warns of them."""
    if prefix.device.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            drafter.draft(prefix, gamma, ids)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # Only the operations: turning the mode on first warns that it is a prototype feature,
    # which counted as a second read of the first assistant timed in a process.
    return sum(SYNC_WARNING in str(warning.message) for warning in caught)
