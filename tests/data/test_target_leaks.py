"""DAT005 on leaks a data scientist sees at a glance (issue #41, item 14), in tables of the shapes
where they were met (`tests/data/leaks.py`), and on their healthy twins: a label cut from a
feature at a threshold, a code recorded with the outcome, a numeric label that is the mean of
two features. Strong but honest features stay quiet."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainmedic.data import check
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat005_target_leakage as dat005

from .leaks import (
    birthweight_like,
    cars_like,
    crashes_like,
    credit_cards_like,
    diabetes_obese,
    diabetes_range,
    lab_tests_like,
)
from .real import LABEL, table, user_split


def leaks(frame: pd.DataFrame) -> list[Finding]:
    train, test = user_split(frame)
    return [f for f in check(train, test, label=LABEL, label_noise=False) if f.code == "DAT005"]


@pytest.mark.parametrize(
    ("build", "feature"),
    [(birthweight_like, "bwt"), (diabetes_obese, "bmi")],
    ids=["birth-weight-189-rows", "diabetes-bmi-real-rows"],
)
def test_a_label_cut_from_a_feature_at_a_threshold(build: object, feature: str) -> None:
    (leak,) = leaks(build())  # type: ignore[operator]
    assert leak.evidence["feature"] == feature
    assert leak.evidence["auc"] >= 0.999  # its own order ranks the label perfectly
    assert leak.evidence["rest_auc"] < 0.8


@pytest.fixture(scope="module")
def crashes() -> pd.DataFrame:
    return crashes_like()


def test_a_code_recorded_with_the_outcome(crashes: pd.DataFrame) -> None:
    (leak,) = leaks(crashes)
    assert leak.evidence["feature"] == "injSeverity"
    assert 0.975 <= leak.evidence["auc"] < 0.995  # right on almost all rows, not all
    assert leak.evidence["rest_auc"] < 0.9
    assert "ranks 'target' almost without error" in leak.message


def test_the_crash_table_without_the_code_is_quiet(crashes: pd.DataFrame) -> None:
    assert leaks(crashes.drop(columns="injSeverity")) == []


def test_a_feature_that_sets_one_class_apart() -> None:
    """A cycle threshold of 45 for 99 % of negative and invalid tests, below 45 for 99 % of
    positive ones: one class against the rest, found though it cannot tell negatives from
    invalids (its AUC over the three classes stays far below the threshold)."""
    frame = lab_tests_like()
    (leak,) = leaks(frame)
    assert leak.evidence["feature"] == "ct_value"
    assert leak.evidence["class"] == "positive"
    assert leak.evidence["class_auc"] >= 0.975
    assert leak.evidence["auc"] < 0.9
    assert leak.evidence["rest_class_auc"] < 0.8
    assert "'positive' against the other classes" in leak.message
    assert leaks(frame.drop(columns="ct_value")) == []


def test_a_column_filled_after_the_outcome_is_not_vouched_for_by_its_own_ratio() -> None:
    """Card spending is 0 for every refused application; spending over income ranks the
    decision as well, being computed from it. Spending is found, measured against the
    applicant's columns; without both, the table is quiet."""
    frame = credit_cards_like()
    (leak,) = leaks(frame)
    assert leak.evidence["feature"] == "expenditure"
    assert leak.evidence["class_default"] == {"class": "no", "value": "0.0", "share": 1.0}
    assert leak.evidence["left_out_of_rest"] == ["share"]
    assert leak.evidence["rest_auc"] < 0.9
    assert leaks(frame.drop(columns=["expenditure", "share"])) == []


@pytest.mark.parametrize(
    ("build", "features"),
    [(cars_like, {"Min.Price", "Max.Price"}), (diabetes_range, {"progression_low", "progression_high"})],
    ids=["cars-93-rows", "diabetes-real-rows"],
)
def test_two_features_whose_mean_is_the_regression_label(build: object, features: set[str]) -> None:
    (leak,) = leaks(build())  # type: ignore[operator]
    assert set(leak.evidence["features"]) == features
    assert leak.evidence["r2"] > 0.999
    assert "reconstruct 'target' linearly" in leak.message


def test_the_price_range_is_found_on_a_sampled_table() -> None:
    """30,000 rows: the linear fits run on a subsample, drawn apart from the fit half."""
    (leak,) = leaks(cars_like(rows=30_000))
    assert set(leak.evidence["features"]) == {"Min.Price", "Max.Price"}


def test_the_car_table_without_the_price_range_is_quiet() -> None:
    assert leaks(cars_like(with_range=False)) == []


