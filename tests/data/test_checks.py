"""Every DAT check on generated data: planted problems are found with the right counts,
clean data gives nothing at warning or above."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainmedic.data import check, check_report
from trainmedic.errors import UsageError
from trainmedic.findings import Finding, Severity

from .ordinary import flights_like
from .synth import clean_splits, clean_table


def by_code(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def only(findings: list[Finding], code: str) -> Finding:
    found = by_code(findings, code)
    assert len(found) == 1, [f.message for f in findings]
    return found[0]


@pytest.mark.slow
def test_clean_splits_give_no_warning_or_error() -> None:
    train, val, test = clean_splits(3000)
    serving = clean_table(800, 9).drop(columns="y")
    findings = check(train, val, test, serving, label="y")
    assert [f.message for f in findings if f.severity.at_least(Severity.WARNING)] == []


def test_exact_overlap_counts_planted_rows_and_ignores_the_label() -> None:
    train, val, test = clean_splits(2000)
    val.iloc[:37] = train.iloc[100:137].to_numpy()
    val.loc[val.index[:37], "y"] = 1 - val["y"].iloc[:37]  # the label does not matter
    test.iloc[:5] = val.iloc[200:205].to_numpy()
    findings = check(train, val, test, label="y", label_noise=False)
    overlaps = {tuple(f.evidence["splits"]): f.evidence["rows"] for f in by_code(findings, "DAT001")}
    assert overlaps == {("train", "val"): 37, ("val", "test"): 5}
    first = next(f for f in by_code(findings, "DAT001") if f.evidence["splits"] == ["train", "val"])
    assert first.severity is Severity.ERROR
    assert first.evidence["example_rows"]["val"] == list(range(10))


def test_near_duplicates_up_to_rounding_case_and_whitespace() -> None:
    train, val, test = clean_splits(2000)
    copies = train.iloc[:23].copy()
    copies["x0"] = copies["x0"] * (1 + 1e-9)
    copies["city"] = " " + copies["city"].str.upper() + "  "
    test.iloc[:23] = copies.to_numpy()
    findings = check(train, val, test, label="y", label_noise=False)
    near = only(findings, "DAT002")
    assert near.evidence["rows"] == 23
    assert near.evidence["splits"] == ["train", "test"]
    assert by_code(findings, "DAT001") == []


def test_group_overlap_counts_groups_and_rows() -> None:
    train, val, test = clean_splits(2000)
    train["patient"] = np.arange(len(train)) // 4
    val["patient"] = 10_000 + np.arange(len(val)) // 4
    test["patient"] = 20_000 + np.arange(len(test)) // 4
    val.loc[val.index[:12], "patient"] = [3, 3, 3, 3, 7, 7, 7, 7, 9, 9, 9, 9]
    findings = check(train, val, test, label="y", group="patient", label_noise=False)
    overlap = only(findings, "DAT003")
    assert (overlap.evidence["groups"], overlap.evidence["rows"]) == (3, 12)
    assert sorted(overlap.evidence["example_groups"]) == [3, 7, 9]


def test_temporal_overlap() -> None:
    train, val, test = clean_splits(2000)
    train["when"] = pd.date_range("2024-01-01", periods=len(train), freq="h").astype(str)
    val["when"] = pd.date_range("2025-01-01", periods=len(val), freq="h").astype(str)
    test["when"] = pd.date_range("2026-01-01", periods=len(test), freq="h").astype(str)
    val.loc[val.index[:19], "when"] = "2024-02-01 00:00:00"
    findings = check(train, val, test, label="y", time="when", label_noise=False)
    overlap = only(findings, "DAT004")
    assert overlap.evidence["rows"] == 19
    assert overlap.evidence["splits"] == ["train", "val"]


def test_target_leakage_names_the_feature() -> None:
    train, val, test = clean_splits(3000)
    for frame in (train, val, test):
        frame["refund_issued"] = np.where(frame["y"] == 1, "yes", "no")
        frame["row_id"] = [f"id{i}" for i in range(len(frame))]  # unique per row: no leak
    findings = check(train, val, test, label="y", label_noise=False)
    leak = only(findings, "DAT005")
    assert leak.evidence["feature"] == "refund_issued"
    assert leak.evidence["score"] == 1.0


def test_target_leakage_regression() -> None:
    train = clean_table(3000, 0)
    rng = np.random.default_rng(1)
    train["price"] = 10 * train["x2"] + 5 * train["x3"] + rng.normal(size=len(train))
    train["price_copy"] = train["price"] * 1.1
    findings = check(train, label="price", label_noise=False)
    assert only(findings, "DAT005").evidence["feature"] == "price_copy"


def test_conflicting_labels_and_duplicates_within_a_split() -> None:
    train, _, _ = clean_splits(2000)
    conflicts = train.iloc[:15].copy()
    conflicts["y"] = 1 - conflicts["y"]
    duplicates = train.iloc[500:540]
    train = pd.concat([train, conflicts, duplicates], ignore_index=True)
    findings = check(train, label="y", label_noise=False)
    conflict = only(findings, "DAT006")
    assert (conflict.evidence["examples"], conflict.evidence["rows"]) == (15, 30)
    duplicate = only(findings, "DAT007")
    assert duplicate.evidence["duplicate_rows"] == 40


def test_missing_values_and_missing_labels() -> None:
    train, _, _ = clean_splits(2000)
    train["amount"] = train["amount"].mask(np.arange(len(train)) % 10 == 0)
    train["y"] = train["y"].astype("float64").mask(np.arange(len(train)) >= 1993)
    findings = check(train, label="y", label_noise=False)
    missing = by_code(findings, "DAT008")
    label = next(f for f in missing if f.evidence.get("column") == "y")
    assert (label.evidence["rows"], label.severity) == (7, Severity.ERROR)
    column = next(f for f in missing if "columns" in f.evidence)
    assert column.evidence["columns"] == {"amount": 0.1}


def test_class_imbalance_reports_ratio_and_metrics() -> None:
    train = clean_table(2000, 0)
    train["y"] = np.where(np.arange(len(train)) < 40, "fraud", "ok")
    findings = check(train, label="y", label_noise=False)
    imbalance = only(findings, "DAT009")
    assert imbalance.evidence["ratio"] == pytest.approx(40 / 1960, abs=1e-6)
    assert "PR-AUC" in imbalance.evidence["metrics"]


def test_a_class_with_a_handful_of_rows_is_reported_above_the_ratio() -> None:
    """Six classes, the smallest 6 of 149 rows (11 % of the largest): a warning naming it."""
    train = clean_table(149, 0)
    train["y"] = np.repeat(list("abcdef"), [53, 50, 18, 12, 10, 6])
    imbalance = only(check(train, label="y", label_noise=False), "DAT009")
    assert imbalance.severity is Severity.WARNING
    assert imbalance.evidence["rare_classes"] == {"f": 6}
    assert imbalance.evidence["min_class_rows"] == 10
    assert imbalance.message.startswith("Class 'f' has 6 training rows")


def test_a_small_balanced_table_is_not_imbalanced() -> None:
    train = clean_table(24, 0)
    train["y"] = np.repeat(list("abc"), 8)
    assert by_code(check(train, label="y", label_noise=False), "DAT009") == []


def test_schema_mismatch_missing_extra_dtype_and_order() -> None:
    train, _, _ = clean_splits(2000)
    serving = clean_table(500, 5).drop(columns=["y", "x5"])
    serving["count"] = serving["count"].astype(str)
    serving["debug"] = 1
    serving = serving[["x1", "x0", *[c for c in serving.columns if c not in ("x0", "x1")]]]
    findings = check(train, serving=serving, label="y", label_noise=False)
    schema = only(findings, "DAT010")
    assert schema.evidence["missing_columns"] == ["x5"]
    assert schema.evidence["extra_columns"] == ["debug"]
    assert schema.evidence["dtype_changes"] == {"count": {"train": "number", "serving": "text"}}
    assert schema.evidence["order_differs"] is True


def test_unseen_categories_are_a_warning() -> None:
    train, val, _ = clean_splits(2000)
    val.loc[val.index[:50], "city"] = "tokyo"
    findings = check(train, val, label="y", label_noise=False)
    unseen = only(findings, "DAT010")
    assert unseen.severity is Severity.WARNING
    assert unseen.evidence["unseen_categories"]["city"]["rows"] == 50


def test_unseen_values_of_a_random_split_are_an_info_not_a_mismatch() -> None:
    """A clock time held as text: a random split puts times train never saw in val, as many
    as train's own times seen once predict (Good-Turing). An info about encoders, no warning."""
    frame = flights_like()
    train, val = frame.iloc[:1125].reset_index(drop=True), frame.iloc[1125:].reset_index(drop=True)
    assert (~val["dep_time"].isin(train["dep_time"])).mean() > 0.1
    schema = only(check(train, val, label="late", label_noise=False), "DAT010")
    assert schema.severity is Severity.INFO
    unseen = schema.evidence["unseen_categories"]["dep_time"]
    assert unseen["expected_fraction_by_chance"] == pytest.approx(unseen["fraction"], abs=0.05)
    assert "one-hot encoder" in schema.message


