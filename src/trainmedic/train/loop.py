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
import logging
import math
import multiprocessing
import os
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.utils.data import DataLoader

import torch
from torch import nn
from trainmedic import checkpoint as ckpt
from trainmedic.events import Epoch, PhaseEnd, PhaseStart, Step, TrainingPlan
from trainmedic.instrument.channel import emit, is_supervised
from trainmedic.train import distributed as dist_
from trainmedic.train.config import RESUME_FROM_ENV, ConfigError, EarlyStopping, FitConfig
from trainmedic.train.sampler import ResumableLoader, resumable

log = logging.getLogger("trainmedic.train")

LossFn = Callable[[Any, Any], torch.Tensor]
MetricFn = Callable[[Any, Any], torch.Tensor]
OptimizerArg = Optimizer | Callable[[Iterable[nn.Parameter]], Optimizer]
SchedulerArg = Any  # an LRScheduler / ReduceLROnPlateau, or a factory taking the optimizer


@dataclass(slots=True)
class Progress:
    """Where the run is; saved in every checkpoint."""

    epoch: int = 0  # the epoch being trained (0-based)
    step: int = 0  # optimizer steps taken
    batch_in_epoch: int = 0  # micro-batches of `epoch` already consumed
    history: list[dict[str, float]] = field(default_factory=list)
    stop_best: float | None = None  # early stopping
    stop_bad_epochs: int = 0
    stopped_early: bool = False


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


class _LossSum:
    """The epoch's training-loss sum, without a device op (or host sync) per step.

    Each step appends its detached loss to `pending`, a list append (~0.1 µs; an in-place
    add on the device costs ~3 µs, a few % of a tiny model's step). Every FOLD_EVERY
    losses are summed into `total` in one op. A checkpoint saves `total` and `pending`
    apart, so a resumed run folds at the same places and sums in the same order as the
    uninterrupted one: the epoch's mean loss is bit-identical too.
    """

    FOLD_EVERY = 64

    def __init__(self, device: torch.device) -> None:
        self.total = torch.zeros((), device=device)
        self.pending: list[torch.Tensor] = []

    def fold(self) -> None:
        if self.pending:
            self.total = self.total + torch.stack(self.pending).float().sum()
            self.pending.clear()  # the same list: the loop holds it

    def value(self) -> torch.Tensor:
        """The sum so far (the state is unchanged: folding here would move the fold points)."""
        if not self.pending:
            return self.total
        return self.total + torch.stack(self.pending).float().sum()

    def state(self) -> dict[str, torch.Tensor]:
        pending = torch.stack(self.pending).cpu() if self.pending else torch.zeros(0)
        return {"epoch_loss": self.total.detach().cpu().clone(), "epoch_loss_pending": pending}

    @classmethod
    def restore(cls, saved: Mapping[str, Any], device: torch.device) -> _LossSum:
        restored = cls(device)
        restored.total = saved.get("epoch_loss", torch.zeros(())).to(device)
        pending = saved.get("epoch_loss_pending")
        if pending is not None:
            restored.pending.extend(pending.to(device).unbind())
        return restored


