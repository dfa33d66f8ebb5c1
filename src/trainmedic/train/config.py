"""The loop's options as frozen keyword-only dataclasses, validated once, up front.

A typo or an impossible value fails before the first step, with a message that
names the argument (torchtitan keeps its config the same way: plain data, no
`exec`'d files). `ConfigError` is both a `ValueError` (what Python users catch)
and trainmedic's `UsageError` (what the CLI prints as one line, exit 2).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainmedic.errors import UsageError

PRECISIONS = ("32", "bf16", "fp16")
STRATEGIES = ("auto", "none", "ddp", "fsdp")
SCHEDULER_INTERVALS = ("auto", "step", "epoch")
MODES = ("min", "max")

# Set by `trainmedic verify-resume` and `trainmedic run --restarts`; they override the script's values.
CHECKPOINT_DIR_ENV = "TRAINMEDIC_CHECKPOINT_DIR"
MAX_STEPS_ENV = "TRAINMEDIC_MAX_STEPS"
RESUME_FROM_ENV = "TRAINMEDIC_RESUME_FROM"


class ConfigError(UsageError, ValueError):
    """A bad argument to `fit` / `find_batch_size`; the message names it."""


def _positive_int(name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class EarlyStopping:
    """Stop when `monitor` has not improved by `min_delta` for `patience` epochs."""

    monitor: str = "val_loss"
    mode: str = "min"
    patience: int = 3
    min_delta: float = 0.0

    def __post_init__(self) -> None:
        _choice("early_stopping.mode", self.mode, MODES)
        _positive_int("early_stopping.patience", self.patience)
        if self.min_delta < 0:
            raise ConfigError(f"early_stopping.min_delta must be >= 0, got {self.min_delta!r}")

    def improved(self, value: float, best: float | None) -> bool:
        if math.isnan(value):  # NaN never improves
            return False
        if best is None:
            return True
        if self.mode == "min":
            return value < best - self.min_delta
        return value > best + self.min_delta


@dataclass(frozen=True, kw_only=True, slots=True)
class FitConfig:
    """Everything `fit` does that is not an object (model, data, optimizer, loss)."""

    epochs: int | None = None
    max_steps: int | None = None  # optimizer steps; whichever of epochs/max_steps comes first
    precision: str = "32"
    grad_accum_steps: int = 1
    max_grad_norm: float | None = None
    scheduler_interval: str = "auto"  # ReduceLROnPlateau: epoch (fed the monitor); others: step
    early_stopping: EarlyStopping | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int | None = None  # optimizer steps between checkpoints (and every epoch end)
    keep_last: int = 3
    checkpoint_fsync: bool = True  # False: safe against kills, not against power loss (detected)
    checkpoint_async: bool = True  # write on a thread; training waits only for a copy to CPU memory
    best_metric: str | None = "val_loss"
    best_mode: str = "min"
    resume: str | None = "auto"  # "auto" | path | None
    seed: int | None = 0
    strategy: str = "auto"  # auto: DDP under torchrun with WORLD_SIZE > 1
    log_every: int = 10

    def __post_init__(self) -> None:
        if self.epochs is None and self.max_steps is None:
            raise ConfigError("give epochs or max_steps (both are None)")
        _positive_int("epochs", self.epochs, allow_none=True)
        _positive_int("max_steps", self.max_steps, allow_none=True)
        _choice("precision", self.precision, PRECISIONS)
        _positive_int("grad_accum_steps", self.grad_accum_steps)
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ConfigError(f"max_grad_norm must be > 0 or None, got {self.max_grad_norm!r}")
        _choice("scheduler_interval", self.scheduler_interval, SCHEDULER_INTERVALS)
        _positive_int("checkpoint_every", self.checkpoint_every, allow_none=True)
        _positive_int("keep_last", self.keep_last)
        _choice("best_mode", self.best_mode, MODES)
        _choice("strategy", self.strategy, STRATEGIES)
        _positive_int("log_every", self.log_every)
        if self.checkpoint_dir is None and self.checkpoint_every is not None:
            raise ConfigError("checkpoint_every needs checkpoint_dir")
        if self.resume not in (None, "auto") and not Path(self.resume).exists():
            raise ConfigError(f"resume: no checkpoint at {self.resume!r} (use 'auto', a path, or None)")

    def with_environment(self) -> FitConfig:
        """Apply the overrides a supervising trainmedic command put in the environment."""
        changes: dict[str, Any] = {}
        if os.environ.get(CHECKPOINT_DIR_ENV):
            changes["checkpoint_dir"] = os.environ[CHECKPOINT_DIR_ENV]
        cap = os.environ.get(MAX_STEPS_ENV)
        if cap:
            if not cap.isdigit() or int(cap) < 1:
                raise ConfigError(f"{MAX_STEPS_ENV} must be a positive integer, got {cap!r}")
            changes["max_steps"] = min(int(cap), self.max_steps or int(cap))
        if not changes:
            return self
        return FitConfig(**{**self.as_fields(), **changes})

    def as_fields(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the checkpoint (loadable with weights_only=True)."""
        return asdict(self)
