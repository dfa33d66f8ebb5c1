"""Tensors read to the host in one transfer, and the small conversions the monitor's parts share."""

from __future__ import annotations

import os
import sys
from operator import itemgetter
from typing import Any

import torch


def readable(tensor: Any) -> Any:
    """What a norm of the guard reads of a parameter or a gradient, or None: nothing to read.

    A dense floating or complex tensor as it is; a sparse one's values (a COO gradient, as an
    `Embedding(sparse=True)` makes, coalesced first: its duplicate indices add up); a 1-byte
    float (float8) as a float32 copy, which norm kernels take. Integer, bool and quantized
    tensors (a seed generator's state, a step counter, a quantized weight) are not trained by
    gradients, and a meta tensor holds no values: no norm reads them. A DTensor (FSDP2's
    sharded parameters and gradients) as its local shard: the norms are then this rank's part,
    read without a collective (one here would have to be matched on every rank). A tensor whose
    storage was freed (FSDP frees an unsharded parameter's storage after its forward and
    backward, and the module keeps the tensor: reading it crashes the process) holds no values.
    Sampled checks only.
    """
    if _is_dtensor(tensor):
        tensor = tensor.to_local()
    if tensor.is_meta or tensor.is_quantized:
        return None
    if tensor.numel() and tensor.layout is torch.strided and _freed(tensor):
        return None
    dtype = tensor.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        return None
    layout = tensor.layout
    if layout is torch.sparse_coo:
        tensor = tensor.coalesce().values()
    elif layout in _SPARSE_COMPRESSED:
        tensor = tensor.values()
    elif layout is not torch.strided:
        return None
    return tensor.float() if dtype.itemsize == 1 else tensor


def _freed(tensor: Any) -> bool:
    """Whether a strided tensor's storage holds no bytes (a wrapper without storage: not freed)."""
    try:
        return not tensor.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError, TypeError):
        return False


def _is_dtensor(tensor: Any) -> bool:
    """A `torch.distributed.tensor.DTensor` (never imported here: none exists until it is)."""
    module = sys.modules.get("torch.distributed.tensor")
    dtensor = getattr(module, "DTensor", None)
    return dtensor is not None and isinstance(tensor, dtensor)


_SPARSE_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def norms(tensors: list[Any]) -> list[Any]:
    if not tensors:
        return []
    try:
        return list(torch._foreach_norm(tensors))
    except (RuntimeError, TypeError):  # mixed devices/dtypes on old torch
        return [torch.linalg.vector_norm(t) for t in tensors]


_Tensor = torch.Tensor  # bound once: `kept` runs on every step, and skips a module attribute lookup


def kept(value: Any) -> Any:
    """What the guard keeps of a loss or a norm until its next read.

    On the CPU its value, read now: there it is no sync, and the cheapest way to hold it. A
    kept tensor (even a detached alias) holds two glibc allocations, its TensorImpl and its
    storage, between the short-lived buffers of every later step; on a small model glibc's
    malloc then works harder on every step (callgrind, a 0.6 ms step, checks every 1,000
    steps: about 14,000 of the guard's 49,000 instructions a step in `_int_malloc`). Anywhere
    else a reference, no copy and no read: detached, since the loss itself would keep its
    step's autograd nodes (and what custom Functions put on ctx) alive until the read. Only an
    exact CPU `Tensor` is read: a subclass (DTensor) may need a collective to give its value.
    """
    if type(value) is _Tensor and value.is_cpu:
        # The hooks call this outside any try: a read refused here (under vmap, or a warning
        # turned into an error) must fall back to the alias, never fail the user's backward().
        # (A try costs nothing in Python 3.11 until it catches; `contextlib.suppress` would
        # cost three times the read.)
        try:
            return value.item()
        except Exception:
            pass
    return alias(value)


def alias(value: Any) -> Any:
    """A tensor kept by reference: detached (same storage, no copy, no read) when it has a graph."""
    return value.detach() if value.requires_grad else value


LOSS_STEP, LOSS_VALUE = itemgetter(0), itemgetter(1)  # of a (step, loss) pair, taken in C


def loss_sum(losses: list[tuple[int, float]]) -> float:
    """The sum of (step, loss) pairs' losses, added in C."""
    total: float = sum(map(LOSS_VALUE, losses))
    return total


def all_finite(losses: list[tuple[int, float]]) -> bool:
    """No loss of these (step, loss) pairs is NaN or Inf, told by one sum in C rather than a test
    of each in Python: a sum is finite only when every term is (a finite sum that overflows says
    False: the caller then looks at each)."""
    total = loss_sum(losses)
    return total - total == 0.0


def read_prefix(values: list[Any]) -> int:
    """How many values, from the first, are floats already, told at C speed: a CPU run's losses
    are read as they came but for a watched step's, kept with its graph until its check (the
    last ones: losses are kept in step order). The checks take those as they are, and read only
    the rest, instead of looking at each value in Python. 0 when the floats are not all first."""
    types = list(map(type, values))
    count = types.count(float)
    return count if count == len(values) or types[:count].count(float) == count else 0


def floats(values: list[Any]) -> list[float]:
    """Losses and norms as floats: those read already (a number) as they are, the single-element
    tensors in one host read."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if len(tensors) == len(values):
        return _read(tensors)
    read = iter(_read(tensors))
    return [next(read) if isinstance(v, torch.Tensor) else float(v) for v in values]


def _read(tensors: list[Any]) -> list[float]:
    """Single-element tensors as floats, in one host read.

    On the CPU `.item()` is no sync and the cheapest read (a stack and `tolist` cost more);
    anywhere else one `stack` then one `tolist` make it a single transfer.
    """
    if not tensors:
        return []
    if all(t.is_cpu for t in tensors):
        return [float(t.item()) for t in tensors]
    device = next(t.device for t in tensors if not t.is_cpu)
    try:
        return [float(v) for v in torch.stack(tensors).reshape(-1).tolist()]
    except (RuntimeError, TypeError):  # mixed shapes ((), (1,)), dtypes or devices
        return torch.stack([t.detach().reshape(()).float().to(device) for t in tensors]).tolist()


def as_float(value: Any) -> float | None:
    """A learning rate as a float (None when it is a tensor or missing)."""
    return float(value) if isinstance(value, (int, float)) else None


def int_env(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None
