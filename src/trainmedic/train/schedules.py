"""Learning-rate schedules the loop knows how to step, and the batch-size arithmetic behind them.

- `warmup_cosine`: linear warm-up, then cosine decay to `min_lr_ratio` (stepped per step).
- `one_cycle`: PyTorch's OneCycleLR with the usual defaults (stepped per step).
- `reduce_on_plateau`: fed the validation metric at each epoch end by `fit`.
- `linear_scaled_lr` / `warmup_steps_for`: the linear-scaling rule (Goyal et al., 2017).
  Warm-up is a number of *samples*: a larger effective batch makes fewer, bigger
  steps, so the same warm-up takes fewer steps; the learning rate grows with the batch.

Every schedule's state is plain numbers, so it checkpoints with `weights_only=True`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR, OneCycleLR, ReduceLROnPlateau

from trainmedic.train.config import ConfigError


@dataclass(frozen=True)
class WarmupCosine:
    """The multiplier of the base learning rate at a step (a callable object, so its state saves).

    No slots: LambdaLR.state_dict() copies a callable object's ``__dict__``.
    """

    warmup_steps: int
    total_steps: int
    min_lr_ratio: float = 0.0

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = max(self.total_steps - self.warmup_steps, 1)
        progress = min((step - self.warmup_steps) / span, 1.0)
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine


def warmup_cosine(
    optimizer: Optimizer, *, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0
) -> LambdaLR:
    if total_steps < 1:
        raise ConfigError(f"total_steps must be a positive integer, got {total_steps!r}")
    if not 0 <= warmup_steps <= total_steps:
        raise ConfigError(
            f"warmup_steps must be between 0 and total_steps ({total_steps}), got {warmup_steps!r}"
        )
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ConfigError(f"min_lr_ratio must be between 0 and 1, got {min_lr_ratio!r}")
    return LambdaLR(optimizer, WarmupCosine(warmup_steps, total_steps, min_lr_ratio))


def one_cycle(optimizer: Optimizer, *, max_lr: float, total_steps: int, pct_start: float = 0.3) -> OneCycleLR:
    if total_steps < 1:
        raise ConfigError(f"total_steps must be a positive integer, got {total_steps!r}")
    return OneCycleLR(optimizer, max_lr=max_lr, total_steps=total_steps, pct_start=pct_start)


def reduce_on_plateau(
    optimizer: Optimizer, *, mode: str = "min", factor: float = 0.1, patience: int = 2
) -> ReduceLROnPlateau:
    """`fit` steps it once per epoch with the value of `best_metric` (default `val_loss`)."""
    if mode not in ("min", "max"):
        raise ConfigError(f"mode must be 'min' or 'max', got {mode!r}")
    return ReduceLROnPlateau(optimizer, mode=mode, factor=factor, patience=patience)  # type: ignore[arg-type]


def effective_batch_size(per_device: int, *, devices: int = 1, grad_accum_steps: int = 1) -> int:
    """Samples per optimizer step: per-device batch x devices x accumulation steps."""
    return per_device * devices * grad_accum_steps


def linear_scaled_lr(base_lr: float, *, effective_batch_size: int, reference_batch_size: int) -> float:
    """The learning rate for `effective_batch_size` if `base_lr` was right at `reference_batch_size`."""
    if reference_batch_size < 1 or effective_batch_size < 1:
        raise ConfigError("batch sizes must be positive integers")
    return base_lr * effective_batch_size / reference_batch_size


def warmup_steps_for(*, warmup_samples: int, effective_batch_size: int) -> int:
    """Warm-up steps covering `warmup_samples` at this effective batch size (at least 1)."""
    if effective_batch_size < 1:
        raise ConfigError(f"effective_batch_size must be a positive integer, got {effective_batch_size!r}")
    return max(1, math.ceil(warmup_samples / effective_batch_size))
