"""Generate the data sets of the DAT cases: `python -m benchmarks.failures.make_data OUT`.

Each failure case is a folder of CSV splits (train/val/test, sometimes serving)
written from one clean synthetic table with ONE problem planted the way it
happens in real pipelines (a copy-paste of rows across splits, a joined refund
column, a scaler fitted before the split...), sized so that the peers' documented
defaults can see it. The controls are that clean table and real tables: the data
sets scikit-learn ships, split as users split them (`train_test_split`, stratified,
70/15/15). A control must give no warning and no error. Deterministic (fixed
seeds), a few seconds.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

CITIES = ["paris", "lyon", "nice", "lille", "brest"]
Splits = dict[str, pd.DataFrame]


def table(n: int, seed: int) -> pd.DataFrame:
    """Continuous features (no chance duplicates), two categoricals, a noise-free label."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": rng.normal(size=n) for i in range(6)})
    frame["amount"] = rng.lognormal(3, 1, size=n).round(2) + rng.random(n)
    frame["count"] = rng.integers(0, 1_000_000, size=n)
    frame["city"] = rng.choice(CITIES, size=n)
    frame["kind"] = rng.choice(["a", "b", "c"], size=n)
    frame["y"] = ((frame["x0"] + frame["x1"] > 0) ^ (frame["kind"] == "c")).astype(int)
    return frame


