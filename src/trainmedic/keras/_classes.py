"""The public Keras classes, built once per Keras line (they subclass its Callback / Sequence)."""

from __future__ import annotations

import sys
import threading
from types import FrameType, ModuleType
from typing import Any, TextIO

from trainmedic.events import Event, GuardObservation
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.findings import Finding
from trainmedic.keras._inspect import describe_input, describe_loss, describe_output
from trainmedic.keras._recorder import FitRecorder, keras_own_train_step, stopper_of
from trainmedic.record import RunRecord
from trainmedic.rules.ker.ker004_single_unit_softmax import OBSERVATION as OUTPUT_OBSERVATION
from trainmedic.rules.trn.trn003_not_learning import LOSS_FUNCTION_OBSERVATION

_BUILT: dict[str, dict[str, type]] = {}
FIT_FRAME_DEPTH = 40  # how far up the stack the Guard looks for the fit call it runs in


def build(module: ModuleType) -> dict[str, type]:
    """{'Guard': ..., 'LoopingSequence': ..., 'Deferred': ...} for this Keras line."""
    if module.__name__ not in _BUILT:
        callback = module.callbacks.Callback
        legacy = module.__name__.split(".")[0] == "tf_keras"
        sequence = module.utils.Sequence if legacy else module.utils.PyDataset
        _BUILT[module.__name__] = {
            "Guard": _guard_class(callback, module),
            "LoopingSequence": _looping_class(sequence, legacy),
            "Deferred": _deferred_class(callback),
        }
    return _BUILT[module.__name__]


def fit_arguments(model: object) -> dict[str, Any]:
    """The local variables of the `fit` call running `model` (read from the stack; {} if none).

    A callback is handed only `params`; the Guard needs what fit was given (the
    sequence itself, shuffle, initial_epoch) and reads it where it is.
    """
    frame: FrameType | None = sys._getframe(1)
    for _ in range(FIT_FRAME_DEPTH):
        if frame is None:
            break
        if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
            return dict(frame.f_locals)
        frame = frame.f_back
    return {}


def _guard_class(base: type, module: ModuleType) -> type:
    from trainmedic.keras._auto import keras_line, stop_if_huge

    class Guard(base):  # type: ignore[misc]
        """The KER checks as an explicit callback, for runs without `trainmedic run`.

        `Guard()` in `callbacks=[...]`: before the first batch it stops a fit whose
        sequence length is huge (KER002; `stop_on_huge_len=False` only reports it);
        when fit ends it runs trainmedic's rules on what it saw, prints each finding
        with its fix (`stream`, default stderr; None for silence) and keeps them in
        `.findings`, the events in `.events`.
        """

        async_safe = True
        _supports_tf_logs = True

        def __init__(self, *, stop_on_huge_len: bool = True, stream: TextIO | None = sys.stderr) -> None:
            super().__init__()
            self.stop_on_huge_len = stop_on_huge_len
            self.stream = stream
            self.events: list[Event] = []
            self.findings: list[Finding] = []
            self._recorder: FitRecorder | None = None
            self._callbacks: list[Any] = []

        def _sink(self, event: Event) -> None:
            self.events.append(event)

        def on_train_begin(self, logs: Any = None) -> None:
            given = fit_arguments(self.model)
            info = describe_input(
                given.get("x"),
                batch_size=given.get("batch_size"),
                shuffle=given.get("shuffle", True),
                steps_per_epoch=given.get("steps_per_epoch"),
                epochs=(self.params or {}).get("epochs"),
                initial_epoch=given.get("initial_epoch") or 0,
            )
            observation = GuardObservation(check=KERAS_INPUT, data={**info, "framework": keras_line(module)})
            self._sink(observation)
            if self.stop_on_huge_len:
                stop_if_huge(observation)
            loss = describe_loss(self.model)
            if loss is not None:
                self._sink(
                    GuardObservation(
                        check=LOSS_FUNCTION_OBSERVATION, data={**loss, "framework": keras_line(module)}
                    )
                )
            output = describe_output(self.model)
            if output is not None:
                self._sink(
                    GuardObservation(
                        check=OUTPUT_OBSERVATION, data={**output, "framework": keras_line(module)}
                    )
                )
            cbs = given.get("callbacks")
            self._callbacks = list(getattr(cbs, "callbacks", cbs) or [])
            self._recorder = FitRecorder(
                self._sink, framework=keras_line(module), plan=info, user_callbacks=self._callbacks
            )
            self._recorder.loss_is_running_mean = keras_own_train_step(self.model)
            self._recorder.train_begin(self.params)

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            if self._recorder:
                self._recorder.epoch_begin(epoch)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            if self._recorder:
                self._recorder.batch_end(batch, logs)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            if self._recorder:
                self._recorder.epoch_end_begin(epoch)
                self._recorder.epoch_end_done(epoch, logs, False)

        def on_train_end(self, logs: Any = None) -> None:
            recorder = self._recorder
            if recorder is None:
                return
            if getattr(self.model, "stop_training", False) and recorder.stopped_by is None:
                recorder.stopped_by = stopper_of(self._callbacks) or "stop_training"
            history = getattr(self.model, "history", None)
            epochs = getattr(history, "epoch", None)
            ran = len(epochs) if isinstance(epochs, list) else None
            recorder.train_end(getattr(history, "history", None), ran)
            from trainmedic.registry import run_rules

            self.findings = run_rules(RunRecord.of(self.events))
            if self.stream is not None:
                for f in self.findings:
                    self.stream.write(f"trainmedic: {f.code} {f.slug}: {f.message}\n  fix: {f.fix}\n")

    return Guard


