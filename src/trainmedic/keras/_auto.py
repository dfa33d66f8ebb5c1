"""Keras instrumentation: patches `Model.fit`, `evaluate` and `predict` of the Keras line imported.

Installed by the post-import hook when the user's code imports `keras` (Keras 3,
on the TensorFlow or torch backend) or `tf_keras` (legacy Keras 2, what
`tf.keras` is under TF_USE_LEGACY_KERAS=1). The patched `fit`:

1. describes its input (`keras_input` observation) without touching the data,
   its compiled loss and its output layer (`keras_output`: activation and width,
   for KER004), and stops the run before the adapter allocates when the sequence
   length is huge (KER002), since the alternative is an OOM;
2. keeps the first rows of `x` when it is held in memory: the probe of the model's saves
   (Keras 3: `Model.save` and `save_weights` are checked, see `trainmedic.keras._saves`);
3. adds a head and a tail callback (see `trainmedic.keras._recorder`) that emit
   the training plan, phases, epochs with their real batch counts, sampled
   steps and the final history;
4. calls the real `fit` with the user's arguments, unchanged otherwise.

`evaluate` and `predict` called by the user are bracketed as `eval` / `predict`
phases (fit's own validation is bracketed by the head callback). Any failure of
the instrumentation prints one line and runs the user's call bare.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from trainmedic.events import Event, GuardObservation, PhaseEnd, PhaseStart
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.instrument import channel
from trainmedic.keras._errors import SequenceLenHugeError
from trainmedic.keras._inspect import describe_input, describe_loss, describe_output
from trainmedic.keras._recorder import FitRecorder, callback_pair
from trainmedic.rules.ker import ker002_sequence_len_huge as ker002
from trainmedic.rules.ker.ker004_single_unit_softmax import OBSERVATION as OUTPUT_OBSERVATION
from trainmedic.rules.trn.trn003_not_learning import LOSS_FUNCTION_OBSERVATION

PATCHED = "_trainmedic_patched"
KER002_ENV = ker002.WARN_ENV  # "warn": report a huge sequence length but let fit run
_local = threading.local()


def keras_line(module: ModuleType) -> str:
    """'tf-keras' for legacy Keras 2, 'keras2' for the old standalone package, else 'keras3-<backend>'."""
    if module.__name__.split(".")[0] == "tf_keras":
        return "tf-keras"
    if str(getattr(module, "__version__", "3")).startswith("2."):
        return "keras2"
    try:
        return f"keras3-{module.backend.backend()}"
    except Exception:
        return "keras3"


def install(module: ModuleType, sink: Callable[[Event], None] = channel.emit) -> None:
    """Patch the Model class of this Keras line once (idempotent)."""
    model_cls = module.Model
    if getattr(model_cls, PATCHED, False):
        return
    line = keras_line(module)
    model_cls.fit = _patched_fit(model_cls.fit, module, line, sink)
    model_cls.evaluate = _patched_phase(model_cls.evaluate, "eval", sink)
    model_cls.predict = _patched_phase(model_cls.predict, "predict", sink)
    setattr(model_cls, PATCHED, True)
    if line.startswith("keras3"):  # what Model.save / save_weights write, reloaded (TOR015)
        from trainmedic.keras import _saves

        _saves.install(module, sink)


class _ArgumentsRejected(Exception):
    """fit's own signature rejects the call: not trainmedic's to report."""


@contextlib.contextmanager
def _depth(name: str) -> Iterator[int]:
    """How deep we are in instrumented calls of this kind in this thread (a fit inside a fit)."""
    depth = getattr(_local, name, 0)
    setattr(_local, name, depth + 1)
    try:
        yield depth
    finally:
        setattr(_local, name, depth)


def _patched_fit(
    original: Callable[..., Any], module: ModuleType, line: str, sink: Callable[[Event], None]
) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _depth("fit") as depth:
            if depth:
                return original(self, *args, **kwargs)
            try:
                recorder, args, kwargs = _prepare_fit(
                    self, signature=signature, args=args, kwargs=kwargs, module=module, line=line, sink=sink
                )
            except SequenceLenHugeError:
                raise
            except _ArgumentsRejected:  # Keras itself will tell the user what is wrong
                return original(self, *args, **kwargs)
            except Exception as exc:
                sys.stderr.write(f"trainmedic: Keras instrumentation disabled for this fit: {exc!r}\n")
                return original(self, *args, **kwargs)
            try:
                return original(self, *args, **kwargs)
            except BaseException as exc:
                recorder.finish(completed=False, error=f"{type(exc).__name__}: {exc}"[:500])
                raise

    return fit


def _prepare_fit(
    model: Any,
    *,
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    module: ModuleType,
    line: str,
    sink: Callable[[Event], None],
) -> tuple[FitRecorder, tuple[Any, ...], dict[str, Any]]:
    try:
        bound = signature.bind(model, *args, **kwargs)
    except TypeError as exc:
        raise _ArgumentsRejected from exc
    given = dict(bound.arguments)
    given.update(given.pop("kwargs", {}) or {})

    def arg(name: str) -> Any:
        if name in given:
            return given[name]
        parameter = signature.parameters.get(name)
        if parameter is None or parameter.default is inspect.Parameter.empty:
            return None
        return parameter.default

    info = describe_input(
        arg("x"),
        batch_size=arg("batch_size"),
        shuffle=arg("shuffle"),
        steps_per_epoch=arg("steps_per_epoch"),
        epochs=arg("epochs"),
        initial_epoch=arg("initial_epoch") or 0,
        validation_split=arg("validation_split") or 0.0,
    )
    if line.startswith("keras3"):
        from trainmedic.keras import _saves

        _saves.remember_inputs(model, arg("x"))  # the probe of the model's saves
    observation = GuardObservation(check=KERAS_INPUT, data={**info, "framework": line})
    sink(observation)
    stop_if_huge(observation)
    described = model_observations(model, line)
    for found in described:
        sink(found)
    # A model that fit itself builds (no keras.Input) has no output yet: describe it once built.
    missing = {LOSS_FUNCTION_OBSERVATION, OUTPUT_OBSERVATION} - {o.check for o in described}

    user_callbacks = arg("callbacks")
    recorder = FitRecorder(sink, framework=line, plan=info, user_callbacks=_as_list(user_callbacks))
    if missing:

        def describe_built(built: Any) -> bool:
            for found in model_observations(built, line):
                if found.check in missing:
                    missing.discard(found.check)
                    sink(found)
            return not missing

        recorder.when_built = describe_built
    strategy = type(getattr(model, "_distribution_strategy", None)).__name__
    recorder.batch_hooks = "ParameterServer" not in strategy  # tf-keras forbids batch hooks there
    head, tail = callback_pair(module, recorder)
    callbacks_list_cls = getattr(module.callbacks, "CallbackList", None)
    if callbacks_list_cls is not None and isinstance(user_callbacks, callbacks_list_cls):
        # A CallbackList of the user's: add ours to it in place, configured like its members.
        user_callbacks.callbacks[:0] = [head]
        user_callbacks.callbacks.append(tail)
        for cb in (head, tail):
            cb.set_model(model)
            cb.set_params(getattr(user_callbacks, "params", None) or {})
        return recorder, args, kwargs
    callbacks = [head, *_as_list(user_callbacks), tail]
    names = list(signature.parameters)
    position = names.index("callbacks") - 1  # minus self
    if len(args) > position:
        args = (*args[:position], callbacks, *args[position + 1 :])
    else:
        kwargs = {**kwargs, "callbacks": callbacks}
    return recorder, args, kwargs


def model_observations(model: Any, line: str) -> list[GuardObservation]:
    """The compiled cross-entropy (TRN003's chance level) and the output layer (KER004), when readable."""
    found = []
    loss = describe_loss(model)
    if loss is not None:
        found.append(GuardObservation(check=LOSS_FUNCTION_OBSERVATION, data={**loss, "framework": line}))
    output = describe_output(model)
    if output is not None:
        found.append(GuardObservation(check=OUTPUT_OBSERVATION, data={**output, "framework": line}))
    return found


def stop_if_huge(observation: GuardObservation) -> None:
    """Raise before the adapter allocates, unless TRAINMEDIC_KER002=warn."""
    finding = ker002.judge(observation)
    if finding is None:
        return
    if os.environ.get(KER002_ENV, "stop").lower() == "warn":
        sys.stderr.write(f"trainmedic: {finding.code} {finding.slug}: {finding.message}\n")
        return
    raise SequenceLenHugeError(finding)


def _as_list(callbacks: Any) -> list[Any]:
    if callbacks is None:
        return []
    if isinstance(callbacks, (list, tuple)):
        return list(callbacks)
    inner = getattr(callbacks, "callbacks", None)
    return list(inner) if isinstance(inner, list) else [callbacks]


def _patched_phase(
    original: Callable[..., Any], phase: str, sink: Callable[[Event], None]
) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        # fit's own validation pass: the head callback brackets it already.
        if kwargs.get("_use_cached_eval_dataset"):
            return original(self, *args, **kwargs)
        with _depth(phase) as depth:
            if depth:
                return original(self, *args, **kwargs)
            _quiet(sink, PhaseStart(phase=phase))
            try:
                return original(self, *args, **kwargs)
            finally:
                _quiet(sink, PhaseEnd(phase=phase))

    return call


def _quiet(sink: Callable[[Event], None], event: Event) -> None:
    try:
        sink(event)
    except Exception as exc:
        sys.stderr.write(f"trainmedic: could not record a Keras phase: {exc!r}\n")
