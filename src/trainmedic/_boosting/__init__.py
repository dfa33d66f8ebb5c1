"""What the XGBoost, LightGBM and CatBoost guards share: rounds in, events and findings out.

A `RoundWatch` gets each round's evaluation results from a framework callback
and turns them into `Epoch` events (round n = epoch n), sent to the supervisor
when there is one and always kept in memory. At the end it adds the summary
facts (best round of the validation metric, early stopping or not) and the
decisions come from the findings' files (`RULES`: the rules of the findings declared
for the boosters, over these observations), the same rules `trainmedic run` applies to the
events file. Row overlap between the training data and an eval
set is measured here too, once, before training.
"""

from __future__ import annotations

import importlib
import itertools
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from trainmedic.events import Epoch, Event, GuardObservation, TrainingPlan
from trainmedic.findings import Finding
from trainmedic.instrument import channel
from trainmedic.record import Rule, RunRecord
from trainmedic.registry import rules_for, run_rules
from trainmedic.rules.dat import dat009_class_imbalance as dat009
from trainmedic.rules.trn import trn004_overfitting as trn004
from trainmedic.rules.trn import trn009_eval_set_is_train as trn009

_calls = itertools.count(1)
TRAIN_NAMES = frozenset({"train", "training", "dtrain", "learn"})
_MAX_CELLS_FOR_OVERLAP = 50_000_000  # rows x columns densified for the row comparison
_NAN_STAND_IN = -1.2345678e300  # NaN != NaN: give missing cells one comparable value

#: What decides at the end of a training call: the findings declared `decided_in=("boosters", ...)`
#: (an eval set that is training data, TRN009; rounds run long past the best one, TRN004;
#: unweighted imbalanced classes, DAT009).
RULES: tuple[Rule, ...] = rules_for("boosters")

# (eval set, metric, value, higher is better or None when unknown)
RoundResult = tuple[str, str, float, "bool | None"]


class RoundWatch:
    """Per-round metrics of one training call, and the facts rules need at its end."""

    def __init__(
        self,
        framework: str,
        *,
        train_names: Iterable[str] = (),
        stopping_metric: str = "last",
        echo: bool | None = None,
    ) -> None:
        self.framework = framework
        self.train_names = set(TRAIN_NAMES) | set(train_names)
        self.stopping_metric = stopping_metric  # which metric early stopping would watch: first | last
        self.echo = (not channel.is_supervised()) if echo is None else echo
        self.events: list[Event] = []
        self.history: dict[str, dict[str, list[float]]] = {}
        self.higher: dict[str, bool] = {}
        self.rounds = 0
        self.findings: list[Finding] = []
        self.call = next(_calls)  # tells apart the training calls of one process in the events

    # -- in ------------------------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        self.events.append(event)
        channel.emit(event)

    def plan(self, rounds: int | None, *, early_stopping: bool) -> None:
        self.emit(TrainingPlan(framework=self.framework, epochs=rounds, early_stopping=early_stopping))

    def on_round(self, round_no: int, results: Iterable[RoundResult]) -> None:
        metrics: dict[str, float] = {}
        for eval_name, metric, value, higher in results:
            self.history.setdefault(eval_name, {}).setdefault(metric, []).append(float(value))
            if higher is not None:
                self.higher[metric] = higher
            metrics[f"{eval_name}-{metric}"] = float(value)
        metrics.update(self._canonical())
        self.rounds = round_no
        self.emit(Epoch(epoch=round_no, metrics=metrics, steps=1))

    def _canonical(self) -> dict[str, float]:
        """`loss` / `val_loss` for the generic dynamics rules, when the metric is a loss (lower is better)."""
        out: dict[str, float] = {}
        train, valid = self._train_set(), self._validation_set()
        for key, name in (("loss", train), ("val_loss", valid)):
            if name is None:
                continue
            metric = self._stopping_metric(name)
            if metric is not None and not self._higher_is_better(metric):
                out[key] = self.history[name][metric][-1]
        return out

    def observe_overlap(
        self, train: Any, evals: Sequence[tuple[str, Any, bool, bool]], *, early_stopping: bool
    ) -> None:
        """Rows each eval set shares with the training data.

        `evals` holds (name, data, is the training object itself, decides): `decides` is true for
        the set whose metric picks the stopping round or is reported as the score (XGBoost: the
        last eval set; LightGBM: any set not named as the training data, or the only one).
        """
        train_rows = rows_of(train)
        for name, data, same, decides in evals:
            if same:
                self.train_names.add(name)
                shared, eval_rows = _row_count(train), _row_count(train)
            else:
                other = rows_of(data)
                if train_rows is None or other is None or other.shape[1] != train_rows.shape[1]:
                    continue
                shared, eval_rows = shared_rows(train_rows, other), len(other)
                if eval_rows and shared == eval_rows:
                    self.train_names.add(name)
            self.emit(
                GuardObservation(
                    check=trn009.EVAL_OVERLAP_OBSERVATION,
                    data={
                        "framework": self.framework,
                        "call": self.call,
                        "eval_name": name,
                        "same_object": same,
                        "shared_rows": shared,
                        "eval_rows": eval_rows,
                        "train_rows": _row_count(train),
                        "early_stopping": early_stopping,
                        "decides": decides,
                    },
                )
            )

    def observe_labels(self, labels: Any, *, weighted: bool, parameter: str) -> None:
        """Class counts of a classification target, and whether anything reweights them."""
        if labels is None:
            return
        values = np.asarray(labels).ravel()
        if values.size == 0 or values.dtype.kind not in "biuf" or np.unique(values).size > 50:
            return
        classes, counts = np.unique(values, return_counts=True)
        if classes.size < 2 or not np.all(np.mod(classes, 1) == 0):
            return  # regression targets are not classes
        self.emit(
            GuardObservation(
                check=dat009.BOOSTING_OBSERVATION,
                data={
                    "framework": self.framework,
                    "class_counts": {str(int(c)): int(n) for c, n in zip(classes, counts, strict=True)},
                    "ratio": round(float(counts.min() / counts.max()), 6),
                    "weighted": weighted,
                    "parameter": parameter,
                },
            )
        )

    # -- out -----------------------------------------------------------------------------------------
    def finish(self, *, early_stopping: bool, best_round: int | None = None) -> list[Finding]:
        """Add the round summary, decide with the boosting rules, echo findings when unsupervised."""
        valid = self._validation_set()
        metric = None if valid is None else self._stopping_metric(valid)
        if valid is not None and metric is not None:
            series = self.history[valid][metric]
            higher = self._higher_is_better(metric)
            finite = [(v, i) for i, v in enumerate(series) if math.isfinite(v)]
            if finite:
                best_value, best_index = (max if higher else min)(finite, key=lambda p: p[0])
                self.emit(
                    GuardObservation(
                        check=trn004.ROUNDS_OBSERVATION,
                        data={
                            "framework": self.framework,
                            "call": self.call,
                            "eval_name": valid,
                            "metric": metric,
                            "higher_is_better": higher,
                            "rounds_run": len(series),
                            "best_round": best_index + 1,
                            "best_value": best_value,
                            "last_value": series[-1],
                            "early_stopping": early_stopping,
                            "framework_best_round": best_round,
                        },
                    )
                )
        self.findings = run_rules(RunRecord.of(self.events), RULES)
        if self.echo:
            for finding in self.findings:
                sys.stderr.write(f"trainmedic: {finding.severity.value} {finding.code} {finding.slug}: ")
                sys.stderr.write(f"{finding.message} (fix: {finding.fix})\n")
        return self.findings

    # -- which set is which --------------------------------------------------------------------------
    def _train_set(self) -> str | None:
        return next((name for name in self.history if name in self.train_names), None)

    def _validation_set(self) -> str | None:
        """The held-out set early stopping would watch: XGBoost the last, LightGBM the first."""
        held_out = [name for name in self.history if name not in self.train_names]
        if not held_out:
            return None
        return held_out[0] if self.stopping_metric == "first" else held_out[-1]

    def _stopping_metric(self, eval_name: str) -> str | None:
        metrics = list(self.history.get(eval_name, {}))
        if not metrics:
            return None
        return metrics[0] if self.stopping_metric == "first" else metrics[-1]

    def _higher_is_better(self, metric: str) -> bool:
        if metric in self.higher:
            return self.higher[metric]
        return higher_is_better(metric)


