"""Tensors read to the host in one transfer, and the small conversions the monitor's parts share."""

from __future__ import annotations

import os
from typing import Any

import torch


def norms(tensors: list[Any]) -> list[Any]:
    if not tensors:
        return []
    try:
        return list(torch._foreach_norm(tensors))
    except (RuntimeError, TypeError):  # mixed devices/dtypes on old torch
        return [torch.linalg.vector_norm(t) for t in tensors]


def floats(tensors: list[Any]) -> list[float]:
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
