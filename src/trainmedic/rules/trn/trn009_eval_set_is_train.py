"""TRN009 `eval-set-is-train`: the evaluation/early-stopping set is (or overlaps) the training data.

Collectors:
- the boosters (`trainmedic._boosting`: XGBoost, LightGBM, CatBoost) compare each eval set's
  rows with the training rows before training and send a `boosting_eval_overlap` observation
  (`EVAL_OVERLAP_OBSERVATION`: shared and total rows, same object or not, early stopping, and
  whether that set decides the stopping round or the score);
- the HF Trainer's callback (`trainmedic.hf`) sends the same observation when the Trainer
  evaluates on its own training dataset, or (`by_content`) on examples that are training
  examples token for token, compared on a bounded sample (`eval_rows` of `eval_rows_total`,
  against `train_rows_compared` of `train_rows_total`);
- Spark MLlib (`trainmedic.spark._mllib`) observes fits and evaluations with their DataFrames'
  plans (`evidence/mllib.py`): `mllib_eval_set_is_train` reports a process that scored only
  predictions for rows its model was fitted on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.evidence.mllib import (
    EVALUATE_OBSERVATION,
    FIT_OBSERVATION,
    FITTED_MODEL_ROLES,
    FRAMEWORK,
    by_pid,
    plan,
)
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord

#: The observation of an eval set's rows against the training rows (boosters, HF Trainer).
EVAL_OVERLAP_OBSERVATION = "boosting_eval_overlap"
# An eval set sharing at least this share of its rows with the training data is not held out.
OVERLAP_SHARE = 0.01
# The same for whole text examples (the HF Trainer's, by content): instruction and chat data
# hold a few percent of natural exact duplicates (greetings, short templated tasks), which an
# honest split shares; data repeated or concatenated before its split, or the training rows
# reloaded, share most of the eval set.
CONTENT_OVERLAP_SHARE = 0.1


def _example() -> list[Event]:
    """xgb.train(params, dtrain, evals=[(dtrain, "valid")], early_stopping_rounds=10)."""
    overlap = {
        "framework": "XGBoost",
        "eval_name": "valid",
        "same_object": True,
        "shared_rows": 1000,
        "eval_rows": 1000,
        "early_stopping": True,
    }
    return [GuardObservation(t=1.0, pid=100, check=EVAL_OVERLAP_OBSERVATION, data=overlap)]


SPEC = FindingSpec(
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
    decided_in=("run events", "torch guard", "boosters"),
    example_input=_example,
)


# -- the boosters and the HF Trainer: an eval set's rows ------------------------------------------
def eval_set_is_train(record: RunRecord) -> list[Finding]:
    """TRN009: the eval set that stops or scores the model is, or overlaps, the training data."""
    found: list[Finding] = []
    for observation in record.guard_observations:
        if observation.check != EVAL_OVERLAP_OBSERVATION:
            continue
        pid, obs = observation.pid, observation.data
        shared, rows = int(obs.get("shared_rows") or 0), int(obs.get("eval_rows") or 0)
        same = bool(obs.get("same_object"))
        if not obs.get("decides", True):
            continue  # monitored beside a held-out set: not what stops or scores the model
        threshold = CONTENT_OVERLAP_SHARE if obs.get("by_content") else OVERLAP_SHARE
        if not same and (rows == 0 or shared / rows < threshold):
            continue
        name, framework = obs.get("eval_name"), obs.get("framework", "the booster")
        fix = None
        if same:
            what = f"{framework} eval set {name!r} is the training data itself"
        elif obs.get("by_content"):
            what = _by_content(obs, shared, rows)
            fix = (
                "Deduplicate the examples before splitting them, and split once (e.g. "
                "Dataset.from_list(unique_rows).train_test_split(test_size=0.1, seed=0)): no evaluation "
                "example may occur among the training examples."
            )
        else:
            what = f"{shared:,} of {rows:,} rows ({shared / rows:.0%}) of {framework} eval set {name!r} are training rows"
        stopping = (
            ": early stopping picks its round on data the model trains on"
            if obs.get("early_stopping")
            else ": its score measures memorisation, not generalisation"
        )
        found.append(SPEC.finding(what + stopping, evidence=dict(obs), fix=fix, pid=pid))
    return found


def _by_content(data: Mapping[str, Any], shared: int, rows: int) -> str:
    """'N of M examples of the eval set are training examples', with the sample it was read on."""
    total, compared = data.get("eval_rows_total"), data.get("train_rows_compared")
    sample = f" (of {total:,} compared)" if isinstance(total, int) and total > rows else ""
    trained = data.get("train_rows_total")
    against = (
        f", against {compared:,} of the {trained:,} training examples"
        if isinstance(trained, int) and isinstance(compared, int) and trained > compared
        else ""
    )
    return (
        f"{shared:,} of {rows:,} examples{sample} ({shared / rows:.0%}) of {data.get('framework')} eval set "
        f"{data.get('eval_name')!r} are also training examples, token for token{against}"
    )


# -- Spark MLlib: an Evaluator on the training rows ---------------------------------------------
def mllib_eval_set_is_train(record: RunRecord) -> list[Finding]:
    """TRN009: every evaluation of the process scored rows the model was fitted on.

    An evaluation of the training predictions beside one of held-out predictions is the usual
    train-versus-test report, not a validation on training data: only a process that scored
    nothing held out is reported.
    """
    fits = by_pid(record, FIT_OBSERVATION)
    found: list[Finding] = []
    for pid, evaluations in by_pid(record, EVALUATE_OBSERVATION).items():
        models = [f for f in fits.get(pid, []) if f.get("role") in FITTED_MODEL_ROLES and not f.get("within")]
        on_training = [(e, m) for e in evaluations for m in models if plan(e).derives_from(plan(m))]
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
        found.append(SPEC.finding(message, evidence=evidence, fix=fix, pid=pid))
    return found


RULES: tuple[Rule, ...] = (eval_set_is_train, mllib_eval_set_is_train)
#: Which rules a place applies: the guards observe eval sets; Spark MLlib's evaluations are a run's.
RULES_AT: dict[str, tuple[Rule, ...]] = {
    "boosters": (eval_set_is_train,),
    "torch guard": (eval_set_is_train,),
}
