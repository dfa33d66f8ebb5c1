"""`find_batch_size`: the largest per-device batch that really fits, found by real steps.

Each trial runs what an epoch does with that batch: forward, backward and optimizer
step under the chosen precision, then a validation forward under inference_mode
(evaluation at epoch end often needs more memory than people expect: trainmedic's
RUN003). Doubling finds the first failure, binary search the boundary. The model
and optimizer are restored after every trial, so the search leaves no trace.

The effective batch size is kept: when a target is given, accumulation makes up
the difference (per-device batch x devices x accumulation >= target).
"""

from __future__ import annotations

import copy
import gc
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch.optim import Optimizer
from torch.utils.data import default_collate

import torch
from torch import nn
from trainmedic.train.config import PRECISIONS, ConfigError

_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "not enough memory")


@dataclass(frozen=True, slots=True)
class BatchSizeResult:
    """The largest per-device batch that fitted, and the accumulation that keeps the effective batch."""

    per_device: int
    grad_accum_steps: int
    effective_batch_size: int
    tried: tuple[tuple[int, bool], ...]  # (batch size, fitted) in the order tried


def is_out_of_memory(exc: BaseException) -> bool:
    """An allocation failure of the accelerator or of the host (MemoryError, allocator errors)."""
    if isinstance(exc, MemoryError):
        return True
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXT)


def find_batch_size(
    model: nn.Module,
    dataset: Sequence[Any],
    *,
    loss_fn: Callable[[Any, Any], torch.Tensor],
    optimizer: Optimizer,
    start: int = 1,
    max_batch_size: int = 4096,
    target_effective_batch_size: int | None = None,
    devices: int = 1,
    precision: str = "32",
    collate_fn: Callable[[list[Any]], Any] = default_collate,
) -> BatchSizeResult:
    """The largest batch in [start, max_batch_size] (and <= len(dataset)) whose train+eval step fits."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if start < 1 or max_batch_size < start:
        raise ConfigError(
            f"need 1 <= start <= max_batch_size, got start={start}, max_batch_size={max_batch_size}"
        )
    upper = min(max_batch_size, len(dataset))
    if upper < start:
        raise ConfigError(f"dataset has {len(dataset)} samples, fewer than start={start}")
    trial = _Trial(
        model,
        dataset=dataset,
        loss_fn=loss_fn,
        optimizer=optimizer,
        precision=precision,
        collate_fn=collate_fn,
    )
    tried: list[tuple[int, bool]] = []

    def fits(size: int) -> bool:
        ok = trial(size)
        tried.append((size, ok))
        return ok

    if not fits(start):
        raise ConfigError(f"start: even a batch of {start} does not fit in memory")
    good, bad = start, None
    while bad is None and good < upper:  # double until it fails
        candidate = min(good * 2, upper)
        if fits(candidate):
            good = candidate
        else:
            bad = candidate
    while bad is not None and bad - good > 1:  # then bisect the boundary
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    accum = 1
    if target_effective_batch_size is not None:
        accum = max(1, math.ceil(target_effective_batch_size / (good * devices)))
    return BatchSizeResult(
        per_device=good,
        grad_accum_steps=accum,
        effective_batch_size=good * devices * accum,
        tried=tuple(tried),
    )


class _Trial:
    """One real train step + validation forward at a batch size; state restored afterwards."""

    def __init__(
        self,
        model: nn.Module,
        *,
        dataset: Sequence[Any],
        loss_fn: Callable[[Any, Any], torch.Tensor],
        optimizer: Optimizer,
        precision: str,
        collate_fn: Callable[[list[Any]], Any],
    ) -> None:
        self.model, self.dataset, self.loss_fn, self.optimizer = model, dataset, loss_fn, optimizer
        self.collate_fn = collate_fn
        self.device = next(model.parameters()).device
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.model_state = copy.deepcopy(model.state_dict())
        self.optimizer_state = copy.deepcopy(optimizer.state_dict())

    def __call__(self, size: int) -> bool:
        try:
            self._step(size)
            return True
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            return False
        finally:
            self.optimizer.zero_grad(set_to_none=True)
            self.model.load_state_dict(self.model_state)
            self.optimizer.load_state_dict(self.optimizer_state)
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def _autocast(self) -> Any:
        import contextlib

        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def _step(self, size: int) -> None:
        inputs, targets = self.collate_fn([self.dataset[i] for i in range(size)])
        inputs, targets = inputs.to(self.device), targets.to(self.device)
        self.model.train()
        with self._autocast():
            loss = self.loss_fn(self.model(inputs), targets)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        del loss
        self.model.eval()
        with torch.inference_mode(), self._autocast():
            self.loss_fn(self.model(inputs), targets)
        self.model.train()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
