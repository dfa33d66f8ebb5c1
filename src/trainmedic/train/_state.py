"""The state of one `fit` call: what it holds, and how it is saved and resumed.

`RunState` builds everything the loop works on (the wrapped model, the optimizer,
the resumable data, the checkpoint manager) and owns the checkpoint glue: a
checkpoint holds every piece of that state, RNG and data position included, so a
run killed at any instant resumes to the same weights, bit for bit. The loop's
stages are `trainmedic.train.loop._Run`, built on it.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.utils.data import DataLoader

import torch
from torch import nn
from trainmedic.instrument.channel import is_supervised
from trainmedic.train import checkpoint as ckpt
from trainmedic.train import distributed as dist_
from trainmedic.train.config import RESUME_FROM_ENV, ConfigError, FitConfig
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


class LossSum:
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
    def restore(cls, saved: Mapping[str, Any], device: torch.device) -> LossSum:
        restored = cls(device)
        restored.total = saved.get("epoch_loss", torch.zeros(())).to(device)
        pending = saved.get("epoch_loss_pending")
        if pending is not None:
            restored.pending.extend(pending.to(device).unbind())
        return restored


class RunState:
    """What one `fit` call holds, and its checkpoints: save, resume, and the waits they need."""

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
        self.epoch_loss = LossSum(self.device)
        self.resumed_from: str | None = None
        self.last_saved_step: int | None = None
        self.code_commit = ckpt.code_commit() if self.world.is_main and config.checkpoint_dir else None
        self.label_map = {}
        self.extra_state = {}

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
            from trainmedic.train.checkpoint import _sharded as sharded

            sharded.save(self, rng, metrics)
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
            from trainmedic.train.checkpoint import _sharded as sharded

            state = sharded.load(self, Path(detail))
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
        self.epoch_loss = LossSum.restore(saved, self.device)
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
