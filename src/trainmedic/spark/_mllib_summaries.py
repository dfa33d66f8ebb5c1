"""What a fitted MLlib model says about its own training: loss curves and tuning results.

- A training summary's `objectiveHistory` (logistic and linear regression, multilayer
  perceptron, factorization machines: the objective, loss plus regularisation, after each
  optimizer iteration) becomes one `Step` per iteration with metric `loss`, so the dynamics
  rules (not-learning, divergence, non-finite loss) judge it like any training curve. A
  history of one point (a closed-form solve: LinearRegression's normal equation) is no curve.
- A `CrossValidatorModel` / `TrainValidationSplitModel` becomes one observation: the metric
  of each parameter map (mean over folds, with its spread), the best one and its parameters.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def objective_history(model: Any) -> list[float]:
    """The objective per iteration of the model (or of the last stage of a PipelineModel that has one)."""
    for stage in reversed(getattr(model, "stages", None) or [model]):
        if not getattr(stage, "hasSummary", False):
            continue
        history = getattr(stage.summary, "objectiveHistory", None)
        if history is not None and len(history) >= 2:
            return [float(v) for v in history]
    return []


def tuning_facts(tuner: Any, fitted: Any) -> dict[str, Any]:
    """The tuning's settings and results, as plain JSON data."""
    evaluator = tuner.getEvaluator()
    maps = tuner.getEstimatorParamMaps()
    cross_validation = hasattr(fitted, "avgMetrics")
    metrics = [float(v) for v in (fitted.avgMetrics if cross_validation else fitted.validationMetrics)]
    larger_better = bool(evaluator.isLargerBetter())
    finite = [i for i, v in enumerate(metrics) if math.isfinite(v)]
    best = (max if larger_better else min)(finite, key=lambda i: metrics[i]) if finite else None
    facts: dict[str, Any] = {
        "framework": "Spark MLlib",
        "tuner": type(tuner).__name__,
        "estimator": type(tuner.getEstimator()).__name__,
        "evaluator": type(evaluator).__name__,
        "metric": _metric_name(evaluator),
        "higher_is_better": larger_better,
        "param_maps": len(maps),
        "metrics": metrics,
        "best_index": best,
        "best_metric": None if best is None else metrics[best],
        "best_params": None if best is None else _params(maps[best]),
    }
    if cross_validation:
        facts["folds"] = int(tuner.getNumFolds())
        facts["metrics_std"] = [float(v) for v in getattr(fitted, "stdMetrics", None) or []]
    else:
        facts["train_ratio"] = float(tuner.getTrainRatio())
    return facts


def _metric_name(evaluator: Any) -> str | None:
    getter = getattr(evaluator, "getMetricName", None)
    return str(getter()) if callable(getter) else None


def _params(param_map: dict[Any, Any]) -> dict[str, Any]:
    """{"LogisticRegression.regParam": 0.01, ...}: the owning stage's class from its uid."""
    out: dict[str, Any] = {}
    for param, value in param_map.items():
        owner = str(getattr(param, "parent", "")).rsplit("_", 1)[0]
        key = f"{owner}.{param.name}" if owner else str(param.name)
        out[key] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