def _looping_class(base: type, legacy: bool) -> type:
    class LoopingSequence(base):  # type: ignore[misc]
        """A Sequence `multiple` times as long as `sequence`, for training by steps_per_epoch.

        `len` is `multiple * len(sequence)` (never sys.maxsize, so shuffling the
        index list stays small); item i is `sequence[i % len(sequence)]`; the
        wrapped sequence's `on_epoch_end` runs once per `len(sequence)` items
        served, i.e. once per pass over the real data, not at Keras's epoch ends.
        Worker settings (`workers`, `use_multiprocessing`, `max_queue_size`) are
        taken from the wrapped PyDataset unless given. With
        `use_multiprocessing=True`, each worker process counts the items it
        serves itself.
        """

        def __init__(self, sequence: Any, multiple: int = 10, **kwargs: Any) -> None:
            if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
                raise ValueError(f"LoopingSequence: multiple must be a positive int, got {multiple!r}")
            length = len(sequence)
            if length < 1:
                raise ValueError("LoopingSequence: the wrapped sequence is empty (len 0)")
            if legacy:
                super().__init__()
            else:
                for name in ("workers", "use_multiprocessing", "max_queue_size"):
                    if name not in kwargs and hasattr(sequence, name):
                        kwargs[name] = getattr(sequence, name)
                super().__init__(**kwargs)
            self.sequence = sequence
            self.multiple = multiple
            self.real_len = length
            self.served = 0
            self.passes = 0
            self._lock = threading.Lock()

        def __len__(self) -> int:
            return self.real_len * self.multiple

        def __getitem__(self, index: int) -> Any:
            if not 0 <= index < len(self):
                raise IndexError(f"LoopingSequence index {index} out of range [0, {len(self)})")
            item = self.sequence[index % self.real_len]
            with self._lock:
                self.served += 1
                finished_pass = self.served % self.real_len == 0
                if finished_pass:
                    self.passes += 1
            if finished_pass:
                self.sequence.on_epoch_end()
            return item

        def on_epoch_end(self) -> None:
            """A Keras epoch is not a pass over the real data: the wrapped sequence is told per pass."""

        def __getstate__(self) -> dict[str, Any]:
            state = self.__dict__.copy()
            state.pop("_lock", None)
            return state

        def __setstate__(self, state: dict[str, Any]) -> None:
            self.__dict__.update(state)
            self._lock = threading.Lock()

    return LoopingSequence


def _deferred_class(base: type) -> type:
    class Deferred(base):  # type: ignore[misc]
        """Run a heavy epoch-end callback every `every` epochs, and once after the last epoch.

        `Deferred(MapCallback(...))` runs it only once, after training;
        `Deferred(cb, every=5)` at epochs 5, 10, ... and after the last one. Keep a
        light per-epoch validation loss with fit's `validation_data` (and
        `validation_freq`) meanwhile. Only `on_epoch_end` is deferred; the train
        begin/end hooks and the model reach the wrapped callback as usual.
        """

        def __init__(self, callback: Any, every: int | None = None, at_end: bool = True) -> None:
            if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
                raise ValueError(f"Deferred: every must be a positive int or None, got {every!r}")
            super().__init__()
            self.callback = callback
            self.every = every
            self.at_end = at_end
            self.ran_at: list[int] = []
            self._last: tuple[int, Any] | None = None

        def set_model(self, model: Any) -> None:
            super().set_model(model)
            self.callback.set_model(model)

        def set_params(self, params: Any) -> None:
            super().set_params(params)
            self.callback.set_params(params)

        def on_train_begin(self, logs: Any = None) -> None:
            self.ran_at = []
            self._last = None
            self.callback.on_train_begin(logs)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self._last = (epoch, logs)
            if self.every is not None and (epoch + 1) % self.every == 0:
                self._run(epoch, logs)

        def on_train_end(self, logs: Any = None) -> None:
            if self.at_end and self._last is not None and self._last[0] not in self.ran_at:
                self._run(*self._last)
            self.callback.on_train_end(logs)

        def _run(self, epoch: int, logs: Any) -> None:
            self.ran_at.append(epoch)
            self.callback.on_epoch_end(epoch, logs)

    return Deferred
