"""LightGBM: a callback that streams each boosting round and checks the eval sets.

    import trainmedic.lightgbm
    guard = trainmedic.lightgbm.Guard()
    model = lgb.LGBMClassifier(n_estimators=300)
    model.fit(X_train, y_train, eval_set=[(X_val, y_val)], callbacks=[guard])
    guard.finish()   # or read guard.findings; printed to stderr when not under `trainmedic run`

LightGBM has no end-of-training hook for callbacks: the guard finishes by itself
at the last round; after early stopping (which ends training by an exception)
call `guard.finish()`, or let `trainmedic run` do it: under `run`,
`lightgbm.train` (which the sklearn estimators call) gets a guard added that
sees the raw data before LightGBM frees it, so eval sets that merely copy or
overlap the training rows are caught too (TRN009).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from trainmedic.errors import install_hint

try:
    import lightgbm as lgb
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"trainmedic.lightgbm needs LightGBM: {install_hint('lightgbm', 'boosting')}") from exc

from trainmedic._boosting import RoundWatch, wrap_everywhere
from trainmedic.findings import Finding

__all__ = ["Guard", "guarded_train", "install"]

# LightGBM's aliases of early_stopping_round (lightgbm/basic.py _ConfigAliases)
_EARLY_STOPPING_KEYS = ("early_stopping_round", "early_stopping_rounds", "early_stopping", "n_iter_no_change")
_CLASS_WEIGHT_KEYS = ("scale_pos_weight", "is_unbalance", "unbalance", "unbalanced_sets")


class Guard:
    """A LightGBM callback (called after each iteration) that keeps the rounds and decides at the end."""

    order = 15  # after LightGBM's log_evaluation (10), before early_stopping (30) ends the loop
    before_iteration = False

    def __init__(self, *, early_stopping: bool | None = None, echo: bool | None = None) -> None:
        self.watch = RoundWatch("LightGBM", stopping_metric="first", echo=echo)
        self._early_stopping = early_stopping
        self._started = False
        self._finished = False

    @property
    def findings(self) -> list[Finding]:
        return self.watch.findings

    def __call__(self, env: Any) -> None:
        if not self._started:
            self._start(env)
        results = [
            (item[0], item[1], float(item[2]), bool(item[3]))
            for item in env.evaluation_result_list or []
            if len(item) >= 4  # lgb.cv adds a std: (name, metric, mean, higher_better, std)
        ]
        self.watch.on_round(env.iteration + 1, results)
        if env.iteration + 1 >= env.end_iteration:
            self.finish()

    def _start(self, env: Any) -> None:
        self._started = True
        model = env.model
        train_name = getattr(model, "_train_data_name", "training")
        self.watch.train_names.add(train_name)
        if self._early_stopping is None:
            self._early_stopping = _early_stopping_from(env.params or {})
        names = [item[0] for item in env.evaluation_result_list or []]
        if names and all(name == train_name for name in names):
            # lgb.train(valid_sets=[train_set]): LightGBM evaluates (and disables early stopping) on it
            self.watch.observe_overlap(
                None,
                [(train_name, None, True, True)],
                early_stopping=bool(self._early_stopping),
            )

    def finish(self) -> list[Finding]:
        """Decide now (idempotent): call after training when early stopping may have ended it."""
        if not self._finished:
            self._finished = True
            best = None
            self.watch.finish(early_stopping=bool(self._early_stopping), best_round=best)
        return self.watch.findings


def _early_stopping_from(params: dict[str, Any]) -> bool:
    return any((params.get(key) or 0) > 0 for key in _EARLY_STOPPING_KEYS if isinstance(params.get(key), int))


def guarded_train(original: Callable[..., Any]) -> Callable[..., Any]:
    """`lightgbm.train` with a Guard that sees the raw data before LightGBM frees it (under `run`)."""

    signature = inspect.signature(original)

    @functools.wraps(original)
    def train(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)  # let LightGBM report the bad call itself
        kwargs = dict(bound.arguments)
        params, train_set = kwargs.pop("params"), kwargs.pop("train_set")
        callbacks = list(kwargs.get("callbacks") or [])
        if any(isinstance(cb, Guard) for cb in callbacks):
            return original(params, train_set, **kwargs)
        early = _early_stopping_from(params or {}) or any(
            type(cb).__name__ == "_EarlyStoppingCallback" for cb in callbacks
        )
        guard = Guard(early_stopping=early)
        rounds = kwargs.get("num_boost_round", 100)
        guard.watch.plan(rounds if isinstance(rounds, int) else None, early_stopping=early)
        _observe_sets(guard, train_set, kwargs.get("valid_sets"), kwargs.get("valid_names"), early)
        _observe_labels(guard, params or {}, train_set)
        kwargs["callbacks"] = [*callbacks, guard]
        try:
            return original(params, train_set, **kwargs)
        finally:
            guard.finish()

    setattr(train, "__trainmedic_wrapped__", True)  # noqa: B010
    return train


def _observe_sets(guard: Guard, train_set: Any, valid_sets: Any, names: Any, early: bool) -> None:
    if valid_sets is None:
        return
    sets: Sequence[Any] = [valid_sets] if isinstance(valid_sets, lgb.Dataset) else list(valid_sets)
    labels = [names] if isinstance(names, str) else list(names or [])
    held_out = [s for s in sets if s is not train_set]
    evals = []
    for i, data in enumerate(sets):
        name = labels[i] if i < len(labels) else ("training" if data is train_set else f"valid_{i}")
        same = data is train_set
        decides = not same or not held_out  # LightGBM stops on every set except the training one
        evals.append((name, None if same else getattr(data, "data", None), same, decides))
    guard.watch.observe_overlap(getattr(train_set, "data", None), evals, early_stopping=early)


def _observe_labels(guard: Guard, params: dict[str, Any], train_set: Any) -> None:
    objective = str(params.get("objective", ""))
    if objective not in ("binary", "multiclass", "multiclassova", "softmax", "ova", "ovr"):
        return
    weighted = any(params.get(key) not in (None, False, 1, 1.0) for key in _CLASS_WEIGHT_KEYS) or (
        getattr(train_set, "weight", None) is not None
    )
    parameter = "scale_pos_weight / is_unbalance" if objective == "binary" else "class_weight"
    guard.watch.observe_labels(getattr(train_set, "label", None), weighted=weighted, parameter=parameter)


def install(module: ModuleType) -> None:
    """Wrap `train` wherever LightGBM binds it (called when `lightgbm` is imported under `run`)."""
    modules = ["lightgbm", "lightgbm.engine"]
    if "lightgbm.sklearn" in sys.modules:  # only when scikit-learn is installed
        modules.append("lightgbm.sklearn")
    wrap_everywhere(modules, "train", guarded_train)
