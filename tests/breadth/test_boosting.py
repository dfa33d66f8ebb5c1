"""XGBoost and LightGBM guards: real boosters on small synthetic data, explicit and under the boot module."""

from __future__ import annotations

import sys
from pathlib import Path

import catboost
import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

import trainmedic.catboost
import trainmedic.lightgbm
import trainmedic.xgboost
from trainmedic._boosting import RULES as BOOSTING_RULES
from trainmedic.events import Epoch, GuardObservation
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules.trn import trn009_eval_set_is_train as trn009

from ..helpers import run_instrumented

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "breadth"


@pytest.fixture(scope="module")
def split() -> tuple[np.ndarray, ...]:
    X, y = make_classification(n_samples=1200, n_features=12, n_informative=4, flip_y=0.15, random_state=0)
    return tuple(train_test_split(X, y, test_size=0.25, random_state=0))


def codes(findings: list) -> list[str]:
    return sorted(f.code for f in findings)


def test_xgboost_guard_streams_rounds_and_flags_train_as_eval_set(split) -> None:
    X_train, _, y_train, _ = split
    guard = trainmedic.xgboost.Guard(train=X_train, evals=[(X_train, y_train)], echo=False)
    model = xgb.XGBClassifier(n_estimators=15, max_depth=3, n_jobs=1, callbacks=[guard])
    model.fit(X_train, y_train, eval_set=[(X_train, y_train)], verbose=False)
    rounds = [e for e in guard.watch.events if isinstance(e, Epoch)]
    assert [e.epoch for e in rounds] == list(range(1, 16))
    assert "validation_0-logloss" in rounds[0].metrics
    assert rounds[-1].metrics["validation_0-logloss"] < rounds[0].metrics["validation_0-logloss"]
    assert codes(guard.findings) == ["TRN009"]
    assert "'validation_0' is the training data itself" in guard.findings[0].message


def test_xgboost_overfitting_without_early_stopping_names_the_best_round(split) -> None:
    X_train, X_val, y_train, y_val = split
    evals = [(X_train, y_train), (X_val, y_val)]
    guard = trainmedic.xgboost.Guard(train=X_train, evals=evals, echo=False)
    model = xgb.XGBClassifier(n_estimators=120, max_depth=8, learning_rate=0.3, n_jobs=1, callbacks=[guard])
    model.fit(X_train, y_train, eval_set=evals, verbose=False)
    (finding,) = guard.findings
    assert finding.code == "TRN004"
    assert finding.evidence["eval_name"] == "validation_1"
    assert finding.evidence["best_round"] < 60
    assert f"best at round {finding.evidence['best_round']}" in finding.message
    assert finding.epoch == finding.evidence["best_round"]
    # given the data, the guard knows validation_0 is the training set: `loss`; the held-out one: `val_loss`
    last = [e for e in guard.watch.events if isinstance(e, Epoch)][-1]
    assert last.metrics["loss"] == last.metrics["validation_0-logloss"]
    assert last.metrics["val_loss"] == last.metrics["validation_1-logloss"]


def test_xgboost_healthy_early_stopping_is_quiet(split) -> None:
    X_train, X_val, y_train, y_val = split
    guard = trainmedic.xgboost.Guard(train=X_train, evals=[(X_val, y_val)], echo=False)
    model = xgb.XGBClassifier(
        n_estimators=200,
        max_depth=3,
        learning_rate=0.1,
        early_stopping_rounds=10,
        n_jobs=1,
        callbacks=[guard],
    )
    model.fit(X_train, y_train, eval_set=[(X_val, y_val)], verbose=False)
    assert guard.findings == []


def test_lightgbm_guard_train_as_only_valid_set_and_overfitting(split) -> None:
    X_train, X_val, y_train, y_val = split
    guard = trainmedic.lightgbm.Guard(echo=False)
    train_set = lgb.Dataset(X_train, label=y_train)
    params = {"objective": "binary", "num_threads": 1, "verbose": -1}
    lgb.train(params, train_set, 10, valid_sets=[train_set], callbacks=[guard])
    assert codes(guard.findings) == ["TRN009"]

    guard = trainmedic.lightgbm.Guard(echo=False)
    model = lgb.LGBMClassifier(
        n_estimators=150, num_leaves=63, learning_rate=0.3, min_child_samples=2, n_jobs=1, verbose=-1
    )
    model.fit(X_train, y_train, eval_X=(X_val,), eval_y=(y_val,), callbacks=[guard])
    (finding,) = guard.findings
    assert finding.code == "TRN004"
    assert finding.evidence["metric"] == "binary_logloss"