def splits(n: int = 2000) -> Splits:
    return {"train": table(n, 0), "val": table(n // 4, 1), "test": table(n // 4, 2)}


def clean() -> Splits:
    data = splits()
    data["serving"] = table(600, 9).drop(columns="y")
    return data


def split_overlap() -> Splits:
    """Rows copied from train into val (a re-run of the split script appended, not replaced)."""
    data = splits()
    data["val"].iloc[:40] = data["train"].iloc[100:140].to_numpy()
    return data


def near_duplicate_overlap() -> Splits:
    """The same rows re-exported by another tool: float noise, upper-case, padded strings."""
    data = splits()
    copies = data["train"].iloc[:30].copy()
    copies["x0"] = copies["x0"] * (1 + 1e-9)
    copies["city"] = " " + copies["city"].str.upper() + "  "
    data["test"].iloc[:30] = copies.to_numpy()
    return data


def identifier_column() -> Splits:
    """An export that keeps the customer key as a column; 50 test customers were also in train."""
    data = splits()
    for offset, name in zip((0, 100_000, 200_000), ("train", "val", "test"), strict=True):
        data[name].insert(0, "customer_id", [f"C{offset + i:06d}" for i in range(len(data[name]))])
    data["test"].loc[:49, "customer_id"] = data["train"]["customer_id"].iloc[500:550].to_numpy()
    return data


def group_overlap() -> Splits:
    """A random row split of a dataset with several rows per patient."""
    data = splits()
    for offset, name in zip((0, 10_000, 20_000), ("train", "val", "test"), strict=True):
        data[name]["patient"] = offset + np.arange(len(data[name])) // 4
    data["val"].loc[data["val"].index[:16], "patient"] = np.repeat([3, 7, 9, 11], 4)
    return data


def temporal_overlap() -> Splits:
    """A forecasting set split at random instead of by time."""
    data = splits()
    for start, name in zip(("2024-01-01", "2025-01-01", "2026-01-01"), ("train", "val", "test"), strict=True):
        data[name]["when"] = pd.date_range(start, periods=len(data[name]), freq="h").astype(str)
    data["val"].loc[data["val"].index[:25], "when"] = "2024-02-01 00:00:00"
    return data


def target_leakage() -> Splits:
    """A column filled after the outcome (refund issued) joined into the features."""
    data = splits()
    for frame in data.values():
        frame["refund_issued"] = np.where(frame["y"] == 1, "yes", "no")
    return data


def conflicting_labels() -> Splits:
    """The same examples labelled twice, differently (two annotators, merged)."""
    train = table(2000, 0)
    conflicts = train.iloc[:20].copy()
    conflicts["y"] = 1 - conflicts["y"]
    return {"train": pd.concat([train, conflicts], ignore_index=True)}


def duplicate_rows() -> Splits:
    """A shard appended twice: 200 of 2,200 rows (9 %), above the 5 % that deepchecks' Data
    Duplicates condition allows by default (deepchecks/utils/abstracts/data_duplicates.py)."""
    train = table(2000, 0)
    return {"train": pd.concat([train, train.iloc[500:700]], ignore_index=True)}


def missing_values() -> Splits:
    """A join that left 15 % of a feature and a few labels empty."""
    train = table(2000, 0)
    train["amount"] = train["amount"].mask(np.arange(len(train)) % 7 == 0)
    train["y"] = train["y"].astype("float64").mask(np.arange(len(train)) >= 1990)
    return {"train": train}


def class_imbalance() -> Splits:
    """Fraud at 2 %."""
    train = table(2000, 0)
    train["y"] = np.where(np.arange(len(train)) < 40, "fraud", "ok")
    return {"train": train}


def schema_mismatch() -> Splits:
    """Serving data from a newer export: a column dropped, one renamed, a number now text."""
    data = splits()
    serving = table(500, 5).drop(columns=["y", "x5"])
    serving["count"] = serving["count"].astype(str)
    serving["debug"] = 1
    data["serving"] = serving
    return data


def feature_drift() -> Splits:
    """Serving traffic from another population (shifted features, one city dominates)."""
    data = splits()
    serving = table(2000, 7).drop(columns="y")
    serving["x0"] += 1.5
    serving["x3"] += 0.5
    serving["city"] = np.where(np.arange(len(serving)) % 2 == 0, "paris", serving["city"])
    data["serving"] = serving
    return data


def label_noise() -> Splits:
    """5 % of labels flipped at random (annotation errors)."""
    train = table(4000, 0)
    flipped = np.random.default_rng(3).choice(len(train), size=200, replace=False)
    train.loc[flipped, "y"] = 1 - train.loc[flipped, "y"]
    return {"train": train}


def preprocessing_before_split() -> Splits:
    """StandardScaler fitted on all rows, then the split (the validation score leaks)."""
    data = splits()
    columns = ["x0", "x1", "amount"]
    union = pd.concat(list(data.values()))[columns]
    centre, scale = union.mean(), union.std(ddof=0)
    for frame in data.values():
        frame[columns] = (frame[columns] - centre) / scale
    return data


def sklearn_table(name: str) -> Callable[[], Splits]:
    """A data set bundled with scikit-learn (no download), split 70/15/15 with train_test_split
    (stratified on a class label), the way its user guide splits data."""

    def make() -> Splits:
        from sklearn import datasets
        from sklearn.model_selection import train_test_split

        frame = getattr(datasets, f"load_{name}")(as_frame=True).frame.rename(columns={"target": "y"})
        classes = frame["y"].nunique() <= 20
        train, rest = train_test_split(
            frame, test_size=0.3, random_state=0, stratify=frame["y"] if classes else None
        )
        val, test = train_test_split(
            rest, test_size=0.5, random_state=0, stratify=rest["y"] if classes else None
        )
        return {"train": train, "val": val, "test": test}

    return make


REAL_TABLES = ("breast_cancer", "wine", "digits", "diabetes")

CASES: dict[str, Callable[[], Splits]] = {
    "clean": clean,
    "split_overlap": split_overlap,
    "near_duplicate_overlap": near_duplicate_overlap,
    "group_overlap": group_overlap,
    "identifier_column": identifier_column,
    "temporal_overlap": temporal_overlap,
    "target_leakage": target_leakage,
    "conflicting_labels": conflicting_labels,
    "duplicate_rows": duplicate_rows,
    "missing_values": missing_values,
    "class_imbalance": class_imbalance,
    "schema_mismatch": schema_mismatch,
    "feature_drift": feature_drift,
    "label_noise": label_noise,
    "preprocessing_before_split": preprocessing_before_split,
    **{f"real_{name}": sklearn_table(name) for name in REAL_TABLES},
}


def write_contract_case(out: Path) -> None:
    """DAT013: a model's input contract captured at training, and inference rows that break it."""
    from trainmedic import contract

    folder = out / "preprocessing_mismatch"
    folder.mkdir(parents=True, exist_ok=True)
    contract.capture(table(500, 0), label="y").save(folder / "contract.json")
    serving = table(200, 1).drop(columns="y")
    serving = serving[["x1", "x0", *[c for c in serving.columns if c not in ("x0", "x1")]]]  # feature order
    serving["amount"] = serving["amount"] / 100  # cents -> euros at serving time
    serving.to_csv(folder / "serving.csv", index=False)
    healthy = out / "contract_ok"
    healthy.mkdir(parents=True, exist_ok=True)
    contract.capture(table(500, 0), label="y").save(healthy / "contract.json")
    table(200, 1).drop(columns="y").to_csv(healthy / "serving.csv", index=False)


def main(out: Path) -> None:
    for name, make in CASES.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for split, frame in make().items():
            frame.to_csv(folder / f"{split}.csv", index=False)
    write_contract_case(out)
    (out / "index.json").write_text(json.dumps(sorted([*CASES, "preprocessing_mismatch", "contract_ok"])))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
