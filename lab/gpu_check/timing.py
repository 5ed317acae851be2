"""Each model's costs on this device (the package's note): T(k) after a context, the
launch-bound floor, the copy bandwidth the bandwidth-bound floor is priced at, and drafting
by path; each architecture timed once, within a budget.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import replace

import torch

from assisted.core.settings import DrafterKind
from assisted.engine.observe import synchronize
from assisted.models.registry import PairSpec
from lab.gpu_check import paths
from lab.gpu_check.architectures import ARCHITECTURES, Architecture
from lab.gpu_check.models import build, free, peaked, toy
from lab.gpu_check.paths import GAMMA, Drafting
from lab.gpu_check.speedup import Costs, Pricing

CONTEXT = 256  # tokens in the cache before the timed pass: a prompt and some answer
WARMUP = 2  # untimed passes per row count (the kernels' first calls pick their algorithms)


def time_rows(
    model, device: torch.device, context: int, max_rows: int, repeats: int
) -> tuple[float, ...]:
    """T(1)..T(max_rows): medians of `repeats` passes, taken in turn over the row counts,
    each over a fresh copy of one cache of `context` tokens."""
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, context + max_rows), device=device)
    with torch.inference_mode():
        cache = model(ids[:, :context], use_cache=True).past_key_values
        times: list[list[float]] = [[] for _ in range(max_rows)]
        for attempt in range(WARMUP + repeats):
            for rows in range(1, max_rows + 1):
                fresh = copy.deepcopy(cache)
                synchronize(device)
                started = time.perf_counter()
                model(ids[:, context : context + rows], past_key_values=fresh, use_cache=True)
                synchronize(device)
                if attempt >= WARMUP:
                    times[rows - 1].append(time.perf_counter() - started)
    return tuple(statistics.median(seconds) for seconds in times)


def bandwidth(device: torch.device, megabytes: int) -> float:
    """Bytes a second that a device-to-device copy moves, read and written: the median of
    five copies of `megabytes`."""
    source = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    seconds = []
    for _ in range(6):
        synchronize(device)
        started = time.perf_counter()
        target.copy_(source)
        synchronize(device)
        seconds.append(time.perf_counter() - started)
    return 2 * source.numel() / statistics.median(seconds[1:])


class Timer:
    """Each architecture's costs, measured once (pairs share models), within a budget."""

    def __init__(self, device, dtype, context, max_rows, repeats, tiny, deadline) -> None:
        self.device, self.dtype = device, dtype
        self.context, self.max_rows, self.repeats = context, max_rows, repeats
        self.tiny = tiny
        self.deadline = deadline
        self.targets: dict[Architecture, Costs] = {}
        self.drafters: dict[Architecture, float] = {}
        self.paths: dict[Architecture, Drafting] = {}

    def target(self, architecture: Architecture) -> Costs | None:
        """Its T(1)..T(max_rows) and floors; None past the deadline."""
        if architecture not in self.targets:
            if time.monotonic() > self.deadline:
                return None
            rows, read_bytes = self._timed(architecture, self.max_rows)
            floor, _ = self._timed(toy(architecture), 1, as_is=True)
            self.targets[architecture] = Costs(rows, floor[0], read_bytes)
        return self.targets[architecture]

    def one_row(self, architecture: Architecture) -> float | None:
        """Its T(1), a drafted token's pass; None past the deadline."""
        if architecture in self.targets:
            return self.targets[architecture].rows[0]
        if architecture not in self.drafters:
            if time.monotonic() > self.deadline:
                return None
            self.drafters[architecture] = self._timed(architecture, 1)[0][0]
        return self.drafters[architecture]

    def drafting(self, architecture: Architecture) -> Drafting | None:
        """Its drafting by path (`paths.time_drafting`); None past the deadline."""
        if architecture not in self.paths:
            if time.monotonic() > self.deadline:
                return None
            built = toy(architecture) if self.tiny else architecture
            model = build(built, self.device, self.dtype)
            # Peaked, so that the graphs' self-check has positions to judge (random
            # weights' near-uniform logits leave it none: inconclusive); costs unchanged.
            peaked(model, 0)
            self.paths[architecture] = paths.time_drafting(
                model, self.device, self.context, GAMMA, self.repeats
            )
            del model
            free(self.device)
        return self.paths[architecture]

    def _timed(
        self, architecture: Architecture, rows: int, as_is: bool = False
    ) -> tuple[tuple[float, ...], int]:
        """`time_rows` of a model built of `architecture` (at toy widths under `tiny`,
        unless `as_is`), and the bytes of weights a pass reads; its memory handed back."""
        built = toy(architecture) if self.tiny and not as_is else architecture
        model = build(built, self.device, self.dtype)
        read_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        if not built.tie:
            embedding = model.get_input_embeddings().weight
            read_bytes -= embedding.numel() * embedding.element_size()
        timed = time_rows(model, self.device, self.context, rows, self.repeats)
        del model
        free(self.device)
        return timed, read_bytes


def price(spec: PairSpec, timer: Timer) -> Pricing | None:
    """The pair's costs, or None where the budget ran out before its models."""
    target = timer.target(ARCHITECTURES[spec.target])
    if target is None:
        return None
    if spec.drafter is DrafterKind.PROMPT_LOOKUP:
        return Pricing(target, 0.0)
    if spec.drafter is DrafterKind.EARLY_EXIT:
        first = replace(ARCHITECTURES[spec.target], layers=spec.early_exit_layer or 1)
        return Pricing(target, timer.one_row(first))
    assistant = ARCHITECTURES[spec.assistant]
    return Pricing(target, timer.one_row(assistant), timer.drafting(assistant))