class _Run:
    """The state of one `fit` call; each method is one stage of the loop."""

    label_map: dict[Any, Any]
    extra_state: dict[str, Any]

    def __init__(
        self,
        model: nn.Module,
        train_loader: DataLoader[Any],
        *,
        optimizer: OptimizerArg,
        loss_fn: LossFn,
        config: FitConfig,
        val_loader: DataLoader[Any] | None,
        scheduler: SchedulerArg,
        metrics: Mapping[str, MetricFn] | None,
    ) -> None:
        self.config = config
        self.loss_fn = loss_fn
        self.val_loader = val_loader
        self.metrics = dict(metrics or {})
        self.world = dist_.setup(config.strategy)
        self.device = next(model.parameters()).device
        if self.world.strategy == "fsdp" and isinstance(optimizer, Optimizer):
            raise ConfigError(
                "optimizer: FSDP replaces the model's parameters, so pass a factory, "
                "e.g. optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3)"
            )
        self.module = model  # the unwrapped model: state dicts and evaluation
        self.model = dist_.wrap(model, self.world, self.device)
        self.optimizer = optimizer if isinstance(optimizer, Optimizer) else optimizer(self.model.parameters())
        if callable(scheduler) and not hasattr(scheduler, "step"):  # a factory
            scheduler = scheduler(self.optimizer)
        self.scheduler = scheduler
        self.interval = config.scheduler_interval
        if self.interval == "auto":
            self.interval = "epoch" if isinstance(scheduler, ReduceLROnPlateau) else "step"
        self.scaler = torch.amp.GradScaler(self.device.type) if config.precision == "fp16" else None
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(config.precision)
        self.data: ResumableLoader = resumable(
            train_loader, seed=config.seed or 0, rank=self.world.rank, world_size=self.world.world_size
        )
        if self.data.batches_per_epoch < 1:
            raise ConfigError(
                "train_loader yields no batch (empty dataset, or drop_last with a larger batch)"
            )
        self.steps_per_epoch = math.ceil(self.data.batches_per_epoch / config.grad_accum_steps)
        self.manager: ckpt.CheckpointManager | None = None
        if config.checkpoint_dir is not None and self.world.is_main:
            try:
                self.manager = ckpt.CheckpointManager(
                    config.checkpoint_dir,
                    keep_last=config.keep_last,
                    best_metric=config.best_metric,
                    best_mode=config.best_mode,
                    durable=config.checkpoint_fsync,
                )
            except OSError as exc:
                raise ConfigError(f"checkpoint_dir {config.checkpoint_dir!r}: {exc.strerror or exc}") from exc
        # Step events cost a host sync each: only when someone listens (`trainmedic run`)
        self.report_steps = self.world.is_main and is_supervised()
        self.progress = Progress()
        self.epoch_loss = _LossSum(self.device)
        self.resumed_from: str | None = None
        self.last_saved_step: int | None = None
        self.code_commit = ckpt.code_commit() if self.world.is_main and config.checkpoint_dir else None
        self.label_map = {}
        self.extra_state = {}

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

    def before_fork(self, loader: DataLoader[Any]) -> None:
        """Let a background save finish before a DataLoader forks its workers.

        A process forked while another thread is inside torch's serializer or a write
        may inherit a lock held by a thread that does not exist in the child: a hang.
        Loaders without workers, or with persistent ones already started, or started
        by spawn/forkserver, do not fork here and do not wait.
        """
        if self.manager is None or not self.manager.pending or loader.num_workers == 0:
            return
        if loader.persistent_workers and getattr(loader, "_iterator", None) is not None:
            return
        context = loader.multiprocessing_context
        if context is not None:
            method = context.get_start_method()
        else:  # not get_start_method(): that would fix the user's default as a side effect
            method = (
                multiprocessing.get_start_method(allow_none=True)
                or multiprocessing.get_all_start_methods()[0]
            )
        if method == "fork":
            self.manager.wait()

    def flush_checkpoints_quietly(self) -> None:
        """On the way out with an error: let the save in flight land, without hiding the error."""
        if self.manager is None:
            return
        try:
            self.manager.wait()
        except BaseException as exc:  # the error already propagating is the one to report
            log.warning("trainmedic: the last background checkpoint save failed too: %s", exc)

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
            self.epoch_loss = _LossSum(self.device)
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
            if len(pending) == _LossSum.FOLD_EVERY:
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

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        p = self.progress
        return {
            "format": ckpt.FORMAT,
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "progress": {
                "epoch": p.epoch,
                "step": p.step,
                "batch_in_epoch": p.batch_in_epoch,
                "stop_best": p.stop_best,
                "stop_bad_epochs": p.stop_bad_epochs,
                "stopped_early": p.stopped_early,
                **self.epoch_loss.state(),
            },
            "history": [dict(h) for h in p.history],
            "sampler": {"seed": self.data.seed, "world_size": self.world.world_size},
            "config": self.config.to_dict(),
            "label_map": self.label_map,
            "extra": self.extra_state,
            "code_commit": self.code_commit,
        }

    def save_checkpoint(self, *, metrics: Mapping[str, float]) -> None:
        """Rank 0 writes; every rank's RNG state goes in; all ranks wait for the write."""
        rng = dist_.gather(ckpt.rng_state(), self.world)
        if self.world.strategy == "fsdp":
            from trainmedic.train import fsdp

            fsdp.save(self, rng, metrics)
        elif self.manager is not None:
            state = self.state_dict()
            state["rng"] = rng
            save = self.manager.save_async if self.config.checkpoint_async else self.manager.save
            save(state, step=self.progress.step, epoch=self.progress.epoch, metrics=metrics)
        self.last_saved_step = self.progress.step
        dist_.barrier(self.world)

    def resume(self) -> None:
        """Load the checkpoint rank 0 chose (every rank the same one), or start fresh."""
        source = self.resume_source()
        if source is None:
            return
        missing_ok = self.config.checkpoint_dir is not None and source == Path(self.config.checkpoint_dir)
        choice = _choose_checkpoint(source, missing_ok=missing_ok) if self.world.is_main else None
        outcome, detail = dist_.broadcast(choice, self.world)
        if outcome == "error":
            raise ConfigError(detail)
        if outcome == "none":
            return  # nothing saved yet: a fresh start
        if self.world.strategy == "fsdp":
            from trainmedic.train import fsdp

            state = fsdp.load(self, Path(detail))
        else:
            state, _ = ckpt.load(detail)
        self.load_state_dict(state, model_and_optimizer=self.world.strategy != "fsdp")
        self.resumed_from = str(Path(detail).with_suffix(".pt"))
        self.last_saved_step = self.progress.step

    def resume_source(self) -> Path | None:
        resume = self.config.resume
        if resume is None:
            return None
        if resume == "auto":
            from_env = os.environ.get(RESUME_FROM_ENV)
            if from_env:
                return Path(from_env)
            return Path(self.config.checkpoint_dir) if self.config.checkpoint_dir else None
        return Path(resume)

    def load_state_dict(self, state: Mapping[str, Any], *, model_and_optimizer: bool = True) -> None:
        if model_and_optimizer:
            self.module.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler") is not None:
            self.scaler.load_state_dict(state["scaler"])
        saved = state["progress"]
        self.progress = Progress(
            epoch=int(saved["epoch"]),
            step=int(saved["step"]),
            batch_in_epoch=int(saved["batch_in_epoch"]),
            history=[dict(h) for h in state.get("history", [])],
            stop_best=saved.get("stop_best"),
            stop_bad_epochs=int(saved.get("stop_bad_epochs", 0)),
            stopped_early=bool(saved.get("stopped_early", False)),
        )
        self.epoch_loss = _LossSum.restore(saved, self.device)
        # the data order continues as the interrupted run drew it, even if the seed argument changed
        self.data.seed = int(state.get("sampler", {}).get("seed", self.data.seed))
        if self.data.sampler is not None:
            self.data.sampler.seed = self.data.seed
        saved_world = int(state.get("sampler", {}).get("world_size", 1))
        if saved_world != self.world.world_size and self.progress.batch_in_epoch:
            # positions are per rank: a different world size restarts the epoch
            self.progress.batch_in_epoch = 0
        rngs = state.get("rng") or []
        if rngs:
            ckpt.restore_rng_state(rngs[self.world.rank] if self.world.rank < len(rngs) else rngs[0])


def _choose_checkpoint(source: Path, *, missing_ok: bool) -> tuple[str, str | None]:
    """("ok", manifest) for the checkpoint to resume from; ("none", None); ("error", message)."""
    if not source.exists() and not missing_ok:
        return "error", f"resume: no checkpoint at {str(source)!r} (from {RESUME_FROM_ENV} or resume=)"
    if source.is_dir() or not source.exists():
        loaded = ckpt.load_latest(source)  # an absent checkpoint_dir: nothing saved yet
        return ("ok", str(loaded.info.manifest)) if loaded else ("none", None)
    try:
        return "ok", str(ckpt.verify(source).manifest)
    except ckpt.CorruptCheckpointError as exc:
        return "error", f"resume: {exc}"
