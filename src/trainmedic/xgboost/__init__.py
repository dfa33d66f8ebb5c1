"""XGBoost: a training callback that streams each boosting round and checks the eval sets.

    import trainmedic.xgboost
    guard = trainmedic.xgboost.Guard(train=X_train, evals=[(X_val, y_val)])
    model = xgb.XGBClassifier(n_estimators=300, callbacks=[guard])
    model.fit(X_train, y_train, eval_set=[(X_val, y_val)])
    guard.findings   # also printed to stderr when not under `trainmedic run`

Under `trainmedic run` nothing is needed: `xgboost.train` (which the sklearn
estimators call) gets a Guard added, and sees the DMatrix objects themselves.
Findings: TRN009 (the eval set that stops or scores the model is, or overlaps,
the training data), TRN004 (validation metric best long before the last round,
no early stopping), DAT009 info (heavy imbalance with no scale_pos_weight or
weights), and every round as an `Epoch` event for TRN001/TRN002.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from trainmedic.errors import install_hint

try:
    import xgboost as xgb
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"trainmedic.xgboost needs XGBoost: {install_hint('xgboost', 'boosting')}") from exc

from trainmedic._boosting import RoundWatch, wrap_everywhere
from trainmedic.findings import Finding

__all__ = ["Guard", "guarded_train", "install"]


class Guard(xgb.callback.TrainingCallback):
    """Streams each round's evaluation results; decides at the end of training.

    `train` and `evals` (optional: the feature matrices, or (X, y) / (DMatrix, name)
    pairs as given to `fit`/`train`) let the guard compare rows for TRN009 outside
    `trainmedic run`; the last eval set is the one XGBoost's early stopping watches.
    """

    def __init__(
        self,
        *,
        train: Any = None,
        evals: Sequence[Any] | None = None,
        early_stopping: bool | None = None,
        echo: bool | None = None,
    ) -> None:
        super().__init__()
        self.watch = RoundWatch("XGBoost", stopping_metric="last", echo=echo)
        self._train = train
        self._evals = list(evals or [])
        self._early_stopping = early_stopping
        self._overlap_done = False

    @property
    def findings(self) -> list[Finding]:
        return self.watch.findings

    def before_training(self, model: Any) -> Any:
        if self._train is not None and self._evals and not self._overlap_done:
            named = [_named(i, item, len(self._evals)) for i, item in enumerate(self._evals)]
            pairs = [(name, data, data is self._train, decides) for name, data, decides in named]
            self.watch.observe_overlap(self._train, pairs, early_stopping=bool(self._early_stopping))
        return model

    def after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Mapping[str, Any]]) -> bool:
        results = []
        for eval_name, metrics in evals_log.items():
            for metric, values in metrics.items():
                last = values[-1]
                if isinstance(last, tuple):  # xgboost.cv: (mean, std)
                    last = last[0]
                results.append((eval_name, metric, float(last), None))
        self.watch.on_round(epoch + 1, results)
        return False  # never stop the training

    def after_training(self, model: Any) -> Any:
        best = model.attr("best_iteration") if hasattr(model, "attr") else None
        early = self._early_stopping if self._early_stopping is not None else best is not None
        self.watch.finish(early_stopping=bool(early), best_round=int(best) + 1 if best is not None else None)
        return model


def _named(index: int, item: Any, count: int) -> tuple[str, Any, bool]:
    """(name, data, decides) of an eval entry: (DMatrix, name) as xgb.train takes, or (X, y) as fit does."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
        return item[1], item[0], index == count - 1
    data = item[0] if isinstance(item, tuple) else item
    return f"validation_{index}", data, index == count - 1


def guarded_train(original: Callable[..., Any]) -> Callable[..., Any]:
    """`xgboost.train` with a Guard that sees the DMatrix objects (installed under `trainmedic run`)."""

    @functools.wraps(original)
    def train(params: Any, dtrain: Any, num_boost_round: int = 10, *args: Any, **kwargs: Any) -> Any:
        callbacks = list(kwargs.get("callbacks") or [])
        if any(isinstance(cb, Guard) for cb in callbacks):
            return original(params, dtrain, num_boost_round, *args, **kwargs)
        settings = dict(params or {})
        evals = list(kwargs.get("evals") or [])
        early = kwargs.get("early_stopping_rounds") is not None or any(
            isinstance(cb, xgb.callback.EarlyStopping) for cb in callbacks
        )
        guard = Guard(early_stopping=early)
        guard.watch.plan(num_boost_round, early_stopping=early)
        guard.watch.observe_overlap(
            dtrain,
            [(name, data, data is dtrain, i == len(evals) - 1) for i, (data, name) in enumerate(evals)],
            early_stopping=early,
        )
        _observe_labels(guard, settings, dtrain)
        kwargs["callbacks"] = [*callbacks, guard]
        return original(params, dtrain, num_boost_round, *args, **kwargs)

    setattr(train, "__trainmedic_wrapped__", True)  # noqa: B010
    return train


def _observe_labels(guard: Guard, settings: Mapping[str, Any], dtrain: Any) -> None:
    objective = str(settings.get("objective", ""))
    if not objective.startswith(("binary:", "multi:")):
        return
    weights = dtrain.get_weight() if hasattr(dtrain, "get_weight") else []
    weighted = len(weights) > 0 or float(settings.get("scale_pos_weight", 1) or 1) != 1
    parameter = "scale_pos_weight" if objective.startswith("binary:") else "sample_weight"
    guard.watch.observe_labels(dtrain.get_label(), weighted=weighted, parameter=parameter)


def install(module: ModuleType) -> None:
    """Wrap `train` wherever XGBoost binds it (called when `xgboost` is imported under `run`)."""
    wrap_everywhere(["xgboost", "xgboost.training", "xgboost.sklearn"], "train", guarded_train)