def test_feature_drift_ranks_the_drifted_features() -> None:
    train = clean_table(3000, 0)
    serving = clean_table(3000, 1).drop(columns="y")
    serving["x0"] += 1.5
    serving["x3"] += 0.5
    serving["city"] = np.where(np.arange(len(serving)) % 2 == 0, "paris", serving["city"])
    findings = check(train, serving=serving, label="y", label_noise=False)
    drift = only(findings, "DAT011")
    assert [d["feature"] for d in drift.evidence["features"]] == ["x0", "city", "x3"]
    assert drift.evidence["drifted"] == 3


@pytest.mark.slow
def test_label_noise_finds_most_planted_flips_and_few_others() -> None:
    train = clean_table(4000, 0)
    rng = np.random.default_rng(3)
    flipped = rng.choice(len(train), size=200, replace=False)  # 5 %
    train.loc[flipped, "y"] = 1 - train.loc[flipped, "y"]
    report = check_report(train, label="y")
    noise = only(report.findings, "DAT012")
    found = noise.evidence["suspicious_rows"]
    assert 120 <= found <= 240
    listed = [row["row"] for row in noise.evidence["most_suspicious"]]
    assert set(listed) <= set(flipped.tolist())


@pytest.mark.slow
def test_label_noise_is_not_judged_when_the_features_do_not_predict_the_label() -> None:
    train = clean_table(3000, 0)
    train["y"] = np.random.default_rng(5).integers(0, 2, size=len(train))
    report = check_report(train, label="y")
    verdict = only(report.findings, "DAT012")
    assert verdict.severity is Severity.INFO
    assert verdict.message.startswith("Label quality cannot be judged")
    assert verdict.evidence["normalised_accuracy"] < 0.5


