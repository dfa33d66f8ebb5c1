"""The MLlib rules on observation events: which fits, splits and evaluations are leaks."""

from __future__ import annotations

from typing import Any

from trainmedic.events import GuardObservation
from trainmedic.evidence import mllib
from trainmedic.evidence.spark import is_spark_helper, is_spark_jvm, is_spark_python_worker
from trainmedic.record import RunRecord
from trainmedic.rules.dat.dat014_preprocessing_before_split import (
    mllib_preprocessing_before_split as preprocessing_before_split,
)
from trainmedic.rules.trn.trn009_eval_set_is_train import mllib_eval_set_is_train

WHOLE = {"root": 1, "nodes": [1]}
SCALED = {"root": 2, "nodes": [1, 2]}  # made from WHOLE
TRAIN = {"root": 3, "nodes": [1, 3]}  # randomSplit part of WHOLE
TEST = {"root": 4, "nodes": [1, 4]}
TRAIN_FEATURES = {"root": 5, "nodes": [1, 3, 5]}  # made from TRAIN


def fit(estimator: str, role: str, plan: dict[str, Any], within: str | None = None) -> GuardObservation:
    data = {"estimator": estimator, "role": role, "within": within, "plan": plan}
    return GuardObservation(pid=7, check=mllib.FIT_OBSERVATION, data=data)


def split(plan: dict[str, Any], parts: list[int], method: str = "randomSplit") -> GuardObservation:
    data = {"method": method, "weights": [0.8, 0.2] if parts else None, "plan": plan, "parts": parts}
    return GuardObservation(pid=7, check=mllib.SPLIT_OBSERVATION, data=data)


def evaluate(plan: dict[str, Any], value: float = 0.97) -> GuardObservation:
    data = {
        "evaluator": "BinaryClassificationEvaluator",
        "metric": "areaUnderROC",
        "value": value,
        "plan": plan,
    }
    return GuardObservation(pid=7, check=mllib.EVALUATE_OBSERVATION, data=data)


def dat014(*events: GuardObservation) -> list[Any]:
    return preprocessing_before_split(RunRecord.of(list(events)))


def trn009(*events: GuardObservation) -> list[Any]:
    return mllib_eval_set_is_train(RunRecord.of(list(events)))


def test_a_scaler_fitted_on_the_whole_dataframe_before_or_after_its_split_is_dat014() -> None:
    for order in ((0, 1), (1, 0)):
        events = [fit("StandardScaler", mllib.STATISTICS, WHOLE), split(SCALED, [3, 4])]
        (finding,) = dat014(*(events[i] for i in order))
        assert finding.code == "DAT014"
        assert finding.severity.value == "error"
        assert finding.evidence["estimators"] == ["StandardScaler"]
    (finding,) = dat014(fit("Imputer", mllib.STATISTICS, SCALED), split(WHOLE, [3, 4]))
    assert "randomSplit([0.8, 0.2])" in finding.message


def test_a_scaler_fitted_on_a_part_is_quiet() -> None:
    assert (
        dat014(
            fit("StandardScaler", mllib.STATISTICS, TRAIN_FEATURES, within="Pipeline"), split(WHOLE, [3, 4])
        )
        == []
    )
    assert (
        dat014(fit("StandardScaler", mllib.STATISTICS, {"root": 9, "nodes": [9]}), split(WHOLE, [3, 4])) == []
    )


def test_indexers_fitted_on_all_rows_are_info_as_in_the_official_examples() -> None:
    (finding,) = dat014(fit("StringIndexer", mllib.INDEXING, WHOLE), split(WHOLE, [3, 4]))
    assert finding.severity.value == "info"
    assert "categories" in finding.message


def test_scaling_the_data_a_cross_validator_then_folds_is_dat014() -> None:
    (finding,) = dat014(
        fit("MinMaxScaler", mllib.STATISTICS, TRAIN), split(TRAIN_FEATURES, [], "CrossValidator")
    )
    assert "CrossValidator" in finding.message
    assert "inside the Pipeline" in finding.fix


def test_models_are_not_preprocessing() -> None:
    assert dat014(fit("LogisticRegression", mllib.MODEL, WHOLE), split(WHOLE, [3, 4])) == []


def test_scoring_only_the_training_predictions_is_trn009() -> None:
    predictions = {"root": 6, "nodes": [1, 3, 6]}
    (finding,) = trn009(fit("Pipeline", mllib.MODEL, TRAIN), evaluate(predictions))
    assert finding.code == "TRN009"
    assert finding.evidence["estimator"] == "Pipeline"
    assert "areaUnderROC = 0.97" in finding.message


def test_a_held_out_score_beside_the_training_score_is_quiet() -> None:
    on_train, on_test = {"root": 6, "nodes": [1, 3, 6]}, {"root": 8, "nodes": [1, 4, 8]}
    model = fit("Pipeline", mllib.MODEL, TRAIN)
    assert trn009(model, evaluate(on_test)) == []
    assert trn009(model, evaluate(on_train), evaluate(on_test)) == []


def test_a_model_fitted_on_everything_scores_its_training_rows_on_any_part() -> None:
    (finding,) = trn009(
        fit("LogisticRegression", mllib.MODEL, WHOLE), evaluate({"root": 8, "nodes": [1, 4, 8]})
    )
    assert finding.code == "TRN009"


def test_stages_of_a_pipeline_are_not_the_model_scored() -> None:
    stage = fit("LogisticRegression", mllib.MODEL, TRAIN_FEATURES, within="Pipeline")
    assert trn009(stage, evaluate({"root": 10, "nodes": [1, 3, 5, 10]})) == []


def test_spark_processes_are_recognised_by_their_command_lines() -> None:
    jvm = [
        "/usr/lib/jvm/java-17/bin/java",
        "-cp",
        "jars/*",
        "org.apache.spark.deploy.SparkSubmit",
        "pyspark-shell",
    ]
    assert is_spark_jvm(jvm)
    assert is_spark_python_worker(["python3", "-m", "pyspark.daemon", "pyspark.worker"])
    assert not is_spark_jvm(["java", "-jar", "app.jar"])
    assert not is_spark_python_worker(["python", "train.py", "-m", "pyspark.daemon"])
    assert is_spark_helper(["python3", "/venv/bin/find_spark_home.py"])
    assert is_spark_helper(["java", "-Xmx128m", "-cp", "jars/*", "org.apache.spark.launcher.Main", "x.py"])
    assert not is_spark_helper(jvm)  # the driver's JVM: spark-submit's launcher, or a worker of the driver
