"""One `fit` call turned into events, from the callback hooks Keras calls anyway.

`FitRecorder` is framework-free: two thin callbacks (`callback_pair`) forward
Keras's hooks to it. The *head* callback runs first in the list and the *tail*
last, so the `epoch_end` phase brackets the user's own epoch-end callbacks
(where a heavy evaluation lives) and the `Epoch` event carries the logs those
callbacks added.

Cost on the hot path: `on_train_batch_end` stores the batch index and reads a
clock; a `Step` event (with the step time averaged over the window) is written
at most once per `STEP_INTERVAL_S`. Logs stay as the framework made them until
a sampled step converts them. Nothing here touches the data or a random
generator.

Every batch's loss is in the curve without a read per batch: Keras' own `train_step`
logs the loss as the running mean of the epoch so far (its loss tracker, reset at each
epoch), so two readings, of n and m batches, give the exact mean of the batches between
them, (m x mean_m - n x mean_n) / (m - n). Each `Step` carries that window's mean and
`window` (its first step and its number of batches), as the PyTorch guard's do; a spike
between two readings lifts its window's mean. A model with its own `train_step` logs
whatever it returns (a running mean or the last batch's value): its readings are kept
as they are.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from functools import wraps
from typing import Any, TypeVar

from trainmedic.events import Epoch, Event, GuardObservation, PhaseEnd, PhaseStart, Step, TrainingPlan
from trainmedic.rules.ker.ker003_history_epochs_mismatch import OBSERVATION as FIT_END_OBSERVATION

STEP_INTERVAL_S = 1.0
Sink = Callable[[Event], None]
F = TypeVar("F", bound=Callable[..., Any])


def _safe(method: F) -> F:
    """A recorder failure disables the recorder with one warning; training goes on untouched."""

    @wraps(method)
    def guarded(self: FitRecorder, *args: Any, **kwargs: Any) -> Any:
        if self.disabled:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            self.disabled = True
            sys.stderr.write(f"trainmedic: Keras instrumentation disabled for this fit: {exc!r}\n")
            return None

    return guarded  # type: ignore[return-value]


def to_floats(logs: Mapping[str, Any] | None) -> dict[str, float]:
    """Scalar logs as floats (tensors and numpy scalars included); other values are skipped."""
    out: dict[str, float] = {}
    for key, value in (logs or {}).items():
        try:
            out[str(key)] = float(value)
        except (TypeError, ValueError):
            continue
    return out


def stopper_of(callbacks: Iterable[object]) -> str | None:
    """Which callback set `stop_training`: an EarlyStopping that stopped, else a named callback."""
    for cb in callbacks:
        if type(cb).__name__ == "EarlyStopping" and getattr(cb, "stopped_epoch", None):
            return "EarlyStopping"
    return None


class FitRecorder:
    """The state of one fit call and the events it emits."""

    def __init__(
        self,
        sink: Sink,
        *,
        framework: str,
        plan: Mapping[str, Any],
        user_callbacks: Iterable[object] = (),
    ) -> None:
        self.sink = sink
        self.framework = framework
        self.plan = dict(plan)
        self.user_callbacks = list(user_callbacks)
        self.disabled = False
        # tf-keras refuses batch hooks under ParameterServerStrategy: then epochs carry no batch count.
        self.batch_hooks = True
        self.epoch: int | None = None
        self.epoch_last_batch = -1
        self.global_step = 0
        self.epochs_run = 0
        self.stopped_by: str | None = None
        self.open_phase: str | None = None
        self.ended = False
        self._window_start = 0.0
        self._window_steps = 0
        self._next_step_at = 0.0
        # Keras' own train_step logs the loss as the epoch's running mean (see the docstring).
        self.loss_is_running_mean = False
        self._last_reading: tuple[int, float] | None = None  # (batches, running mean) this epoch
        # Describes a model fit had to build (see keras._auto): tried at train begin and at
        # the first epoch end (Keras 3 on TensorFlow builds it in the first step); True once done.
        self.when_built: Callable[[Any], bool] | None = None

    # -- phases -------------------------------------------------------------------
    def _start(self, phase: str, epoch: int | None) -> None:
        self.open_phase = phase
        self.sink(PhaseStart(phase=phase, epoch=epoch, step=self.global_step))

    def _end(self, phase: str) -> None:
        if self.open_phase == phase:
            self.open_phase = None
            self.sink(PhaseEnd(phase=phase, epoch=self.epoch, step=self.global_step))

    # -- hooks, in the order Keras calls them ---------------------------------------------
    @_safe
    def model_built(self, model: Any, *, last: bool = False) -> None:
        if self.when_built is not None and (self.when_built(model) or last):
            self.when_built = None

    @_safe
    def train_begin(self, params: Mapping[str, Any] | None) -> None:
        params = params or {}
        epochs = params.get("epochs", self.plan.get("epochs"))
        initial = int(self.plan.get("initial_epoch") or 0)
        steps = params.get("steps")
        self.plan["steps_per_epoch"] = steps if steps is not None else self.plan.get("steps_per_epoch")
        self.plan["epochs"] = epochs
        self.sink(
            TrainingPlan(
                framework=self.framework,
                epochs=epochs - initial if isinstance(epochs, int) else None,
                steps_per_epoch=self.plan["steps_per_epoch"],
                samples=self.plan.get("samples"),
                batch_size=self.plan.get("batch_size"),
                early_stopping=any(type(cb).__name__ == "EarlyStopping" for cb in self.user_callbacks),
            )
        )
        self._window_start = time.perf_counter()
        self._next_step_at = self._window_start  # the first batch is always reported

    @_safe
    def epoch_begin(self, epoch: int) -> None:
        self.epoch = epoch
        self.epoch_last_batch = -1
        self._last_reading = None
        self._start("train", epoch)

    def batch_end(self, batch: int, logs: Mapping[str, Any] | None) -> None:
        """Hot path: no decorator, two comparisons and a clock read per batch."""
        if batch > self.epoch_last_batch:  # noqa: PLR1730 (cheaper than max() on the hot path)
            self.epoch_last_batch = batch
        self._window_steps += 1
        now = time.perf_counter()
        if now >= self._next_step_at and not self.disabled:
            self._emit_step(batch, logs, now)

    @_safe
    def _emit_step(self, batch: int, logs: Mapping[str, Any] | None, now: float) -> None:
        steps = max(self._window_steps, 1)
        metrics = to_floats(logs)
        window = self._loss_window(batch + 1, metrics)
        self.sink(
            Step(
                step=self.global_step + batch + 1,
                epoch=self.epoch,
                metrics=metrics,
                duration_s=(now - self._window_start) / steps,
                window=window,
            )
        )
        self._window_start, self._window_steps = now, 0
        self._next_step_at = now + STEP_INTERVAL_S

    def _loss_window(self, batches: int, metrics: dict[str, float]) -> dict[str, int] | None:
        """Turn the running mean in `metrics["loss"]` into the mean of the batches since the
        last reading of this epoch (see the module docstring); the window, or None."""
        running = metrics.get("loss")
        if not self.loss_is_running_mean or running is None:
            return None
        last, self._last_reading = self._last_reading, (batches, running)
        before, before_mean = last if last is not None else (0, 0.0)
        if batches <= before or not (math.isfinite(running) and math.isfinite(before_mean)):
            return None  # a non-finite mean stays as read: the window holds a NaN/Inf batch
        metrics["loss"] = (batches * running - before * before_mean) / (batches - before)
        return {"first_step": self.global_step + before + 1, "n": batches - before}

    @_safe
    def test_begin(self) -> None:
        self._end("train")
        self._start("eval", self.epoch)

    @_safe
    def test_end(self) -> None:
        self._end("eval")

    @_safe
    def epoch_end_begin(self, epoch: int) -> None:
        self._end("train")
        self._start("epoch_end", epoch)

    @_safe
    def epoch_end_done(self, epoch: int, logs: Mapping[str, Any] | None, stop_training: bool) -> None:
        steps = self.epoch_last_batch + 1 if self.batch_hooks else None
        self.global_step += steps or 0
        self.epochs_run += 1
        self.sink(Epoch(epoch=epoch, metrics=to_floats(logs), steps=steps))
        self._end("epoch_end")
        if stop_training and self.stopped_by is None:
            self.stopped_by = stopper_of(self.user_callbacks) or "stop_training"

    @_safe
    def train_end(self, history: Mapping[str, Any] | None, epochs_in_history: int | None) -> None:
        self.finish(completed=True, history=history, epochs_in_history=epochs_in_history)

    @_safe
    def finish(
        self,
        *,
        completed: bool,
        history: Mapping[str, Any] | None = None,
        epochs_in_history: int | None = None,
        error: str | None = None,
    ) -> None:
        """The `keras_fit_end` observation; once per fit (train_end, or the wrapper on an exception)."""
        if self.ended:
            return
        self.ended = True
        for phase in ("eval", "epoch_end", "train"):
            self._end(phase)
        epochs = self.plan.get("epochs")
        initial = int(self.plan.get("initial_epoch") or 0)
        self.sink(
            GuardObservation(
                check=FIT_END_OBSERVATION,
                epoch=self.epoch,
                step=self.global_step,
                data={
                    "framework": self.framework,
                    "completed": completed,
                    "error": error,
                    "epochs_requested": epochs - initial if isinstance(epochs, int) else None,
                    "initial_epoch": initial,
                    "epochs_run": self.epochs_run if epochs_in_history is None else epochs_in_history,
                    "steps_per_epoch": self.plan.get("steps_per_epoch"),
                    "stopped_by": self.stopped_by,
                    "early_stopping": any(type(cb).__name__ == "EarlyStopping" for cb in self.user_callbacks),
                    "history": {k: _floats(v) for k, v in (history or {}).items()},
                },
            )
        )


def _floats(values: Any) -> list[float | None]:
    out: list[float | None] = []
    for value in values if isinstance(values, (list, tuple)) else []:
        try:
            number = float(value)
        except (TypeError, ValueError):
            out.append(None)
            continue
        out.append(number if math.isfinite(number) else None)
    return out


def keras_own_train_step(model: Any) -> bool:
    """Whether `model` trains with Keras' own `train_step` (Keras 3 or tf-keras), whose logged
    loss is its loss tracker's running mean; a subclass's own `train_step` returns what it likes."""
    step = getattr(type(model), "train_step", None)
    return getattr(step, "__module__", "").startswith(("keras.", "tf_keras."))


def callback_pair(keras_module: Any, recorder: FitRecorder) -> tuple[Any, Any]:
    """The head and tail callbacks of one fit, subclasses of that Keras line's Callback."""
    head_cls, tail_cls = _classes(keras_module)
    return head_cls(recorder), tail_cls(recorder)