def test_a_near_deterministic_feature_with_company_is_quiet() -> None:
    """Iris' petal width alone is right on ~96 % of held-out rows (AUC 0.995), and so is its
    petal length: the table corroborates it, it defines nothing."""
    assert leaks(table("iris")) == []


def test_a_strong_but_not_deterministic_feature_is_quiet() -> None:
    """A lab value that predicts the diagnosis with AUC ~0.95 (the label is not cut from it),
    beside weak demographics: strong, not a leak."""
    rng = np.random.default_rng(3)
    rows = 4000
    sick = rng.random(rows) < 0.3
    frame = pd.DataFrame(
        {
            "lab": rng.normal(0, 1, rows) + 2.4 * sick,
            "age": np.round(rng.normal(50, 12, rows) + 3 * sick),
            "sex": rng.choice(["f", "m"], rows),
            LABEL: np.where(sick, "sick", "well"),
        }
    )
    assert leaks(frame) == []


def test_a_regression_label_near_a_sum_but_measured_is_quiet() -> None:
    """A label close to a sum of two features (R² ~0.97), as a measured total is: not computed."""
    rng = np.random.default_rng(4)
    rows = 2000
    a, b = rng.gamma(4, 10, rows), rng.gamma(3, 10, rows)
    frame = pd.DataFrame({"a": a, "b": b, "c": rng.normal(size=rows), LABEL: a + b + rng.normal(0, 5, rows)})
    assert leaks(frame) == []


def test_series_that_trend_together_are_quiet() -> None:
    """Quarterly macro series split at random (the shape of statsmodels' macrodata): GDP,
    consumption and population all follow the trend, so each predicts GDP with R² ~0.99 alone
    and two together closer still; none is computed from the others."""
    rng = np.random.default_rng(5)
    quarters = np.arange(200)
    trend = np.exp(0.008 * quarters + np.cumsum(rng.normal(0, 0.008, 200)))
    gdp = 2700 * trend
    frame = pd.DataFrame(
        {
            "year": 1959 + quarters // 4,
            "quarter": quarters % 4 + 1,
            "realcons": 0.62 * gdp * np.exp(np.cumsum(rng.normal(0, 0.004, 200))),
            "pop": 177 + 0.63 * quarters + rng.normal(0, 0.2, 200),
            "unemp": np.clip(5.5 + np.cumsum(rng.normal(0, 0.3, 200)), 3, 11),
            LABEL: np.round(gdp, 3),
        }
    )
    assert leaks(frame) == []


def test_the_judge_needs_the_rest_far_worse() -> None:
    score = dat005.FeatureScore("x", 0.96, "held-out accuracy", 0.98, 0.6, 500, auc=0.99)
    corroborated = dat005.AgainstRest("x", 0.99, 0.985, 4, 500)
    alone = dat005.AgainstRest("x", 0.99, 0.90, 4, 500)
    assert dat005.judge(dat005.Predictability("y", [score], alone=[corroborated])) == []
    (leak,) = dat005.judge(dat005.Predictability("y", [score], alone=[alone]))
    assert leak.evidence["rest_auc"] == 0.9
    copy = dat005.FeatureScore("y_copy", 1.0, "held-out accuracy", 1.0, 0.6, 500, auc=1.0)
    assert [f.evidence["feature"] for f in dat005.judge(dat005.Predictability("y", [copy]))] == ["y_copy"]


def test_the_judge_wants_a_set_far_better_than_any_one_feature() -> None:
    scores = [dat005.FeatureScore("a", 0.9, "held-out R²", 0.9, 0.0, 500)]
    computed = [dat005.LinearFit(("a",), 0.97, 500), dat005.LinearFit(("a", "b"), 0.99999, 500)]
    (leak,) = dat005.judge(dat005.Predictability("y", scores, linear=computed))
    assert leak.evidence["features"] == ["a", "b"]
    trending = [dat005.LinearFit(("a",), 0.998, 500), dat005.LinearFit(("a", "b"), 0.9993, 500)]
    assert dat005.judge(dat005.Predictability("y", scores, linear=trending)) == []
    corroborated = [dat005.FeatureScore("a", 0.97, "held-out R²", 0.97, 0.0, 500)]
    twin = dat005.FeatureScore("b", 0.96, "held-out R²", 0.96, 0.0, 500)
    assert dat005.judge(dat005.Predictability("y", [*corroborated, twin])) == []
    weak = dat005.FeatureScore("b", 0.5, "held-out R²", 0.5, 0.0, 500)
    (alone,) = dat005.judge(dat005.Predictability("y", [*corroborated, weak]))
    assert alone.evidence["rest_r2"] == 0.5
