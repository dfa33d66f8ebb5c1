"""Small tables for engine parity: each built to trigger one DAT code, plus clean ones.

Every engine must give, on the files `write_case` writes, the findings the pandas engine
gives: same codes, slugs, severities and evidence keys, and the same values where they are
exact counts (`EXACT_KEYS`). The tables are small (about a thousand rows) so every sample
is the whole table and the sampled checks see what pandas sees. Imported by the parity
tests of every engine (DuckDB here, Spark in the Spark tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trainmedic.findings import Finding

from .real import titanic_like, user_split
from .synth import clean_splits, clean_table

N = 1200
# Evidence whose value is a count (or a list/fraction of counts): equal across engines.
EXACT_KEYS = frozenset(
    {
        "rows",
        "fraction",
        "split",
        "splits",
        "column",
        "columns",
        "distinct_examples",
        "duplicate_rows",
        "distinct_duplicated",
        "examples",
        "example_rows",
        "example_groups",
        "groups",
        "groups_fraction",
        "features_compared",
        "ratio",
        "class_counts",
        "classes",
        "missing_columns",
        "extra_columns",
        "dtype_changes",
        "text_in_numbers",
        "order_differs",
        "train_order",
        "unseen_categories",
        "encoding_variants",
        "feature",
        "scaled_features",
        "shared_values",
        "distinct_fraction",
        "drifted",
        "compared",
    }
)


@dataclass(frozen=True)
class Case:
    """Splits (name -> frame) and the `check` arguments; `code` is what it must trigger
    (None: a clean case that must give no finding at warning or above)."""

    name: str
    code: str | None
    splits: dict[str, pd.DataFrame]
    options: dict[str, Any] = field(default_factory=dict)
    pandas_index: bool = False  # written as pandas writes by default: with the frame's index


def _three() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return clean_splits(N)


def split_overlap() -> Case:
    train, val, test = _three()
    val.iloc[:37] = train.iloc[100:137].to_numpy()
    return Case("split-overlap", "DAT001", {"train": train, "val": val, "test": test})


def near_duplicates() -> Case:
    train, val, test = _three()
    copies = train.iloc[:23].copy()
    copies["x0"] = copies["x0"] * (1 + 1e-9)
    copies["city"] = " " + copies["city"].str.upper() + "  "
    test.iloc[:23] = copies.to_numpy()
    return Case("near-duplicates", "DAT002", {"train": train, "val": val, "test": test})


def coarse_rounded_ages() -> Case:
    """Sex, class and an age in years, some written 28.5: rows equal up to the rounding of the
    age are chance (a note), in every engine."""
    train, test = user_split(titanic_like(seed=1), seed=1)
    return Case("coarse-rounded-ages", None, {"train": train, "test": test}, {"label": "target"})


def group_overlap() -> Case:
    train, val, test = _three()
    train["patient"] = np.arange(len(train)) // 4
    val["patient"] = 10_000 + np.arange(len(val)) // 4
    test["patient"] = 20_000 + np.arange(len(test)) // 4
    val.loc[val.index[:12], "patient"] = [3, 3, 3, 3, 7, 7, 7, 7, 9, 9, 9, 9]
    return Case("group-overlap", "DAT003", {"train": train, "val": val, "test": test}, {"group": "patient"})


def temporal_overlap() -> Case:
    train, val, test = _three()
    train["when"] = pd.date_range("2024-01-01", periods=len(train), freq="h")
    val["when"] = pd.date_range("2025-01-01", periods=len(val), freq="h")
    test["when"] = pd.date_range("2026-01-01", periods=len(test), freq="h")
    val.loc[val.index[:19], "when"] = pd.Timestamp("2024-01-02")
    return Case("temporal-overlap", "DAT004", {"train": train, "val": val, "test": test}, {"time": "when"})


def target_leakage() -> Case:
    train, val, test = _three()
    for frame in (train, val, test):
        frame["refund_issued"] = np.where(frame["y"] == 1, "yes", "no")
    return Case("target-leakage", "DAT005", {"train": train, "val": val, "test": test})


def conflicts_and_duplicates() -> Case:
    train = clean_table(N, 0)
    conflicts = train.iloc[:15].copy()
    conflicts["y"] = 1 - conflicts["y"]
    train = pd.concat([train, conflicts, train.iloc[500:540]], ignore_index=True)
    return Case("conflicting-labels", "DAT006", {"train": train})


def duplicates() -> Case:
    train = clean_table(N, 0)
    train = pd.concat([train, train.iloc[500:540]], ignore_index=True)
    return Case("duplicate-rows", "DAT007", {"train": train})


def missing_values() -> Case:
    train = clean_table(N, 0)
    train["amount"] = train["amount"].mask(np.arange(len(train)) % 10 == 0)
    train["y"] = train["y"].astype("float64").mask(np.arange(len(train)) >= N - 7)
    return Case("missing-values", "DAT008", {"train": train})


def class_imbalance() -> Case:
    train = clean_table(N, 0)
    train["y"] = np.where(np.arange(len(train)) < 30, "fraud", "ok")
    return Case("class-imbalance", "DAT009", {"train": train})


def rare_class() -> Case:
    """Six classes, the smallest 6 of 149 rows: above the ratio, below a handful."""
    train = clean_table(149, 0)
    train["y"] = np.repeat(list("abcdef"), [53, 50, 18, 12, 10, 6])
    return Case("rare-class", "DAT009", {"train": train})


def schema_mismatch() -> Case:
    train, _, _ = _three()
    serving = clean_table(400, 5).drop(columns=["y", "x5"])
    serving["count"] = serving["count"].astype(str)
    serving["debug"] = 1
    serving = serving[["x1", "x0", *[c for c in serving.columns if c not in ("x0", "x1")]]]
    return Case("schema-mismatch", "DAT010", {"train": train, "serving": serving})


def unseen_categories() -> Case:
    train, val, _ = _three()
    val.loc[val.index[:50], "city"] = "tokyo"
    val.loc[val.index[50:60], "kind"] = "A "
    return Case("unseen-categories", "DAT010", {"train": train, "val": val})


def feature_drift() -> Case:
    train = clean_table(N, 0)
    serving = clean_table(N, 1).drop(columns="y")
    serving["x0"] += 1.5
    serving["city"] = np.where(np.arange(len(serving)) % 2 == 0, "paris", serving["city"])
    return Case("feature-drift", "DAT011", {"train": train, "serving": serving})


def label_noise() -> Case:
    train = clean_table(2000, 0)
    flipped = np.random.default_rng(3).choice(len(train), size=100, replace=False)
    train.loc[flipped, "y"] = 1 - train.loc[flipped, "y"]
    return Case("label-noise", "DAT012", {"train": train}, {"label_noise": True})


def preprocessing_before_split() -> Case:
    train, val, test = _three()
    columns = ["x0", "x1", "amount"]
    union = pd.concat([train, val, test])[columns]
    centre, scale = union.mean(), union.std(ddof=0)
    for frame in (train, val, test):
        frame[columns] = (frame[columns] - centre) / scale
    return Case("preprocessing-before-split", "DAT014", {"train": train, "val": val, "test": test})


def identifier_column() -> Case:
    train, val, test = _three()
    train["customer_id"] = np.arange(len(train))
    val["customer_id"] = np.arange(len(val)) + len(train) - 20  # 20 customers twice
    test["customer_id"] = np.arange(len(test)) + 10 * N
    return Case("identifier-column", "DAT015", {"train": train, "val": val, "test": test})


def clean() -> Case:
    train, val, test = _three()
    return Case("clean", None, {"train": train, "val": val, "test": test})


def clean_with_serving_and_keys() -> Case:
    train, val, test = _three()
    serving = clean_table(300, 9).drop(columns="y")
    for offset, frame in enumerate((train, val, test)):
        frame["patient"] = 100_000 * offset + np.arange(len(frame)) // 3
        frame["when"] = pd.date_range(f"{2020 + offset}-01-01", periods=len(frame), freq="min")
    return Case(
        "clean-with-serving",
        None,
        {"train": train, "val": val, "test": test, "serving": serving},
        {"group": "patient", "time": "when"},
    )


def mixed_types() -> Case:
    """One validation row holds text in a column of numbers ('rotary' among cylinder counts)."""
    train, val, test = _three()
    val["count"] = val["count"].astype(str)
    val.loc[val.index[5], "count"] = "rotary"
    return Case("mixed-types", "DAT010", {"train": train, "val": val, "test": test})


def pandas_index() -> Case:
    """Splits written by `to_parquet()` from a filtered, a concatenated and an indexed frame:
    pandas keeps the index as a column (`__index_level_0__`, or its name) that its metadata
    marks as the index; it is no feature, in any engine."""
    train, val, test = clean_splits(2 * N)
    train = train[np.random.default_rng(0).random(len(train)) < 0.5]  # filtered: the kept row labels
    val = pd.concat([val.iloc[: N // 4], val.iloc[N // 4 : N // 2]])  # concatenated: labels repeat
    test = test.iloc[: N // 2].sample(frac=1.0, random_state=0).rename_axis("row")  # shuffled, named
    return Case("pandas-index", None, {"train": train, "val": val, "test": test}, pandas_index=True)


def pandas_index_split_overlap() -> Case:
    """The copied rows keep their training row labels: equal rows, index and all."""
    train, val, test = _three()
    val = pd.concat([val.iloc[37:], train.iloc[100:137]])
    return Case(
        "pandas-index-overlap", "DAT001", {"train": train, "val": val, "test": test}, pandas_index=True
    )


CASES: list[Callable[[], Case]] = [
    split_overlap,
    near_duplicates,
    coarse_rounded_ages,
    group_overlap,
    temporal_overlap,
    target_leakage,
    conflicts_and_duplicates,
    duplicates,
    missing_values,
    class_imbalance,
    rare_class,
    schema_mismatch,
    unseen_categories,
    feature_drift,
    label_noise,
    preprocessing_before_split,
    identifier_column,
    clean,
    clean_with_serving_and_keys,
    mixed_types,
    pandas_index,
    pandas_index_split_overlap,
]


def write_case(case: Case, folder: Path, fmt: str = "parquet") -> dict[str, Path]:
    """Each split as a Parquet (or CSV) file, what every engine reads."""
    paths = {}
    for name, frame in case.splits.items():
        path = folder / f"{name}.{fmt}"
        if fmt == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path, index=None if case.pandas_index else False)
        paths[name] = path
    return paths


def check_options(case: Case) -> dict[str, Any]:
    return {
        "label": "y" if "y" in case.splits["train"].columns else None,
        "label_noise": False,
        **case.options,
    }


def projection(findings: list[Finding]) -> list[dict[str, Any]]:
    """What must agree across engines: code, slug, severity, evidence keys and exact values."""
    out = []
    for f in findings:
        exact = {k: v for k, v in f.evidence.items() if k in EXACT_KEYS}
        out.append(
            {
                "code": f.code,
                "slug": f.slug,
                "severity": f.severity.name,
                "keys": sorted(f.evidence),
                "exact": exact,
            }
        )
    return sorted(out, key=lambda p: (p["code"], str(p["exact"].get("split", p["exact"].get("splits")))))
