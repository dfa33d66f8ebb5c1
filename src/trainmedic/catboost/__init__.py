"""CatBoost: a callback that streams each iteration and checks the eval set.

    import trainmedic.catboost
    guard = trainmedic.catboost.Guard(train=X_train, evals=[(X_val, y_val)])
    model = CatBoostClassifier(iterations=500)
    model.fit(X_train, y_train, eval_set=(X_val, y_val), callbacks=[guard])
    guard.findings   # decided when first read (CatBoost has no end-of-training hook)

Under `trainmedic run` the `fit` of CatBoost's estimators gets a guard added that
sees the data and the early-stopping settings. CatBoost keeps the model of the
best validation iteration by default when an eval set is given
(`use_best_model`), so a late best round is reported only with
`use_best_model=False` and no early stopping.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from trainmedic.errors import install_hint

try:
    import catboost
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"trainmedic.catboost needs CatBoost: {install_hint('catboost', 'boosting')}") from exc

from trainmedic._boosting import RoundWatch
from trainmedic.findings import Finding

__all__ = ["Guard", "install"]

_ESTIMATORS = ("CatBoost", "CatBoostClassifier", "CatBoostRegressor", "CatBoostRanker")


class Guard:
    """A CatBoost callback (`after_iteration(info)`); decides when `findings` is read or `finish()`."""

    def __init__(
        self,
        *,
        train: Any = None,
        evals: Sequence[Any] | None = None,
        early_stopping: bool | None = None,
        echo: bool | None = None,
    ) -> None:
        self.watch = RoundWatch("CatBoost", train_names=("learn",), stopping_metric="first", echo=echo)
        self._early_stopping = early_stopping
        self._finished = False
        if train is not None and evals:
            named = [
                (f"validation_{i}" if len(evals) > 1 else "validation", _features(e))
                for i, e in enumerate(evals)
            ]
            self.watch.observe_overlap(
                train,
                [(name, data, data is train, True) for name, data in named],
                early_stopping=bool(early_stopping),
            )

    @property
    def findings(self) -> list[Finding]:
        return self.finish()

    def after_iteration(self, info: Any) -> bool:
        results = [
            (eval_name, metric, float(values[-1]), None)
            for eval_name, metrics in info.metrics.items()
            for metric, values in metrics.items()
            if values
        ]
        self.watch.on_round(int(info.iteration), results)
        return True  # CatBoost: True means "go on"

    def finish(self) -> list[Finding]:
        if not self._finished:
            self._finished = True
            self.watch.finish(early_stopping=bool(self._early_stopping))
        return self.watch.findings


def _features(item: Any) -> Any:
    """The feature matrix of an eval entry: a Pool's data when kept, or X of an (X, y) pair."""
    if isinstance(item, tuple):
        return item[0]
    if hasattr(item, "get_features"):
        try:
            return item.get_features()
        except Exception:
            return None
    return item


def install(module: ModuleType) -> None:
    """Wrap `fit` of CatBoost's estimators (called when `catboost` is imported under `run`)."""
    for name in _ESTIMATORS:
        cls = getattr(module, name, None)
        fit = getattr(cls, "fit", None)
        if cls is not None and fit is not None and not getattr(fit, "__trainmedic_wrapped__", False):
            cls.fit = _guarded_fit(fit)


def _guarded_fit(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return original(self, *args, **kwargs)
        arguments = bound.arguments
        callbacks = list(arguments.get("callbacks") or [])
        if any(isinstance(cb, Guard) for cb in callbacks):
            return original(self, *args, **kwargs)
        params = self.get_params() if hasattr(self, "get_params") else {}
        early = _early_stopping(arguments, params)
        eval_set = arguments.get("eval_set")
        evals = [] if eval_set is None else (list(eval_set) if isinstance(eval_set, list) else [eval_set])
        guard = Guard(train=arguments.get("X"), evals=evals, early_stopping=early)
        guard.watch.plan(_iterations(params), early_stopping=early)
        _observe_labels(guard, self, arguments, params)
        bound.arguments["callbacks"] = [*callbacks, guard]
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            guard.finish()

    setattr(fit, "__trainmedic_wrapped__", True)  # noqa: B010
    return fit


def _early_stopping(arguments: dict[str, Any], params: dict[str, Any]) -> bool:
    """Early stopping, or CatBoost keeping the best iteration (use_best_model: default with an eval set)."""
    if arguments.get("early_stopping_rounds") or params.get("early_stopping_rounds") or params.get("od_type"):
        return True
    use_best = arguments.get("use_best_model", params.get("use_best_model"))
    return arguments.get("eval_set") is not None and use_best is not False


def _iterations(params: dict[str, Any]) -> int | None:
    for key in ("iterations", "n_estimators", "num_boost_round", "num_trees"):
        if isinstance(params.get(key), int):
            return int(params[key])
    return 1000  # CatBoost's default


def _observe_labels(guard: Guard, model: Any, arguments: dict[str, Any], params: dict[str, Any]) -> None:
    if not isinstance(model, catboost.CatBoostClassifier):
        return
    labels = arguments.get("y")
    if labels is None and hasattr(arguments.get("X"), "get_label"):
        labels = arguments["X"].get_label()
    weighted = any(
        params.get(k) is not None for k in ("class_weights", "auto_class_weights", "scale_pos_weight")
    )
    weighted = weighted or arguments.get("sample_weight") is not None
    guard.watch.observe_labels(labels, weighted=weighted, parameter="auto_class_weights='Balanced'")