_MAXIMISED = (
    "auc",
    "aucpr",
    "prauc",
    "pre",
    "map",
    "ndcg",
    "accuracy",
    "balancedaccuracy",
    "precision",
    "recall",
    "f1",
    "r2",
    "mcc",
    "kappa",
    "wkappa",
)


def higher_is_better(metric: str) -> bool:
    """XGBoost's own guess when a callback does not say (callback.EarlyStopping: auc*, map*, ndcg*, pre*)."""
    name = metric.lower()
    return name != "mape" and any(name.startswith(prefix) for prefix in _MAXIMISED)


# -- row overlap --------------------------------------------------------------------------------------
def rows_of(data: Any) -> npt.NDArray[np.float64] | None:
    """The rows of a feature matrix as a dense float array, or None when that is not possible/cheap."""
    if data is None or isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        return None  # a file path: the library reads it itself
    if hasattr(data, "get_data") and hasattr(data, "num_row"):  # xgboost.DMatrix -> scipy CSR
        try:
            data = data.get_data()
        except Exception:
            return None
    if hasattr(data, "toarray") and hasattr(data, "shape"):  # scipy sparse
        if data.shape[0] * data.shape[1] > _MAX_CELLS_FOR_OVERLAP:
            return None
        data = data.toarray()
    if hasattr(data, "select_dtypes"):  # pandas: numeric columns (categories hash poorly as floats)
        data = data.select_dtypes("number")
    try:
        array = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if array.ndim != 2 or array.size > _MAX_CELLS_FOR_OVERLAP:
        return None
    return np.where(np.isnan(array), _NAN_STAND_IN, array)


def shared_rows(train: npt.NDArray[np.float64], other: npt.NDArray[np.float64]) -> int:
    """How many rows of `other` are identical to some training row."""
    if len(train) == 0 or len(other) == 0:
        return 0
    _, inverse = np.unique(np.vstack([train, other]), axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    return int(np.isin(inverse[len(train) :], inverse[: len(train)]).sum())


def _row_count(data: Any) -> int | None:
    for attr in ("num_row", "num_data"):
        method = getattr(data, attr, None)
        if callable(method):
            try:
                return int(method())
            except Exception:
                return None
    shape = getattr(data, "shape", None)
    return int(shape[0]) if shape else None


def wrap_everywhere(modules: list[str], name: str, wrap: Callable[[Any], Any]) -> None:
    """Replace `name` by `wrap(name)` in each of `modules` that binds it, once.

    A training entry point is bound in several modules (the library's namespace, its engine
    module, and its sklearn module, which imported the function by name): each binding is
    wrapped so `xgb.train` and `XGBClassifier.fit` alike reach the guard.
    """
    for module_name in modules:
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
        original = getattr(module, name, None)
        if original is not None and not getattr(original, "__trainmedic_wrapped__", False):
            setattr(module, name, wrap(original))
