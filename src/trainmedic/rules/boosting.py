"""Gradient-boosted trees (XGBoost, LightGBM, CatBoost): eval sets, rounds, class weights.

The integrations (`trainmedic.xgboost`, `.lightgbm`, `.catboost`) measure facts
while the booster trains and ship them as `GuardObservation`s; these rules
decide. Per-round metrics also go out as `Epoch` events (one per boosting
round), so the generic dynamics rules (NaN, divergence) read them like epochs.
"""

from __future__ import annotations

from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules.data import CLASS_IMBALANCE
from trainmedic.rules.dynamics import OVERFITTING

EVAL_OVERLAP_CHECK = "boosting_eval_overlap"
ROUNDS_CHECK = "boosting_rounds"
IMBALANCE_CHECK = "boosting_imbalance"

# An eval set sharing at least this share of its rows with the training data is not held out.
OVERLAP_SHARE = 0.01
# Overfitting without early stopping: enough rounds, best round early enough, last round worse enough.
MIN_ROUNDS = 20
MIN_WASTED_ROUNDS = 10
BEST_BEFORE_SHARE = 0.8
MIN_RELATIVE_WORSENING = 0.01
# minority / majority class count below which unweighted boosting mostly learns the majority
IMBALANCE_RATIO = 0.1


def _eval_set_is_train_example() -> list[Event]:
    """xgb.train(params, dtrain, evals=[(dtrain, "valid")], early_stopping_rounds=10)."""
    overlap = {
        "framework": "XGBoost",
        "eval_name": "valid",
        "same_object": True,
        "shared_rows": 1000,
        "eval_rows": 1000,
        "early_stopping": True,
    }
    return [GuardObservation(t=1.0, pid=100, check=EVAL_OVERLAP_CHECK, data=overlap)]


EVAL_SET_IS_TRAIN = FindingSpec(
    code="TRN009",
    slug="eval-set-is-train",
    severity=Severity.ERROR,
    title="Evaluation set is (or overlaps) the training set",
    what=(
        "The evaluation/early-stopping set is, or overlaps, the training data, e.g. an "
        "XGBoost/LightGBM eval_set that contains the training rows. trainmedic judges the set that "
        "decides: the one XGBoost's early stopping watches (the last), any set LightGBM stops on, "
        "CatBoost's eval_set; a training set merely monitored beside a held-out set is fine. With "
        "Spark MLlib: an Evaluator that scores only predictions for the DataFrame the model was "
        "fitted on (or part of it)."
    ),
    why=(
        "The stopping point and the reported score are optimistic: they measure memorisation. "
        "Early stopping on training rows never stops (the training loss keeps falling), and "
        "LightGBM, given only the training set, silently disables early stopping. A copy or a "
        "slice of the training rows is the same data to the model, even when it is another object."
    ),
    example=(
        "xgb.fit(X_train, y_train, eval_set=[(X_train, y_train)], early_stopping_rounds=10)\n"
        "lgb.LGBMClassifier().fit(X_train, y_train, eval_X=(X_train.copy(),), eval_y=(y_train,))"
    ),
    fix=(
        "Hold out a validation split that shares no rows with the training data and stop on it "
        "(with XGBoost, put it last in eval_set)."
    ),
    example_input=_eval_set_is_train_example,
)

SPECS: tuple[FindingSpec, ...] = (EVAL_SET_IS_TRAIN,)


def _observations(record: RunRecord, check: str) -> list[dict[str, Any]]:
    return [obs.data for obs in record.guard_observations if obs.check == check]


def _observations_with_pid(record: RunRecord, check: str) -> list[tuple[int, dict[str, Any]]]:
    return [(obs.pid, obs.data) for obs in record.guard_observations if obs.check == check]


def eval_set_is_train(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for pid, obs in _observations_with_pid(record, EVAL_OVERLAP_CHECK):
        shared, rows = int(obs.get("shared_rows") or 0), int(obs.get("eval_rows") or 0)
        same = bool(obs.get("same_object"))
        if not obs.get("decides", True):
            continue  # monitored beside a held-out set: not what stops or scores the model
        if not same and (rows == 0 or shared / rows < OVERLAP_SHARE):
            continue
        name, framework = obs.get("eval_name"), obs.get("framework", "the booster")
        if same:
            what = f"{framework} eval set {name!r} is the training data itself"
        else:
            what = f"{shared:,} of {rows:,} rows ({shared / rows:.0%}) of {framework} eval set {name!r} are training rows"
        stopping = (
            ": early stopping picks its round on data the model trains on"
            if obs.get("early_stopping")
            else ": its score measures memorisation, not generalisation"
        )
        found.append(EVAL_SET_IS_TRAIN.finding(what + stopping, evidence=dict(obs), pid=pid))
    return found


def overfitting_without_early_stopping(record: RunRecord) -> list[Finding]:
    """The validation metric was best long before the last round and no early stopping kept it."""
    found: list[Finding] = []
    # TRN009 already says what is wrong with a leaky eval set of the same training call
    leaky = {(f.pid, f.evidence.get("call"), f.evidence.get("eval_name")) for f in eval_set_is_train(record)}
    for pid, obs in _observations_with_pid(record, ROUNDS_CHECK):
        if obs.get("early_stopping") or (pid, obs.get("call"), obs.get("eval_name")) in leaky:
            continue
        rounds, best = int(obs.get("rounds_run") or 0), int(obs.get("best_round") or 0)
        best_value, last_value = obs.get("best_value"), obs.get("last_value")
        if not isinstance(best_value, (int, float)) or not isinstance(last_value, (int, float)):
            continue
        if rounds < MIN_ROUNDS or best > BEST_BEFORE_SHARE * rounds or rounds - best < MIN_WASTED_ROUNDS:
            continue
        worse = (best_value - last_value) if obs.get("higher_is_better") else (last_value - best_value)
        if worse < MIN_RELATIVE_WORSENING * max(abs(best_value), 1e-12):
            continue
        metric, name = obs.get("metric"), obs.get("eval_name")
        found.append(
            OVERFITTING.finding(
                f"{obs.get('framework', 'Boosting')} {name} {metric} was best at round {best} "
                f"({best_value:.4g}) and ended at {last_value:.4g} after {rounds} rounds, with no early stopping",
                evidence=dict(obs),
                fix=(
                    f"Stop on the validation set (early_stopping_rounds=~{max(10, rounds // 10)}), which keeps "
                    f"the model of its best round (here {best}); or train about {best} rounds."
                ),
                epoch=best,
                pid=pid,
            )
        )
    return found


def class_weights_missing(record: RunRecord) -> list[Finding]:
    found: list[Finding] = []
    for obs in _observations(record, IMBALANCE_CHECK):
        ratio = obs.get("ratio")
        if obs.get("weighted") or not isinstance(ratio, (int, float)) or ratio >= IMBALANCE_RATIO:
            continue
        parameter = obs.get("parameter", "class weights")
        found.append(
            CLASS_IMBALANCE.finding(
                f"{obs.get('framework', 'The booster')} trains on classes at a {ratio:.1%} minority/majority "
                f"ratio with no {parameter} or sample weights",
                evidence=dict(obs),
                fix=(
                    f"Set {parameter} (for binary tasks about negatives/positives = {1 / ratio:.3g}) or "
                    "pass sample weights, and evaluate with PR-AUC (aucpr / average_precision)."
                ),
                severity=Severity.INFO,
            )
        )
    return found


RULES: tuple[Rule, ...] = (eval_set_is_train, overfitting_without_early_stopping, class_weights_missing)
