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
    and census extracts are (sex, age band...): many different people share every row;
    `titanic_like`: generated in the Titanic table's shape (`titanic_like`); `digits_rare`:
    real digits in the glass table's six class proportions (`digits_rare`).
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
    if name == "titanic_like":
        return titanic_like()
    if name == "digits_rare":
        return digits_rare()
    return _bunch(name)


def titanic_like(rows: int = 891, seed: int = 0) -> pd.DataFrame:
    """Generated in the shape of the Titanic passenger table (nothing can be downloaded): sex,
    passenger class and an age in years, 1 in 25 ages estimated and written as xx.5 and a
    few infants' in months (0.42, 0.83...): many passengers share every attribute, and rows
    equal up to the rounding of `age` across a split are chance, not copies."""
    rng = np.random.default_rng(seed)
    pclass = rng.choice([1, 2, 3], rows, p=[0.24, 0.21, 0.55])
    sex = rng.choice(["male", "female"], rows, p=[0.65, 0.35])
    years = np.round(np.clip(rng.normal(30, 14, rows) - (pclass - 2) * 5, 1, 80))
    age = np.where(rng.random(rows) < 0.04, years + 0.5, years)
    age = np.where(rng.random(rows) < 0.01, rng.choice([0.42, 0.67, 0.75, 0.83, 0.92], rows), age)
    logit = 1.5 * (sex == "female") - 0.8 * (pclass - 2) - 0.02 * age
    survived = (rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int)
    return pd.DataFrame({"pclass": pclass, "sex": sex, "age": age, LABEL: survived})


GLASS_CLASSES = (70, 76, 17, 13, 9, 29)  # the glass identification table's six classes, 214 rows


def digits_rare(counts: tuple[int, ...] = GLASS_CLASSES) -> pd.DataFrame:
    """Real digit images, six classes in the glass table's proportions: the smallest class
    holds 9 of 214 rows (6 or 7 after a split), 13 % of the largest."""
    frame = _bunch("digits")
    parts = [frame[frame[LABEL] == digit].head(n) for digit, n in enumerate(counts)]
    return pd.concat(parts, ignore_index=True)


CLASSIFICATION = ("iris", "wine", "breast_cancer", "digits", "diabetes_binned")
ACCURATE = ("iris", "wine", "breast_cancer", "digits")  # a model reaches >= 95 % out of fold
HARD = ("diabetes_binned",)
BANDS = ("diabetes_bands", "cancer_bands", "titanic_like")
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