@pytest.mark.parametrize("scaling", ["standard", "min-max"])
def test_preprocessing_fitted_before_the_split(scaling: str) -> None:
    train, val, test = clean_splits(2000)
    columns = ["x0", "x1", "amount"]
    union = pd.concat([train, val, test])[columns]
    if scaling == "standard":
        centre, scale = union.mean(), union.std(ddof=0)
    else:
        centre, scale = union.min(), union.max() - union.min()
    for frame in (train, val, test):
        frame[columns] = (frame[columns] - centre) / scale
    leak = only(check(train, val, test, label="y", label_noise=False), "DAT014")
    assert leak.evidence["splits"] == ["train", "val", "test"]
    assert sorted(leak.evidence["features"]) == sorted(columns)
    assert {f["scaling"] for f in leak.evidence["features"].values()} == {scaling}


def test_preprocessing_fitted_on_train_alone_is_fine() -> None:
    train, val, test = clean_splits(2000)
    columns = ["x0", "x1", "amount"]
    centre, scale = train[columns].mean(), train[columns].std(ddof=0)
    for frame in (train, val, test):
        frame[columns] = (frame[columns] - centre) / scale
    assert by_code(check(train, val, test, label="y", label_noise=False), "DAT014") == []


def test_bad_inputs_are_usage_errors_naming_the_column_or_split() -> None:
    train, val, _ = clean_splits(500)
    with pytest.raises(UsageError, match=r"--label 'lable' is not a column of train; did you mean 'label'"):
        check(train.rename(columns={"y": "label"}), label="lable")
    with pytest.raises(UsageError, match=r"--group 'patient' is not a column of val"):
        check(train.assign(patient=1), val, label="y", group="patient")
    with pytest.raises(UsageError, match=r"val: the split is empty"):
        check(train, val.iloc[:0], label="y")
    with pytest.raises(UsageError, match=r"--time 'city' in train: cannot parse"):
        check(train, label="y", time="city")
