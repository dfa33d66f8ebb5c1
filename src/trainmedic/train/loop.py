"""`fit`: a PyTorch training loop you can read top to bottom, right by construction.

What it gets right that hand-written loops often do not:
- accumulation scales the loss by the real window size (the last, partial window of
  an epoch included) and skips the DDP gradient all-reduce on the micro-steps;
- gradients are unscaled before clipping; fp16 uses a GradScaler, bf16 does not need one;
- `zero_grad(set_to_none=True)` after every optimizer step; the scheduler after the optimizer;
- validation under `torch.inference_mode()` and `model.eval()`, the mode restored after;
- a checkpoint holds every piece of state (RNG and data position included), so a run
  killed at any instant resumes to the same weights, bit for bit, without replaying data;
- no host sync and no device op per step for bookkeeping: the losses are kept as a list
  and summed every 64 steps; step events read them every `log_every` steps.

It reports what it does with the same events as trainmedic's guards (a no-op when not
supervised), so `trainmedic run` applies every rule to it.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.utils.data import DataLoader

import torch
from torch import nn
from trainmedic.events import Epoch, PhaseEnd, PhaseStart, Step, TrainingPlan
from trainmedic.instrument.channel import emit
from trainmedic.train import distributed as dist_
from trainmedic.train._state import (
    LossFn,
    LossSum,
    MetricFn,
    OptimizerArg,
    RunState,
    SchedulerArg,
)
from trainmedic.train.config import ConfigError, EarlyStopping, FitConfig


@dataclass(frozen=True, slots=True)
class FitResult:
    """What `fit` did: per-epoch history, steps, epochs, whether it stopped early or resumed."""

    history: list[dict[str, float]]
    steps: int
    epochs: int
    stopped_early: bool
    resumed_from: str | None
    effective_batch_size: int | None
    checkpoint_dir: str | None


def fit(
    model: nn.Module,
    train_loader: DataLoader[Any],
    *,
    optimizer: OptimizerArg,
    loss_fn: LossFn,
    epochs: int | None = None,
    max_steps: int | None = None,
    val_loader: DataLoader[Any] | None = None,
    scheduler: SchedulerArg = None,
    metrics: Mapping[str, MetricFn] | None = None,
    precision: str = "32",
    grad_accum_steps: int = 1,
    max_grad_norm: float | None = None,
    scheduler_interval: str = "auto",
    early_stopping: EarlyStopping | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    checkpoint_every: int | None = None,
    keep_last: int = 3,
    checkpoint_fsync: bool = True,
    checkpoint_async: bool = True,
    best_metric: str | None = "val_loss",
    best_mode: str = "min",
    resume: str | os.PathLike[str] | None = "auto",
    seed: int | None = 0,
    strategy: str = "auto",
    log_every: int = 10,
    label_map: Mapping[Any, Any] | None = None,
    extra_state: Mapping[str, Any] | None = None,
) -> FitResult:
    """Train `model` on batches `(inputs, targets)`: `loss_fn(model(inputs), targets)`.

    `optimizer` (and `scheduler`) may be factories (`lambda params: AdamW(params)`,
    `lambda opt: warmup_cosine(opt, ...)`): FSDP needs them, since sharding replaces
    the parameters. `metrics` maps a name to `fn(outputs, targets) -> tensor`, averaged
    over the validation set as `val_<name>`. See docs/train.md.
    """
    config = FitConfig(
        epochs=epochs,
        max_steps=max_steps,
        precision=precision,
        grad_accum_steps=grad_accum_steps,
        max_grad_norm=max_grad_norm,
        scheduler_interval=scheduler_interval,
        early_stopping=early_stopping,
        checkpoint_dir=None if checkpoint_dir is None else os.fspath(checkpoint_dir),
        checkpoint_every=checkpoint_every,
        keep_last=keep_last,
        checkpoint_fsync=checkpoint_fsync,
        checkpoint_async=checkpoint_async,
        best_metric=best_metric,
        best_mode=best_mode,
        resume=None if resume is None else os.fspath(resume),
        seed=seed,
        strategy=strategy,
        log_every=log_every,
    ).with_environment()
    _check_objects(model, train_loader, optimizer, loss_fn, val_loader)
    run = _Run(
        model,
        train_loader,
        optimizer=optimizer,
        loss_fn=loss_fn,
        config=config,
        val_loader=val_loader,
        scheduler=scheduler,
        metrics=metrics,
    )
    run.label_map = dict(label_map or {})
    run.extra_state = dict(extra_state or {})
    return run.fit()


def _check_objects(
    model: object, loader: object, optimizer: object, loss_fn: object, val_loader: object
) -> None:
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(loader, DataLoader):
        raise ConfigError(f"train_loader must be a torch DataLoader, got {type(loader).__name__}")
    if val_loader is not None and not isinstance(val_loader, DataLoader):
        raise ConfigError(f"val_loader must be a torch DataLoader or None, got {type(val_loader).__name__}")
    if not (isinstance(optimizer, Optimizer) or callable(optimizer)):
        raise ConfigError(f"optimizer must be a torch Optimizer or a factory, got {type(optimizer).__name__}")
    if not callable(loss_fn):
        raise ConfigError(f"loss_fn must be callable, got {type(loss_fn).__name__}")


def seed_everything(seed: int) -> None:
    """Python, NumPy and torch (CPU and every GPU) from one seed."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, list | tuple):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def _batch_len(targets: Any) -> int:
    return len(targets) if hasattr(targets, "__len__") else 1