def test_lightgbm_guard_after_early_stopping_needs_finish(split) -> None:
    X_train, X_val, y_train, y_val = split
    guard = trainmedic.lightgbm.Guard(echo=False)
    model = lgb.LGBMClassifier(n_estimators=300, learning_rate=0.05, num_leaves=7, n_jobs=1, verbose=-1)
    model.fit(
        X_train,
        y_train,
        eval_X=(X_val,),
        eval_y=(y_val,),
        callbacks=[guard, lgb.early_stopping(10, verbose=False)],
    )
    assert model.best_iteration_ < 300
    assert guard.finish() == []
    assert guard.watch.rounds == model.best_iteration_ + 10


def test_catboost_guard_eval_set_is_train_and_late_best_iteration(split) -> None:
    X_train, X_val, y_train, y_val = split
    common = {"verbose": False, "thread_count": 1, "allow_writing_files": False}
    guard = trainmedic.catboost.Guard(
        train=X_train, evals=[(X_train, y_train)], early_stopping=True, echo=False
    )
    model = catboost.CatBoostClassifier(iterations=15, early_stopping_rounds=5, **common)
    model.fit(X_train, y_train, eval_set=(X_train, y_train), callbacks=[guard])
    assert guard.watch.rounds == 15  # iterations are 1-based in CatBoost's callback info
    assert codes(guard.findings) == ["TRN009"]

    guard = trainmedic.catboost.Guard(echo=False)
    model = catboost.CatBoostClassifier(iterations=120, depth=8, learning_rate=0.5, l2_leaf_reg=0.1, **common)
    model.fit(X_train, y_train, eval_set=(X_val, y_val), use_best_model=False, callbacks=[guard])
    (finding,) = guard.findings
    assert finding.code == "TRN004"
    assert finding.evidence["eval_name"] == "validation"
    assert finding.evidence["metric"] == "Logloss"


def test_rules_only_judge_the_eval_set_that_decides() -> None:
    def overlap(**data: object) -> GuardObservation:
        base = {"framework": "XGBoost", "call": 1, "eval_name": "train", "eval_rows": 100, "shared_rows": 100}
        return GuardObservation(check=trn009.EVAL_OVERLAP_OBSERVATION, data={**base, **data})

    assert run_rules(RunRecord.of([overlap(decides=False)]), BOOSTING_RULES) == []
    assert run_rules(RunRecord.of([overlap(shared_rows=0, decides=True)]), BOOSTING_RULES) == []
    (finding,) = run_rules(RunRecord.of([overlap(shared_rows=30, decides=True)]), BOOSTING_RULES)
    assert "30 of 100 rows (30%)" in finding.message


def _run_examples(tmp_path: Path, scripts: list[str]):
    """All scripts in one instrumented interpreter: one import of the three libraries, not three."""
    code = "import runpy, sys\nfor path in sys.argv[1:]:\n    runpy.run_path(path, run_name='__main__')\n"
    argv = [sys.executable, "-c", code, *(str(EXAMPLES / s) for s in scripts)]
    run = run_instrumented(argv, tmp_path, timeout=300)
    assert run.result.returncode == 0, run.result.stderr
    assert "trainmedic:" not in run.result.stderr  # under run the supervisor reports, not the guard
    assert run.record.epochs_completed > 0  # every boosting round arrived as an Epoch event
    return run_rules(run.record)


@pytest.mark.slow
def test_leaky_examples_under_the_boot_module(tmp_path: Path) -> None:
    found = _run_examples(tmp_path, ["xgboost_leaky.py", "lightgbm_leaky.py", "catboost_leaky.py"])
    by_framework: dict[str, list[str]] = {}
    for finding in found:
        framework = str(finding.evidence.get("framework"))
        by_framework.setdefault(framework, []).append(finding.code)
    assert {k: sorted(v) for k, v in by_framework.items()} == {
        "XGBoost": ["DAT009", "TRN004", "TRN009"],
        "LightGBM": ["TRN004", "TRN009"],
        "CatBoost": ["DAT009", "TRN004", "TRN009"],
    }, [f.message for f in found]


@pytest.mark.slow
def test_healthy_examples_under_the_boot_module_are_quiet(tmp_path: Path) -> None:
    found = _run_examples(tmp_path, ["xgboost_healthy.py", "lightgbm_healthy.py", "catboost_healthy.py"])
    assert found == [], [f.message for f in found]
