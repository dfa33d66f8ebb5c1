"""Real tables: scikit-learn's bundled data sets, split as users split them, and variants with
planted problems (the planting is synthetic; the rows are real).

Shared by the real-table tests and `benchmarks/data_real_tables.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pandas as pd

Splits = tuple[pd.DataFrame, pd.DataFrame]
LABEL = "target"


def _bunch(name: str) -> pd.DataFrame:
    from sklearn import datasets

    loader: Callable[..., object] = getattr(datasets, f"load_{name}")
    options = {"scaled": False} if name == "diabetes" else {}  # diabetes in its own units
    frame = loader(as_frame=True, **options).frame  # type: ignore[attr-defined]
    return pd.DataFrame(frame).rename(columns=str)


def table(name: str) -> pd.DataFrame:
    """One real table with its label in `target`.

    `diabetes_binned`: the diabetes progression cut at its terciles (a hard three-class
    problem); `diabetes_bands` and `cancer_bands`: a few columns cut into bands, as survey
    and census extracts are (sex, age band...): many different people share every row.
    """
    if name == "diabetes_binned":
        frame = _bunch("diabetes")
        frame[LABEL] = pd.qcut(frame[LABEL], 3, labels=False)
        return frame
    if name == "diabetes_text":
        frame = _bunch("diabetes")
        frame["sex"] = np.where(frame["sex"] == 1, "female", "male")
        return frame
    if name == "diabetes_bands":
        frame = _bunch("diabetes")
        return pd.DataFrame(
            {
                "sex": np.where(frame["sex"] == 1, "female", "male"),
                "age_band": pd.cut(frame["age"], [0, 30, 40, 50, 60, 100]).astype(str),
                "bmi_band": pd.qcut(frame["bmi"], 3, labels=["low", "mid", "high"]).astype(str),
                "bp_band": pd.qcut(frame["bp"], 3, labels=["low", "mid", "high"]).astype(str),
                LABEL: (frame[LABEL] > frame[LABEL].median()).astype(int),
            }
        )
    if name == "cancer_bands":
        frame = _bunch("breast_cancer")
        columns = ["mean radius", "mean area", "mean texture", "mean smoothness"]
        bands = {
            c.replace(" ", "_"): pd.qcut(frame[c], 3, labels=["low", "mid", "high"]).astype(str)
            for c in columns
        }
        return pd.DataFrame({**bands, LABEL: frame[LABEL]})
    return _bunch(name)


CLASSIFICATION = ("iris", "wine", "breast_cancer", "digits", "diabetes_binned")
ACCURATE = ("iris", "wine", "breast_cancer", "digits")  # a model reaches >= 95 % out of fold
HARD = ("diabetes_binned",)
BANDS = ("diabetes_bands", "cancer_bands")
ALL_CLEAN = (*CLASSIFICATION, "diabetes", "diabetes_text", *BANDS)


def user_split(frame: pd.DataFrame, seed: int = 0, test_size: float = 0.25) -> Splits:
    """What users write: `train_test_split(df, test_size=0.25, stratify=y)` (no stratify for
    regression targets)."""
    from sklearn.model_selection import train_test_split

    target = frame[LABEL]
    stratify = target if target.nunique() <= 20 else None
    train, test = train_test_split(frame, test_size=test_size, random_state=seed, stratify=stratify)
    return train.reset_index(drop=True), test.reset_index(drop=True)


def flip_labels(
    train: pd.DataFrame, fraction: float = 0.05, seed: int = 0
) -> tuple[pd.DataFrame, npt.NDArray[np.intp]]:
    """Plant label errors: `fraction` of rows get another class, chosen at random."""
    rng = np.random.default_rng(seed)
    noisy = train.copy()
    rows = np.sort(rng.choice(len(noisy), size=max(1, round(fraction * len(noisy))), replace=False))
    classes = np.sort(noisy[LABEL].unique())
    for row in rows:
        current = noisy.at[row, LABEL]
        noisy.at[row, LABEL] = rng.choice(classes[classes != current])
    return noisy, rows


def near_copies(train: pd.DataFrame, test: pd.DataFrame, rows: int = 60, seed: int = 0) -> pd.DataFrame:
    """`rows` training rows appended to test, numbers rounded to one decimal, text in another
    case with stray whitespace ("SOUTH " for "south")."""
    rng = np.random.default_rng(seed)
    copies = train.iloc[rng.choice(len(train), size=rows, replace=False)].copy()
    for column in copies.columns:
        if column == LABEL:
            continue
        if pd.api.types.is_float_dtype(copies[column].dtype):
            copies[column] = copies[column].round(1)
        elif not pd.api.types.is_numeric_dtype(copies[column].dtype):
            copies[column] = copies[column].astype(str).str.upper() + " "
    return pd.concat([test, copies], ignore_index=True)


def exact_copies(train: pd.DataFrame, test: pd.DataFrame, rows: int = 30, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    copies = train.iloc[rng.choice(len(train), size=rows, replace=False)]
    return pd.concat([test, copies], ignore_index=True)
