"""Spark MLlib's observations, as DAT014 (preprocessing fitted before the split) and TRN009 (a
model scored on its own training rows) read them.

`trainmedic.spark._mllib` observes, under `trainmedic run`, every `Estimator.fit`,
`Evaluator.evaluate` and `DataFrame.randomSplit` of the driver, and ships each DataFrame
involved as the semantic hashes of its logical plan (`Plan`): a DataFrame derived from
another holds that one's root hash among its nodes. The findings' files pair the
observations of one process; they own no finding of MLlib's own: DAT014 and TRN009 are the
catalogue's, with MLlib's terms. Fits and evaluations inside a `CrossValidator` /
`TrainValidationSplit` are per fold by construction and are not observed; the tuning itself
is (`TUNING_OBSERVATION`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainmedic.record import RunRecord

FRAMEWORK = "Spark MLlib"
FIT_OBSERVATION = "mllib_fit"  # {"estimator", "role", "within", "plan"}
SPLIT_OBSERVATION = "mllib_split"  # {"method", "weights", "plan", "parts": [root hashes]}
EVALUATE_OBSERVATION = "mllib_evaluate"  # {"evaluator", "metric", "value", "plan"}
# {"tuner", "folds" | "train_ratio", "metric", "metrics", "best_params", ...}
TUNING_OBSERVATION = "mllib_tuning"

# Roles of an estimator (trainmedic.spark._mllib_roles decides them from the class):
# - statistics: learns numbers from the rows (scalers, Imputer, PCA, selectors, IDF, discretizers);
#   fitted on validation rows, it leaks them into the features (DAT014, error);
# - indexing: learns a vocabulary or category set (StringIndexer, VectorIndexer, OneHotEncoder);
#   fitting it on all rows on purpose, so that every label gets an index, is what the official
#   Spark examples do, and the leak is the list of categories only (DAT014, info);
# - model: a predictor, clusterer or Pipeline holding one; tuning: CrossValidator, TrainValidationSplit.
STATISTICS, INDEXING, MODEL, TUNING = "statistics", "indexing", "model", "tuning"
PREPROCESSING_ROLES = frozenset({STATISTICS, INDEXING})
FITTED_MODEL_ROLES = frozenset({MODEL, TUNING})


@dataclass(frozen=True, slots=True)
class Plan:
    """A DataFrame as the semantic hashes of its logical plan: the root's, and every node's.

    A DataFrame made from another (by `transform`, `withColumn`, `randomSplit`, ...) holds that
    one's plan as a subtree, hence its root hash among its nodes.
    """

    root: int
    nodes: frozenset[int]

    def derives_from(self, other: Plan) -> bool:
        """`other` is this DataFrame or one it was made from."""
        return other.root in self.nodes

    def to_data(self) -> dict[str, Any]:
        return {"root": self.root, "nodes": sorted(self.nodes)}

    @classmethod
    def from_data(cls, data: Any) -> Plan | None:
        if not isinstance(data, dict) or not isinstance(data.get("root"), int):
            return None
        return cls(data["root"], frozenset(int(n) for n in data.get("nodes") or ()))


def plan(observation: dict[str, Any]) -> Plan:
    """The DataFrame of an observation that `by_pid` kept."""
    found = Plan.from_data(observation.get("plan"))
    assert found is not None  # by_pid keeps only observations with a plan
    return found


def by_pid(record: RunRecord, check: str) -> dict[int, list[dict[str, Any]]]:
    """The data of the observations named `check` that carry a plan, per process."""
    grouped: dict[int, list[dict[str, Any]]] = {}
    for obs in record.guard_observations:
        if obs.check == check and Plan.from_data(obs.data.get("plan")) is not None:
            grouped.setdefault(obs.pid, []).append(obs.data)
    return grouped
