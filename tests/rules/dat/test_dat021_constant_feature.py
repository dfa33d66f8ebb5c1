"""DAT021 `constant-feature`: `check data` on tables with a constant column, and healthy twins."""

from __future__ import annotations

import pandas as pd

from trainmedic.data import check
from trainmedic.findings import Finding, Severity
from trainmedic.rules._helpers.tables import rows
from trainmedic.rules.dat import dat021_constant_feature as dat021


def constant(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.code == "DAT021"]


def test_a_failed_join_constant_in_train_and_varied_in_val_is_a_warning() -> None:
    train, val = pd.DataFrame(rows(300, seed=0)), pd.DataFrame(rows(100, seed=1))
    train["discount"] = 0.0
    val["discount"] = [0.05 * (i % 5) for i in range(100)]
    (found,) = constant(check(train, val, label="y", label_noise=False))
    assert found.severity is Severity.WARNING
    assert found.evidence["columns"] == ["discount"]
    assert found.evidence["varies_beyond_chance"] == {"discount": {"val": 80}}
    assert "'discount' holds other values in 80 of 100 val rows" in found.message


def test_a_column_constant_everywhere_is_an_info() -> None:
    train, test = pd.DataFrame(rows(300, seed=0)), pd.DataFrame(rows(100, seed=1))
    train["source"] = test["source"] = "export-v2"
    (found,) = constant(check(train, test, label="y", label_noise=False))
    assert found.severity is Severity.INFO
    assert (
        "1 feature column of train holds one value in all 300 rows ('source' = 'export-v2')" in found.message
    )


def test_healthy_tables_and_their_near_twins_stay_quiet() -> None:
    train, val = pd.DataFrame(rows(300, seed=0)), pd.DataFrame(rows(100, seed=1))
    assert constant(check(train, val, label="y", label_noise=False)) == []
    flag = train.assign(flag=[1.0 if i % 7 else None for i in range(300)])  # one value and missing cells
    assert constant(check(flag, label="y", label_noise=False)) == []
    label_only = train.assign(y=1)  # the label is not a feature
    assert constant(check(label_only, label="y", label_noise=False)) == []
    few = pd.DataFrame(rows(300, seed=0)).head(dat021.MIN_ROWS - 1).assign(rare=0)
    assert constant(check(few, label="y", label_noise=False)) == []


def test_a_value_train_could_have_missed_by_chance_is_no_skew() -> None:
    """Two rows of 100 in test with a value never seen in 300 training rows: within 10 x the
    rule-of-three rate, an info, not a warning."""
    evidence = dat021.ConstantColumns(
        "train", 300, {"pixel_0_3": 0}, {"test": 100}, {"pixel_0_3": {"test": 2}}
    )
    (found,) = dat021.judge(evidence)
    assert found.severity is Severity.INFO
    assert dat021.skewed(evidence) == {}