_CLASS_CACHE: dict[int, tuple[type, type]] = {}


def _classes(keras_module: Any) -> tuple[type, type]:
    key = id(keras_module)
    if key not in _CLASS_CACHE:
        _CLASS_CACHE[key] = _build_classes(keras_module.callbacks.Callback)
    return _CLASS_CACHE[key]


def _build_classes(base: type) -> tuple[type, type]:
    class TrainmedicHead(base):  # type: ignore[misc]
        """First in the list: opens phases, counts batches."""

        async_safe = True  # Keras 3: keep the async batch dispatch the run had without us
        _supports_tf_logs = True  # tf-keras: do not sync logs to numpy for us on every batch

        def __init__(self, recorder: FitRecorder) -> None:
            super().__init__()
            self._tm = recorder

        def _implements_train_batch_hooks(self) -> bool:  # tf-keras asks before calling them
            return self._tm.batch_hooks

        def on_train_begin(self, logs: Any = None) -> None:
            self._tm.model_built(self.model)
            self._tm.loss_is_running_mean = keras_own_train_step(self.model)
            self._tm.train_begin(self.params)

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self._tm.epoch_begin(epoch)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self._tm.batch_end(batch, logs)

        def on_test_begin(self, logs: Any = None) -> None:
            self._tm.test_begin()

        def on_test_end(self, logs: Any = None) -> None:
            self._tm.test_end()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self._tm.model_built(self.model, last=True)
            self._tm.epoch_end_begin(epoch)

    class TrainmedicTail(base):  # type: ignore[misc]
        """Last in the list: closes the epoch after the user's callbacks ran."""

        _supports_tf_logs = True

        def __init__(self, recorder: FitRecorder) -> None:
            super().__init__()
            self._tm = recorder

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self._tm.epoch_end_done(epoch, logs, bool(getattr(self.model, "stop_training", False)))

        def on_train_end(self, logs: Any = None) -> None:
            history = getattr(self.model, "history", None)
            epochs = getattr(history, "epoch", None)
            self._tm.train_end(
                getattr(history, "history", None), len(epochs) if isinstance(epochs, list) else None
            )

    return TrainmedicHead, TrainmedicTail
