"""CUDA graphs' contract on a CPU: a stand-in for `draft_graphs.CudaGraphs` that the
product's own capture (`draft_graphs._capture`: its cache, warm-up and buffers) goes
through in tests.

A CUDA graph replays the kernels its capture launched on the addresses they read and wrote
then, and runs no Python. So a tensor that the captured region reads from outside it (the
static cache's keys, values and `cumulative_length`, the input-id buffers, the output
buffer, the weights) must stay where it was and be written in place: a tensor replaced by a
new one is not read by the replay, which reads the old memory. And every Python value an
operator took at the capture (a slice's bounds, an `arange`'s ends, a `fill_`'s value) is
baked into the graph: a position, an offset or a length that changes between replays must
be a device tensor. The stand-in records, for every operator the region runs, the storage,
offset, shape, strides and dtype of each tensor it takes from outside the region, and the
Python values it takes; a replay runs the region again and raises where one differs, where
the operators differ (Python that branched another way), where a tensor the capture made
outlived it and is read again, or where the region reads a value back to the host (a
capture refuses that: `item`, `nonzero`, `masked_select`, `.tolist()`). A capture raises
unless a warm-up on the side stream ran the same operators on the same tensors first (on
a GPU, cuBLAS picks its kernels and allocates its workspace there). Transformers sees a
capture in progress (`is_tracing`), as on a GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# `.item()`, `int()`, `bool()`: in inference mode as `item`, outside it as the other;
# `nonzero` and `masked_select` size their output by the data, which the host must read.
HOST_READS = frozenset(
    {
        torch.ops.aten.item.default,
        torch.ops.aten._local_scalar_dense.default,
        torch.ops.aten.nonzero.default,
        torch.ops.aten.masked_select.default,
    }
)
# Reads back without an operator, so patched for the capture and each replay instead.
UNDISPATCHED_READS = ("tolist", "numpy")


class ContractBroken(RuntimeError):
    """What a graph would have done differently from the eager region."""


@dataclass(frozen=True)
class Outside:
    """A tensor a region takes from outside it: where its memory is, and its layout."""

    storage: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: torch.dtype


class Trace(TorchDispatchMode):
    """The operators a region runs and, for each, what it reads from outside the region
    (per input: an `Outside`, or None for a tensor the region made) and the Python values
    it takes."""

    def __init__(self, capturing: bool = False):
        super().__init__()
        self.capturing = capturing  # a capture or a replay refuses host reads
        self.ops: list[tuple[str, tuple[Outside | None, ...]]] = []
        self.values: list[tuple[object, ...]] = []  # per operator, its non-tensor inputs
        self.made: set[int] = set()  # storages the region allocated

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.capturing and func in HOST_READS:
            raise ContractBroken(f"a host read inside a capture ({func})")
        leaves = tree_leaves((args, kwargs))
        roles = tuple(self._role(leaf) for leaf in leaves)
        out = func(*args, **kwargs)
        self.ops.append((str(func), roles))
        self.values.append(tuple(leaf for leaf in leaves if not isinstance(leaf, torch.Tensor)))
        outside = {role.storage for role in roles if role is not None}
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor) and _storage(leaf) not in outside:
                self.made.add(_storage(leaf))
        return out

    def _role(self, leaf: object) -> Outside | None:
        if not isinstance(leaf, torch.Tensor) or _storage(leaf) in self.made:
            return None
        return Outside(
            _storage(leaf), leaf.storage_offset(), tuple(leaf.shape), leaf.stride(), leaf.dtype
        )

    def reads(self) -> set[tuple[str, Outside]]:
        return {(op, role) for op, roles in self.ops for role in roles if role is not None}


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


@contextlib.contextmanager
def capturing(trace: Trace) -> Iterator[Trace]:
    """`trace` recording, with Transformers told that a stream capture is in progress, as a
    GPU's capture tells it (its mask code then reads nothing back), and the reads back
    that run no operator refused."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            mock.patch.object(torch.cuda, "is_current_stream_capturing", lambda: True)
        )
        for name in UNDISPATCHED_READS:
            stack.enter_context(mock.patch.object(torch.Tensor, name, _refused(name)))
        stack.enter_context(trace)
        yield trace


def _refused(name: str) -> Callable[..., None]:
    def read(*_args, **_kwargs) -> None:
        raise ContractBroken(f"a host read inside a capture (.{name}())")

    return read


class StandInGraphs:
    """`draft_graphs.CudaGraphs` on a CPU, holding a region to a graph's contract (the
    module's note). `replays` counts the replays it ran, `pools` the memory pool each
    capture was given (a CPU has none to share: each is a token)."""

    def __init__(self) -> None:
        self.warmed: set[tuple[str, Outside]] = set()
        self.replays = 0
        self.pools: list[object] = []

    def pool(self) -> object:
        return object()

    @contextlib.contextmanager
    def side_stream(self, device: torch.device) -> Iterator[None]:
        with Trace() as trace:
            yield
        self.warmed |= trace.reads()

    def record(self, region: Callable[[], None], pool: object = None) -> Callable[[], None]:
        self.pools.append(pool)
        with capturing(Trace(capturing=True)) as captured:
            region()
        cold = captured.reads() - self.warmed
        if cold:
            op, role = min(cold, key=str)
            raise ContractBroken(f"captured with no warm-up of {op} on {role}")

        def replay() -> None:
            with capturing(Trace(capturing=True)) as replayed:
                region()
            self.replays += 1
            _compare(captured, replayed)

        return replay

    def synchronize(self, device: torch.device) -> None:
        """Nothing to wait for: a CPU runs each operator before the next."""


def _compare(captured: Trace, replayed: Trace) -> None:
    """Raise where `replayed` ran other operators than `captured` or on other memory."""
    if [op for op, _ in replayed.ops] != [op for op, _ in captured.ops]:
        raise ContractBroken("the region ran other operators than its capture")
    for index, (was, now) in enumerate(zip(captured.values, replayed.values, strict=True)):
        if was != now:
            raise ContractBroken(
                f"operator {index} ({captured.ops[index][0]}) took the Python values {now}, "
                f"where its capture took {was}: baked in at capture (a position, an offset "
                "or a length must be a device tensor)"
            )
    for index, ((op, was), (_, now)) in enumerate(zip(captured.ops, replayed.ops, strict=True)):
        for position, (before, after) in enumerate(zip(was, now, strict=True)):
            if before == after:
                continue
            if before is None:
                what = "a tensor its capture made, which outlived it"
            elif after is None:
                what = "a tensor it made, where its capture read one from outside"
            else:
                what = f"{after}, where its capture read {before}: replaced, not written in place"
            raise ContractBroken(f"operator {index} ({op}), input {position}, read {what}")
