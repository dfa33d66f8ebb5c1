"""Spark MLlib: preprocessing fitted before the split (DAT014), a model scored on its own
training rows (TRN009).

`trainmedic.spark._mllib` observes, under `trainmedic run`, every `Estimator.fit`,
`Evaluator.evaluate` and `DataFrame.randomSplit` of the driver, and ships each DataFrame
involved as the semantic hashes of its logical plan (`Plan`): a DataFrame derived from
another holds that one's root hash among its nodes. These rules pair the observations of
one process; they own no finding of their own: DAT014 and TRN009 are the catalogue's, with
MLlib's terms. Fits and evaluations inside a `CrossValidator`/`TrainValidationSplit` are
per fold by construction and are not observed; the tuning itself is (`TUNING_CHECK`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainmedic.findings import Finding, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules.boosting import EVAL_SET_IS_TRAIN
from trainmedic.rules.data import PREPROCESSING_BEFORE_SPLIT

FRAMEWORK = "Spark MLlib"
FIT_CHECK = "mllib_fit"  # {"estimator", "role", "within", "plan"}
SPLIT_CHECK = "mllib_split"  # {"method", "weights", "plan", "parts": [root hashes]}
EVALUATE_CHECK = "mllib_evaluate"  # {"evaluator", "metric", "value", "plan"}
TUNING_CHECK = "mllib_tuning"  # {"tuner", "folds" | "train_ratio", "metric", "metrics", "best_params", ...}

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


def _plan(observation: dict[str, Any]) -> Plan:
    plan = Plan.from_data(observation.get("plan"))
    assert plan is not None  # _by_pid keeps only observations with a plan
    return plan


def _by_pid(record: RunRecord, check: str) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for obs in record.guard_observations:
        if obs.check == check and Plan.from_data(obs.data.get("plan")) is not None:
            grouped.setdefault(obs.pid, []).append(obs.data)
    return grouped


# -- DAT014 ------------------------------------------------------------------------------------------
def _fitted_on_split_data(fit: dict[str, Any], split: dict[str, Any]) -> bool:
    """The fit saw rows of every part: its DataFrame and the split one derive one from the other,
    and the fit's is not one of the parts (a part, or something made from one, is fine)."""
    fitted, split_plan = _plan(fit), _plan(split)
    if not (fitted.derives_from(split_plan) or split_plan.derives_from(fitted)):
        return False
    return not any(part in fitted.nodes for part in split.get("parts") or ())


def _name(fit: dict[str, Any]) -> str:
    within = fit.get("within")
    return f"{fit['estimator']} (a stage of {within})" if within else str(fit["estimator"])


def preprocessing_before_split(record: RunRecord) -> list[Finding]:
    """DAT014: a preprocessing estimator fitted on rows that a split then sends to validation."""
    fits = _by_pid(record, FIT_CHECK)
    found: list[Finding] = []
    for pid, splits in _by_pid(record, SPLIT_CHECK).items():
        preprocessing = [f for f in fits.get(pid, []) if f.get("role") in PREPROCESSING_ROLES]
        for split in splits:
            leaky = [f for f in preprocessing if _fitted_on_split_data(f, split)]
            if leaky:
                found.append(_preprocessing_finding(leaky, split, pid))
    return found


def _preprocessing_finding(leaky: Sequence[dict[str, Any]], split: dict[str, Any], pid: int) -> Finding:
    names = list(dict.fromkeys(_name(f) for f in leaky))
    statistics = any(f.get("role") == STATISTICS for f in leaky)
    method = str(split.get("method", "randomSplit"))
    if method == "randomSplit":
        splitter = f"randomSplit({split.get('weights')})"
        held_out = "the held-out part was transformed with statistics of its own rows"
        fix = (
            "Split first: train, test = df.randomSplit(...); fit the Pipeline (with its "
            f"{leaky[0]['estimator']}) on train only and transform test with the fitted PipelineModel."
        )
    else:
        splitter = f"{method} (its folds)"
        held_out = "each validation fold was transformed with statistics of its own rows"
        fix = (
            f"Put {leaky[0]['estimator']} inside the Pipeline that {method} fits, so each fold fits it "
            "on its training rows alone."
        )
    if not statistics:
        held_out = "the categories of the held-out rows are known to the encoding (a mild leak)"
    message = f"{', '.join(names)} fitted on the DataFrame that {splitter} then split: {held_out}"
    evidence = {
        "framework": FRAMEWORK,
        "estimators": names,
        "split": method,
        "weights": split.get("weights"),
    }
    return PREPROCESSING_BEFORE_SPLIT.finding(
        message, evidence=evidence, fix=fix, severity=None if statistics else Severity.INFO, pid=pid
    )


# -- TRN009 ------------------------------------------------------------------------------------------
def eval_set_is_train(record: RunRecord) -> list[Finding]:
    """TRN009: every evaluation of the process scored rows the model was fitted on.

    An evaluation of the training predictions beside one of held-out predictions is the usual
    train-versus-test report, not a validation on training data: only a process that scored
    nothing held out is reported.
    """
    fits = _by_pid(record, FIT_CHECK)
    found: list[Finding] = []
    for pid, evaluations in _by_pid(record, EVALUATE_CHECK).items():
        models = [f for f in fits.get(pid, []) if f.get("role") in FITTED_MODEL_ROLES and not f.get("within")]
        on_training = [(e, m) for e in evaluations for m in models if _scores_training_rows(e, m)]
        scored = {id(e) for e, _ in on_training}
        if not on_training or any(id(e) not in scored for e in evaluations):
            continue
        evaluation, model = on_training[0]
        value = evaluation.get("value")
        shown = f"{value:.4g}" if isinstance(value, (int, float)) else "?"
        message = (
            f"{evaluation.get('evaluator')} scored {evaluation.get('metric')} = {shown} on predictions for "
            f"the DataFrame the {model.get('estimator')} was fitted on, and nothing held out was scored: "
            "the score measures memorisation, not generalisation"
        )
        evidence = {
            "framework": FRAMEWORK,
            "evaluator": evaluation.get("evaluator"),
            "metric": evaluation.get("metric"),
            "value": value,
            "estimator": model.get("estimator"),
            "evaluations": len(evaluations),
            "evaluations_on_training_rows": len(scored),
        }
        fix = (
            "Split first (train, test = df.randomSplit([0.8, 0.2], seed=...)), fit on train and "
            "evaluate model.transform(test)."
        )
        found.append(EVAL_SET_IS_TRAIN.finding(message, evidence=evidence, fix=fix, pid=pid))
    return found


def _scores_training_rows(evaluation: dict[str, Any], fit: dict[str, Any]) -> bool:
    return _plan(evaluation).derives_from(_plan(fit))


RULES: tuple[Rule, ...] = (preprocessing_before_split, eval_set_is_train)
