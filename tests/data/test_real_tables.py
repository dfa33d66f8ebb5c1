"""Real tables (scikit-learn's bundled data sets), split as users split them: no warning on the
clean splits, every planted problem found, hard tables said to be hard."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainmedic.data import check, check_report
from trainmedic.data.noise import score_label_noise
from trainmedic.findings import Finding, Severity

from .real import (
    ALL_CLEAN,
    HARD,
    LABEL,
    exact_copies,
    flip_labels,
    near_copies,
    table,
    titanic_like,
    user_split,
)


def serious(findings: list[Finding]) -> list[str]:
    return [f"{f.code} {f.message}" for f in findings if f.severity.at_least(Severity.WARNING)]


def codes(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for finding in findings:
        out.setdefault(finding.code, []).append(finding)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_CLEAN)
def test_clean_real_table_gives_no_warning(name: str) -> None:
    train, test = user_split(table(name))
    findings = check(train, test, label=LABEL)
    assert serious(findings) == []
    if name in HARD:  # a model reaches ~0.6: its mistakes are not evidence of wrong labels
        (verdict,) = codes(findings)["DAT012"]
        assert verdict.severity is Severity.INFO
        assert verdict.message.startswith("Label quality cannot be judged")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["iris", "wine", "breast_cancer"])
def test_planted_label_flips_found_with_recall_and_precision(name: str) -> None:
    """Pooled over four flip draws: a 112-row table holds six flips, so one draw's recall moves
    in steps of 1/6 (iris's two overlapping classes hide a flip now and then)."""
    train, test = user_split(table(name))
    hits = flagged_rows = planted = 0
    for seed in range(4):
        noisy, flipped = flip_labels(train, 0.05, seed=seed)
        scores = score_label_noise(noisy, [c for c in noisy.columns if c != LABEL], LABEL)
        assert scores is not None
        flagged = scores.positions[scores.suspicious]
        hits += len(np.intersect1d(flagged, flipped))
        flagged_rows += len(flagged)
        planted += len(flipped)
        if seed == 0:
            (finding,) = codes(check(noisy, test, label=LABEL))["DAT012"]
            assert finding.severity is Severity.WARNING
            assert finding.evidence["suspicious_rows"] == len(flagged)
    assert hits / planted >= 0.8  # recall
    assert hits / flagged_rows >= 0.8  # precision


@pytest.mark.slow
def test_planted_copies_and_conflicts_in_a_real_table() -> None:
    train, test = user_split(table("breast_cancer"))
    test = exact_copies(train, test, rows=30)
    conflicts = train.iloc[:12].copy()
    conflicts[LABEL] = 1 - conflicts[LABEL]
    train = pd.concat([train, conflicts], ignore_index=True)
    found = codes(check(train, test, label=LABEL, label_noise=False))
    (overlap,) = found["DAT001"]
    assert overlap.evidence["rows"] == 30
    assert overlap.evidence["expected_by_chance"] < 0.01
    (conflict,) = found["DAT006"]
    assert (conflict.evidence["examples"], conflict.evidence["rows"]) == (12, 24)


def test_near_copies_rounded_and_recased_are_found_and_named() -> None:
    """60 train rows re-exported into test: numbers to one decimal, 'male' as 'MALE '."""
    train, test = user_split(table("diabetes_text"))
    found = codes(check(train, near_copies(train, test, rows=60), label=LABEL, label_noise=False))
    (near,) = found["DAT002"]
    assert near.evidence["rows"] == 60
    assert "DAT001" not in found
    (encoding,) = found["DAT010"]
    assert encoding.severity is Severity.WARNING
    assert "encoding inconsistency" in encoding.message
    assert encoding.evidence["encoding_variants"]["sex"]["rows"] == 60
    assert "unseen_categories" not in encoding.evidence
    assert "DAT011" not in found  # the variants are not drift as well


def test_identifier_column_is_named_not_schema_drift() -> None:
    train, test = user_split(table("diabetes_text"))
    train["passenger_name"] = [f"Name {i:04d}" for i in range(len(train))]
    test["passenger_name"] = [f"Name {i:04d}" for i in range(5_000, 5_000 + len(test))]
    train["row_id"] = np.arange(len(train))
    test["row_id"] = np.arange(len(train), len(train) + len(test))
    found = codes(check(train, test, label=LABEL, label_noise=False))
    assert "DAT010" not in found
    keys = {f.evidence["column"]: f for f in found["DAT015"]}
    assert set(keys) == {"passenger_name", "row_id"}
    assert all(f.severity is Severity.INFO for f in keys.values())


def test_identifier_shared_across_splits_is_a_warning() -> None:
    train, test = user_split(table("wine"))
    train["sample_id"] = np.arange(len(train))
    test["sample_id"] = np.arange(len(test)) + len(train) - 5  # five ids reused
    (key,) = codes(check(train, test, label=LABEL, label_noise=False))["DAT015"]
    assert key.severity is Severity.WARNING
    assert key.evidence["shared_values"] == {"train/val": 5}


def test_coarse_rows_equal_up_to_the_rounding_of_age_are_chance_not_near_duplicates() -> None:
    """Sex, passenger class and an age in years (some written 28.5): test rows equal to train
    rows once the ages are rounded are different passengers; the summary says so. Four draws
    of the table and its split: some hold no such rows at all."""
    noted = 0
    for seed in range(4):
        train, test = user_split(titanic_like(seed=seed), seed=seed)
        report = check_report(train, test, label=LABEL, label_noise=False)
        assert serious(report.findings) == []
        noted += "up to rounding, case or whitespace, as chance predicts" in " ".join(report.summary.notes)
    assert noted >= 2


def test_near_copies_in_a_coarse_table_with_a_measured_column_are_found() -> None:
    """The same table with a fare paid (a measured value): 20 train rows re-exported into test
    with the fares rounded to whole units are near-duplicates beyond chance."""
    train, test = user_split(table("titanic_like"))
    rng = np.random.default_rng(1)
    train["fare"] = rng.lognormal(3, 1, len(train)).round(4)
    test["fare"] = rng.lognormal(3, 1, len(test)).round(4)
    copies = train[train["age"] % 1 == 0].iloc[:20].copy()
    copies["fare"] = copies["fare"].round(0)
    found = codes(check(train, pd.concat([test, copies], ignore_index=True), label=LABEL, label_noise=False))
    (near,) = found["DAT002"]
    assert near.evidence["rows"] == 20
    assert near.evidence["p_value"] < 1e-3


def test_a_class_of_a_handful_of_rows_is_reported_whatever_the_ratio() -> None:
    """Six classes in the glass table's proportions: the smallest has 7 of 160 training rows,
    12 % of the largest (above the ratio threshold), too few for 5-fold per-class metrics."""
    train, test = user_split(table("digits_rare"))
    (imbalance,) = codes(check(train, test, label=LABEL, label_noise=False))["DAT009"]
    assert imbalance.severity is Severity.WARNING
    assert imbalance.evidence["rare_classes"] == {"4": 7}
    assert imbalance.evidence["ratio"] > 0.1
    assert "7 training rows" in imbalance.message


@pytest.mark.slow
def test_band_table_overlap_is_explained_by_chance() -> None:
    """A few categorical columns (sex, age band, bmi band, bp band): different people share
    every attribute; the summary says so and nothing is reported as leakage or conflict."""
    train, test = user_split(table("diabetes_bands"))
    report = check_report(train, test, label=LABEL, label_noise=False)
    assert serious(report.findings) == []
    notes = " ".join(report.summary.notes)
    assert "as chance predicts" in notes
    assert "not conflicting" in notes