class _Run(RunState):
    """One `fit` call's loop; each method is one stage of it (the state and checkpoints: `RunState`)."""

    # ------------------------------------------------------------------ the loop

    def fit(self) -> FitResult:
        if self.config.seed is not None:
            seed_everything(self.config.seed)
        self.resume()
        self.emit_plan()
        try:
            while not self.finished():
                emit(PhaseStart(phase="train", epoch=self.progress.epoch, step=self.progress.step))
                self.train_epoch()
                emit(PhaseEnd(phase="train", epoch=self.progress.epoch, step=self.progress.step))
                if self.progress.batch_in_epoch < self.data.batches_per_epoch:
                    break  # max_steps reached inside the epoch
                self.end_epoch()
            if self.config.checkpoint_dir and self.last_saved_step != self.progress.step:
                self.save_checkpoint(metrics={})
            if self.manager is not None:
                self.manager.wait()  # the last background save is durable before fit returns
        except BaseException:
            self.flush_checkpoints_quietly()
            raise
        dist_.barrier(self.world)
        return FitResult(
            history=list(self.progress.history),
            steps=self.progress.step,
            epochs=self.progress.epoch,
            stopped_early=self.progress.stopped_early,
            resumed_from=self.resumed_from,
            effective_batch_size=self.effective_batch_size,
            checkpoint_dir=self.config.checkpoint_dir,
        )

    def finished(self) -> bool:
        p, c = self.progress, self.config
        return (
            p.stopped_early
            or (c.epochs is not None and p.epoch >= c.epochs)
            or (c.max_steps is not None and p.step >= c.max_steps)
        )

    def train_epoch(self) -> None:
        """Micro-batches of one epoch, from the saved position on.

        The per-step path does only what the enabled features need: with accumulation,
        DDP/FSDP, autocast, a scaler, clipping, step events or step checkpoints off, it
        is the hand-written loop plus one list append (the epoch's loss, summed later).
        """
        p, k, config = self.progress, self.config.grad_accum_steps, self.config
        self.model.train()
        total = self.data.batches_per_epoch
        if p.batch_in_epoch == 0:
            self.epoch_loss = LossSum(self.device)
        pending = self.epoch_loss.pending
        move = self.device.type != "cpu"  # a CPU loader's batches are where a CPU model is
        grad_sync_matters = self.world.strategy != "none"
        every, max_steps = config.checkpoint_every, config.max_steps
        since_log = torch.zeros((), device=self.device)
        steps_since_log = 0
        window, closes_window = 1, True
        self.before_fork(self.data.loader)
        for batch in self.data.epoch(p.epoch, p.batch_in_epoch):
            inputs, targets = _to_device(batch, self.device) if move else batch
            if k > 1:
                window_start = (p.batch_in_epoch // k) * k
                window = min(k, total - window_start)  # the epoch's last window may be shorter
                closes_window = p.batch_in_epoch + 1 == window_start + window
            if closes_window or not grad_sync_matters:
                loss = self.forward_backward(inputs, targets, window)
            else:
                with dist_.no_grad_sync(self.model, self.world, skip=True):
                    loss = self.forward_backward(inputs, targets, window)
            detached = loss.detach()
            pending.append(detached)
            if len(pending) == LossSum.FOLD_EVERY:
                self.epoch_loss.fold()
            if self.report_steps:
                since_log += detached / window
            p.batch_in_epoch += 1
            if not closes_window:
                continue
            grad_norm = self.optimizer_step()
            p.step += 1
            if self.report_steps:
                steps_since_log += 1
                if p.step % config.log_every == 0 or p.step == 1:
                    self.emit_step(since_log / steps_since_log, grad_norm)
                    since_log, steps_since_log = torch.zeros((), device=self.device), 0
            if every and p.step % every == 0 and p.batch_in_epoch < total:
                self.save_checkpoint(metrics={})
            if max_steps is not None and p.step >= max_steps:
                break

    def forward_backward(self, inputs: Any, targets: Any, window: int) -> torch.Tensor:
        """The loss of one micro-batch, its gradient added in (scaled by the window's size)."""
        if self.autocast_dtype is None:
            loss = self.loss_fn(self.model(inputs), targets)
        else:
            with torch.autocast(self.device.type, dtype=self.autocast_dtype):
                loss = self.loss_fn(self.model(inputs), targets)
        scaled = loss / window if window > 1 else loss  # the mean over the window's samples
        if self.scaler is not None:
            scaled = self.scaler.scale(scaled)
        scaled.backward()  # type: ignore[no-untyped-call]
        return loss

    def optimizer_step(self) -> torch.Tensor | None:
        """Unscale, clip, step, zero, schedule: in this order."""
        grad_norm = None
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        if self.config.max_grad_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None and self.interval == "step":
            self.scheduler.step()
        return grad_norm

    def end_epoch(self) -> None:
        p = self.progress
        sums = {"train_loss": self.epoch_loss.value()}
        sums["train_batches"] = torch.tensor(float(self.data.batches_per_epoch))
        reduced = dist_.reduce_sums(sums, self.world)
        metrics = {"train_loss": reduced["train_loss"] / reduced["train_batches"]}
        if self.val_loader is not None:
            metrics.update(self.evaluate())
        metrics["lr"] = float(self.optimizer.param_groups[0]["lr"])
        p.history.append(metrics)
        if self.world.is_main:
            emit(Epoch(epoch=p.epoch, metrics=metrics, steps=self.steps_per_epoch))
        self.step_epoch_scheduler(metrics)
        self.update_early_stopping(metrics)
        p.epoch += 1
        p.batch_in_epoch = 0
        if self.config.checkpoint_dir:
            self.save_checkpoint(metrics=metrics)

    def step_epoch_scheduler(self, metrics: Mapping[str, float]) -> None:
        if self.scheduler is None or self.interval != "epoch":
            return
        if isinstance(self.scheduler, ReduceLROnPlateau):
            monitor = self.config.best_metric or "val_loss"
            if monitor not in metrics:
                raise ConfigError(
                    f"scheduler: ReduceLROnPlateau needs the metric {monitor!r} (give val_loader)"
                )
            self.scheduler.step(metrics[monitor])
        else:
            self.scheduler.step()

    def update_early_stopping(self, metrics: Mapping[str, float]) -> None:
        rule, p = self.config.early_stopping, self.progress
        if rule is None:
            return
        if rule.monitor not in metrics:
            raise ConfigError(f"early_stopping.monitor: no metric {rule.monitor!r}; have {sorted(metrics)}")
        value = metrics[rule.monitor]
        if rule.improved(value, p.stop_best):
            p.stop_best, p.stop_bad_epochs = value, 0
        else:
            p.stop_bad_epochs += 1
            p.stopped_early = p.stop_bad_epochs >= rule.patience

    def evaluate(self) -> dict[str, float]:
        """Mean loss and metrics over the validation set, all ranks together."""
        assert self.val_loader is not None
        emit(PhaseStart(phase="eval", epoch=self.progress.epoch, step=self.progress.step))
        # DDP's wrapper would broadcast buffers on every forward; FSDP needs its wrapper.
        net = self.model if self.world.strategy == "fsdp" else self.module
        was_training = net.training
        net.eval()
        sums = {f"val_{name}": torch.zeros((), device=self.device) for name in ("loss", *self.metrics)}
        count = torch.zeros((), device=self.device)
        try:
            with torch.inference_mode(), self.autocast():
                self.before_fork(self.val_loader)
                for batch in self.val_loader:
                    inputs, targets = _to_device(batch, self.device)
                    outputs = net(inputs)
                    n = _batch_len(targets)
                    sums["val_loss"] += self.loss_fn(outputs, targets).float() * n
                    for name, fn in self.metrics.items():
                        sums[f"val_{name}"] += fn(outputs, targets).float() * n
                    count += n
        finally:
            net.train(was_training)
            emit(PhaseEnd(phase="eval", epoch=self.progress.epoch, step=self.progress.step))
        reduced = dist_.reduce_sums({**sums, "count": count}, self.world)
        total = max(reduced.pop("count"), 1.0)
        return {name: value / total for name, value in reduced.items()}

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    # ------------------------------------------------------------------ events

    @property
    def effective_batch_size(self) -> int | None:
        batch = self.data.loader.batch_size
        return None if batch is None else batch * self.world.world_size * self.config.grad_accum_steps

    def emit_plan(self) -> None:
        if not self.world.is_main:
            return
        emit(
            TrainingPlan(
                framework="trainmedic",
                epochs=self.config.epochs,
                steps_per_epoch=self.steps_per_epoch,
                max_steps=self.config.max_steps,
                batch_size=self.effective_batch_size,
                early_stopping=self.config.early_stopping is not None,
            )
        )

    def emit_step(self, mean_loss: torch.Tensor, grad_norm: torch.Tensor | None) -> None:
        """One host sync every `log_every` steps: the mean loss since the last one."""
        metrics = {"loss": float(mean_loss)}
        metrics["lr"] = float(self.optimizer.param_groups[0]["lr"])
        if grad_norm is not None:
            metrics["grad_norm"] = float(grad_norm)
        emit(Step(step=self.progress.step, epoch=self.progress.epoch, metrics=metrics))
