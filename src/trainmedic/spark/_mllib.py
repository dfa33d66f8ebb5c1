"""Spark MLlib under `trainmedic run`: what the driver fits, splits and evaluates, as events.

`install` runs when the user's script imports `pyspark.ml` and wraps three methods, nothing
per row:

- `Estimator.fit` (every estimator, Pipeline and tuner goes through it): an observation of the
  estimator, its role (`_mllib_roles`) and the plan of the DataFrame it was fitted on; the
  training summary's objective per iteration as `Step` events; for a CrossValidator /
  TrainValidationSplit, its results (`mllib_tuning`) and its data as a split (its folds).
- `DataFrame.randomSplit`: the plan of the DataFrame split and of each part.
- `Evaluator.evaluate`: the evaluator, its metric and value, and the plan of the predictions.

Fits and evaluations inside a tuner are per fold by construction and are not observed. The
tuner fits from a thread pool, so "inside a tuner" is a process-wide depth, not thread-local;
the Pipeline a stage belongs to is thread-local (a Pipeline fits its stages in its thread).
The findings' files (DAT014, TRN009, over `trainmedic.evidence.mllib`) decide. A
failure of this module is one line on stderr and the user's call proceeds unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

from trainmedic.events import GuardObservation, Step
from trainmedic.evidence.mllib import (
    EVALUATE_OBSERVATION,
    FIT_OBSERVATION,
    SPLIT_OBSERVATION,
    TUNING,
    TUNING_OBSERVATION,
)
from trainmedic.instrument import channel
from trainmedic.spark._mllib_plans import plan_of
from trainmedic.spark._mllib_roles import NO_ROLE, role_of
from trainmedic.spark._mllib_summaries import objective_history, tuning_facts

_WRAPPED = "__trainmedic_wrapped__"
T = TypeVar("T")


class _Context:
    """Where the driver is: inside how many tuner fits (any thread), inside which Pipeline (this thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tuning_depth = 0
        self._local = threading.local()
        self.failures: set[str] = set()

    @property
    def tuning(self) -> bool:
        return self._tuning_depth > 0

    @contextlib.contextmanager
    def tuner(self) -> Iterator[None]:
        with self._lock:
            self._tuning_depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._tuning_depth -= 1

    @property
    def pipeline(self) -> str | None:
        stack: list[str] = getattr(self._local, "stack", [])
        return stack[-1] if stack else None

    @contextlib.contextmanager
    def fitting(self, name: str) -> Iterator[None]:
        stack: list[str] = self._local.__dict__.setdefault("stack", [])
        stack.append(name)
        try:
            yield
        finally:
            stack.pop()


_context = _Context()


def _safely(what: str, observe: Callable[[], T], default: T) -> T:
    """Observe without ever breaking the user's call; one stderr line per kind of failure."""
    try:
        return observe()
    except Exception as exc:
        if what not in _context.failures:
            _context.failures.add(what)
            sys.stderr.write(f"trainmedic: Spark MLlib {what} not observed: {exc!r}\n")
        return default


def _observe(check: str, data: dict[str, Any], dataframe: Any) -> None:
    plan = plan_of(dataframe)
    if plan is not None:
        channel.emit(GuardObservation(check=check, data={**data, "plan": plan.to_data()}))


# -- Estimator.fit -----------------------------------------------------------------------------------
def _wrap_fit(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def fit(self: Any, dataset: Any, params: Any = None) -> Any:
        if _context.tuning:
            return original(self, dataset, params)
        role = _safely("fit", lambda: role_of(self), NO_ROLE)
        if role == TUNING:
            return _fit_tuner(original, self, dataset, params)
        name, outermost = type(self).__name__, _context.pipeline is None
        if role != NO_ROLE:
            facts = {"estimator": name, "role": role, "within": _context.pipeline}
            _safely("fit", lambda: _observe(FIT_OBSERVATION, facts, dataset), None)
        with _context.fitting(name):
            model = original(self, dataset, params)
        if outermost and not isinstance(params, (list, tuple)):  # a PipelineModel: its stage's curve
            _safely("training summary", lambda: _emit_curve(model), None)
        return model

    setattr(fit, _WRAPPED, True)
    return fit


def _fit_tuner(original: Callable[..., Any], tuner: Any, dataset: Any, params: Any) -> Any:
    name = type(tuner).__name__
    facts = {"estimator": name, "role": TUNING, "within": _context.pipeline}
    _safely("fit", lambda: _observe(FIT_OBSERVATION, facts, dataset), None)
    split: dict[str, Any] = {"method": name, "weights": None, "parts": []}
    _safely("split", lambda: _observe(SPLIT_OBSERVATION, split, dataset), None)
    with _context.tuner():
        fitted = original(tuner, dataset, params)
    if not isinstance(params, (list, tuple)):
        _safely("tuning", lambda: _emit_tuning(tuner, fitted), None)
        _safely("training summary", lambda: _emit_curve(fitted.bestModel), None)
    return fitted


def _emit_tuning(tuner: Any, fitted: Any) -> None:
    channel.emit(GuardObservation(check=TUNING_OBSERVATION, data=tuning_facts(tuner, fitted)))


def _emit_curve(model: Any) -> None:
    for iteration, value in enumerate(objective_history(model), start=1):
        channel.emit(Step(step=iteration, metrics={"loss": value}))


# -- DataFrame.randomSplit -----------------------------------------------------------------------------
def _wrap_random_split(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def randomSplit(self: Any, weights: Any, seed: Any = None) -> Any:
        parts = original(self, weights, seed)
        if not _context.tuning:
            _safely("randomSplit", lambda: _observe_split(self, weights, parts), None)
        return parts

    setattr(randomSplit, _WRAPPED, True)
    return randomSplit


def _observe_split(whole: Any, weights: Any, parts: Any) -> None:
    roots = [plan.root for plan in map(plan_of, parts) if plan is not None]
    facts = {"method": "randomSplit", "weights": [float(w) for w in weights], "parts": roots}
    _observe(SPLIT_OBSERVATION, facts, whole)


# -- Evaluator.evaluate --------------------------------------------------------------------------------
def _wrap_evaluate(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def evaluate(self: Any, dataset: Any, params: Any = None) -> Any:
        value = original(self, dataset, params)
        if not _context.tuning:
            _safely("evaluate", lambda: _observe_evaluation(self, dataset, value), None)
        return value

    setattr(evaluate, _WRAPPED, True)
    return evaluate


def _observe_evaluation(evaluator: Any, dataset: Any, value: Any) -> None:
    getter = getattr(evaluator, "getMetricName", None)
    facts = {
        "evaluator": type(evaluator).__name__,
        "metric": str(getter()) if callable(getter) else None,
        "value": float(value) if isinstance(value, (int, float)) else None,
    }
    _observe(EVALUATE_OBSERVATION, facts, dataset)


def install(_ml: ModuleType) -> None:
    """Wrap Estimator.fit, Evaluator.evaluate and the classic DataFrame.randomSplit (idempotent)."""
    from pyspark.ml.base import Estimator
    from pyspark.ml.evaluation import Evaluator

    try:  # pyspark 4 keeps the py4j DataFrame apart from Spark Connect's
        from pyspark.sql.classic.dataframe import DataFrame
    except ImportError:  # pyspark 3: one DataFrame class
        from pyspark.sql.dataframe import DataFrame  # type: ignore[assignment]

    for owner, name, wrap in (
        (Estimator, "fit", _wrap_fit),
        (Evaluator, "evaluate", _wrap_evaluate),
        (DataFrame, "randomSplit", _wrap_random_split),
    ):
        original = getattr(owner, name)
        if not getattr(original, _WRAPPED, False):
            setattr(owner, name, wrap(original))
