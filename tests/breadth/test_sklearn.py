"""trainmedic.sklearn.audit on real scikit-learn transforms, and its auto-instrumentation in a real child."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from trainmedic.sklearn import audit

from ..helpers import run_instrumented

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "breadth"


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(n_samples=600, n_features=8, weights=[0.95], random_state=0)
    return X * 3 + 5, y


def codes(findings: list) -> list[str]:
    return [f.code for f in findings]


def test_raw_features_in_a_pipeline_with_a_suitable_metric_are_quiet(data) -> None:
    X, y = data
    model = make_pipeline(StandardScaler(), LogisticRegression())
    assert audit(model, X, y, cv=5, scoring="average_precision") == []
    assert audit(model, X, y, cv=KFold(4, shuffle=True, random_state=1), scoring="balanced_accuracy") == []


@pytest.mark.parametrize(
    ("transform", "kind"),
    [
        (StandardScaler(), "standardised (mean 0, std 1)"),
        (MinMaxScaler(), "min-max scaled to [0, 1]"),
    ],
)
def test_scaling_fitted_on_all_rows_before_cv_is_dat014(data, transform, kind: str) -> None:
    X, y = data
    (finding,) = audit(LogisticRegression(), transform.fit_transform(X), y, cv=5, scoring="f1")
    assert finding.code == "DAT014"
    assert kind in finding.message
    assert "outside a Pipeline" in finding.message
    assert finding.evidence["columns_total"] == 8
    # the proof from the folds: the training fold alone is not centred the way the joint data is
    assert max(abs(m) for m in finding.evidence["first_train_fold_mean"]) > 1e-4


def test_pixels_divided_by_255_are_not_fitted_scaling() -> None:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(500, 16)).astype(float)
    pixels[0], pixels[1] = 0.0, 255.0  # every column spans the full range, as images do
    labels = rng.integers(0, 2, size=500)
    assert audit(LogisticRegression(), pixels / 255.0, labels, scoring="f1") == []
    measured = rng.normal(size=(500, 16)) * np.arange(1, 17) + 5
    (finding,) = audit(LogisticRegression(), MinMaxScaler().fit_transform(measured), labels, scoring="f1")
    assert finding.code == "DAT014"


def test_scaling_the_training_part_then_cv_on_it_still_leaks_across_folds(data) -> None:
    X, y = data
    X_train = X[:400]
    scaled = StandardScaler().fit(X_train).transform(X_train)  # "correct" for the test set, not for CV
    assert codes(audit(make_pipeline(LogisticRegression()), scaled, y[:400], scoring="f1")) == ["DAT014"]


def test_train_and_validation_scaled_jointly_vs_by_training_statistics(data) -> None:
    X, y = data
    joint = StandardScaler().fit_transform(X)
    leaky = audit(LogisticRegression(), joint[:450], y[:450], X_val=joint[450:], y_val=y[450:], scoring="f1")
    assert codes(leaky) == ["DAT014"]
    scaler = StandardScaler().fit(X[:450])
    right = audit(
        LogisticRegression(),
        scaler.transform(X[:450]),
        y[:450],
        X_val=scaler.transform(X[450:]),
        y_val=y[450:],
        scoring="f1",
    )
    assert right == []


def test_a_split_of_data_alone_names_no_estimator(data) -> None:
    """`X = StandardScaler().fit_transform(X)` then `train_test_split` (the gallery's classifier
    comparison): the audit of a split knows no model, so its evidence names none and speaks
    of the validation rows, not of folds."""
    from sklearn.model_selection import train_test_split

    X, y = data
    X_train, X_test, y_train, y_test = train_test_split(
        StandardScaler().fit_transform(X), y, test_size=0.4, random_state=42
    )
    (finding,) = audit(None, X_train, y_train, X_val=X_test, y_val=y_test)
    assert finding.code == "DAT014"
    assert "estimator" not in finding.evidence
    assert "NoneType" not in str(finding.evidence)
    assert finding.evidence["folds"] == 1
    assert "the validation rows helped fit" in finding.message
    assert "fold" not in finding.message
    (in_cv,) = audit(LogisticRegression(), StandardScaler().fit_transform(X), y, scoring="f1")
    assert in_cv.evidence["estimator"] == "LogisticRegression"
    assert in_cv.evidence["folds"] == 5
    assert "every validation fold" in in_cv.message


def test_mean_imputation_on_all_rows_is_dat014(data) -> None:
    X, y = data
    holes = X.copy()
    holes[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    (finding,) = audit(LogisticRegression(), SimpleImputer().fit_transform(holes), y, scoring="f1")
    assert finding.code == "DAT014"
    assert "mean-imputed" in finding.message
    pipeline = make_pipeline(SimpleImputer(), LogisticRegression())
    assert audit(pipeline, np.nan_to_num(holes, nan=-999.0) * 1.0001, y, scoring="f1") == []


def test_a_mean_on_the_lattice_of_digit_pixels_is_chance_a_mean_imputed_among_them_is_not() -> None:
    """Digits / 16 lie on sixteenths: in a 300-image subset, pixel 45's mean is 0.5, one of
    its own values, 20 times. Imputed, a mean falls between the sixteenths."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels, labels = digits.data[digits.target >= 5] / 16.0, digits.target[digits.target >= 5]
    few = np.random.RandomState(0).permutation(len(labels))[:300]
    X, y = pixels[few], labels[few]
    assert np.mean(X[:, 45]) == 0.5
    assert np.sum(X[:, 45] == 0.5) >= 3
    assert audit(None, X[:210], y[:210], X_val=X[210:], y_val=y[210:]) == []
    holes = X.copy()
    holes[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    imputed = SimpleImputer().fit_transform(holes)
    findings = audit(None, imputed[:210], y[:210], X_val=imputed[210:], y_val=y[210:])
    assert [f.code for f in findings] == ["DAT014"]
    assert "mean-imputed" in findings[0].message


def test_oversampling_before_split_is_dat001_with_its_cause(data) -> None:
    X, y = data
    rng = np.random.default_rng(0)
    minority = np.flatnonzero(y == 1)
    extra = rng.choice(minority, size=(y == 0).sum() - minority.size)
    X_over, y_over = np.vstack([X, X[extra]]), np.concatenate([y, y[extra]])
    (finding,) = audit(make_pipeline(StandardScaler(), LogisticRegression()), X_over, y_over, scoring="f1")
    assert finding.code == "DAT001"
    assert "oversampling before the split" in finding.message
    assert finding.evidence["minority_share_of_duplicates"] == 1.0
    assert finding.evidence["class_ratio_as_given"] == 1.0
    assert finding.evidence["class_ratio_without_duplicates"] < 0.1


def test_plain_duplicates_are_dat001_without_the_oversampling_cause(data) -> None:
    X, y = data
    X_dup, y_dup = np.vstack([X, X[:100]]), np.concatenate([y, y[:100]])
    (finding,) = audit(make_pipeline(StandardScaler(), LogisticRegression()), X_dup, y_dup, scoring="f1")
    assert finding.code == "DAT001"
    assert "oversampling" not in finding.message


def test_imbalance_scored_by_accuracy_is_dat009(data) -> None:
    X, y = data
    model = make_pipeline(StandardScaler(), LogisticRegression())
    (finding,) = audit(model, X, y)
    assert finding.code == "DAT009"
    assert "accuracy (the default of a classifier)" in finding.message
    assert finding.evidence["suggested_scoring"] == ["average_precision", "balanced_accuracy", "f1"]
    assert codes(audit(model, X, y, scoring="accuracy")) == ["DAT009"]
    assert audit(model, X, y, scoring=["f1", "accuracy"]) == []


@pytest.mark.slow
def test_auto_instrumentation_in_a_real_child(tmp_path: Path) -> None:
    leaky = run_instrumented(["python", str(EXAMPLES / "sklearn_leaky.py")], tmp_path / "leaky", timeout=120)
    assert leaky.result.returncode == 0, leaky.result.stderr
    found = leaky.record.raised_findings
    assert sorted({f.code for f in found}) == ["DAT001", "DAT009", "DAT014"], [f.message for f in found]
    assert any("oversampling before the split" in f.message for f in found if f.code == "DAT001")
    assert "trainmedic:" not in leaky.result.stderr
    healthy = run_instrumented(
        ["python", str(EXAMPLES / "sklearn_healthy.py")], tmp_path / "healthy", timeout=120
    )
    assert healthy.result.returncode == 0, healthy.result.stderr
    assert healthy.record.raised_findings == []
    assert "trainmedic:" not in healthy.result.stderr


@pytest.mark.parametrize("shape", [(8, 8), (1, 8, 8)])
def test_images_split_by_train_test_split_are_audited_like_flattened_rows(shape) -> None:
    """Image arrays (N x 8 x 8, N x 1 x 8 x 8, as torch scripts split them) are audited one
    column per pixel: their duplicates across the split are found, and clean ones are quiet."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images.reshape(len(digits.images), *shape)
    clean = audit(None, images[:1400], digits.target[:1400], X_val=images[1400:], y_val=digits.target[1400:])
    assert clean == []
    leaked = np.concatenate([images[:1400], images[1400:1500]])
    labels = np.concatenate([digits.target[:1400], digits.target[1400:1500]])
    (finding,) = audit(None, leaked, labels, X_val=images[1400:], y_val=digits.target[1400:])
    assert finding.code == "DAT001"
