"""The Lightning callback: `Guard`, imported by `trainmedic.lightning` when first used."""

from __future__ import annotations

from typing import Any

from trainmedic.errors import install_hint
from trainmedic.events import Epoch, Event, PhaseEnd, PhaseStart, Step, TrainingPlan
from trainmedic.findings import Finding
from trainmedic.logged import logged_step

try:
    from lightning.pytorch.callbacks import Callback, EarlyStopping
except ImportError:  # the legacy package name
    try:
        from pytorch_lightning.callbacks import Callback, EarlyStopping  # type: ignore[assignment]
    except ImportError as exc:
        raise ImportError(
            f"trainmedic.lightning needs Lightning: {install_hint('lightning', 'lightning')}"
        ) from exc

import trainmedic.torch as tm


class Guard(Callback):
    """Lightning callback: the PyTorch guard plus epochs requested vs done (RUN004)."""

    def __init__(self, *, every: int | None = None, on_nonfinite: str = "warn") -> None:
        self.every = every
        self.on_nonfinite = on_nonfinite
        self.guard: tm.Guard | None = None
        self._epoch_steps = 0

    def _emit(self, event: Event) -> None:
        if self.guard is not None:
            self.guard.monitor.emit(event)

    def findings(self) -> list[Finding]:
        return self.guard.findings() if self.guard is not None else []

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        optimizers = list(getattr(trainer, "optimizers", []) or [])
        self.guard = tm.guard(
            pl_module, optimizers[0] if optimizers else None, every=self.every, on_nonfinite=self.on_nonfinite
        )
        self.guard.monitor.framework_epochs = True
        if getattr(pl_module, "automatic_optimization", True):
            # Lightning divides training_step's loss by this before backward(): the guard
            # keeps the loss the user returned.
            self.guard.monitor.reads.scale = float(getattr(trainer, "accumulate_grad_batches", 1) or 1)
        max_steps = getattr(trainer, "max_steps", -1)
        self._emit(
            TrainingPlan(
                framework="lightning",
                epochs=trainer.max_epochs if trainer.max_epochs and trainer.max_epochs > 0 else None,
                max_steps=max_steps if max_steps and max_steps > 0 else None,
                early_stopping=any(isinstance(c, EarlyStopping) for c in trainer.callbacks),
            )
        )

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._epoch_steps = trainer.global_step
        if self.guard is not None:
            self.guard.monitor.epoch = trainer.current_epoch  # numbers the guard's Step events
        self._emit(PhaseStart(phase="train", epoch=trainer.current_epoch, step=trainer.global_step))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, index: int) -> None:
        step = _logged(trainer)
        if step is not None:
            self._emit(step)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        metrics = _scalars(trainer.callback_metrics)
        if self.guard is not None and "loss" not in metrics:
            loss = self.guard.monitor.take_epoch_loss()
            if loss is not None:
                metrics["loss"] = loss
        epoch = trainer.current_epoch
        self._emit(PhaseEnd(phase="train", epoch=epoch, step=trainer.global_step))
        self._emit(Epoch(epoch=epoch, steps=trainer.global_step - self._epoch_steps, metrics=metrics))

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._emit(PhaseStart(phase="eval", epoch=trainer.current_epoch, step=trainer.global_step))

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._emit(PhaseEnd(phase="eval", epoch=trainer.current_epoch, step=trainer.global_step))

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._stop()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.guard is not None:
            self.guard.stop()


def _logged(trainer: Any) -> Step | None:
    """What Lightning logs at this step (`self.log(..., on_step=True)`), as its loggers get it:
    at the steps it logs (every `log_every_n_steps`, not while it accumulates gradients), the
    step values of its results, named as `Epoch` events name them (`train_loss_step` is
    `train_loss`). Read through Lightning's logger connector, as `update_train_step_metrics`
    reads it right after this hook (private in Lightning 2.6: None where it differs); reading
    the values syncs a device only at those steps, where Lightning's loggers sync anyway."""
    try:
        connector = trainer._logger_connector
        if trainer.fit_loop._should_accumulate() and trainer.lightning_module.automatic_optimization:
            return None
        if not connector.should_update_logs:
            return None
        logs = connector.metrics["log"]
    except (AttributeError, AssertionError, KeyError, TypeError, NotImplementedError):
        return None
    values = {str(name).removesuffix("_step"): value for name, value in dict(logs).items()}
    return logged_step("lightning", values, step=trainer.global_step, epoch=trainer.current_epoch)


def _scalars(metrics: Any) -> dict[str, float]:
    """Logged metrics as plain floats (epoch-level ones; `_step` variants dropped)."""
    out: dict[str, float] = {}
    for name, value in dict(metrics).items():
        try:
            number = float(value)
        except (TypeError, ValueError, RuntimeError):
            continue
        if not name.endswith("_step"):
            out[name.removesuffix("_epoch")] = number
    return out


# Its public name: what repr, pickle and `type(callback).__module__` show.
Guard.__module__ = "trainmedic.lightning"

__all__ = ["Guard"]
