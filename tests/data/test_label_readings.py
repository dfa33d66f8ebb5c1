"""How `check data` reads a label: a count or a score is a regression target, not classes.

The tables are synthetic, generated in the shapes of public ones (nothing is downloaded):
every label is drawn from a known distribution, so no label is wrong.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trainmedic.data import check_report
from trainmedic.data._predictability import is_classification

from .real import table


def seizures_like(seed: int = 0) -> pd.DataFrame:
    """Synthetic, in the shape of Thall & Vail's epilepsy trial (MASS `epil`: 59 patients, 4
    two-week periods, 236 rows): treatment, age, the 8-week baseline count, the period, and
    `y`, the number of seizures in the period (negative binomial: 0 to ~100, tens of values)."""
    rng = np.random.default_rng(seed)
    patients = 59
    treated = np.repeat(rng.random(patients) < 0.5, 4)
    age = np.repeat(rng.integers(18, 43, patients), 4)
    base = np.repeat(rng.negative_binomial(2, 2 / 33, patients) + 6, 4)
    period = np.tile([1, 2, 3, 4], patients)
    mean = base / 4 * np.exp(-0.3 * treated - 0.05 * (period - 2.5))
    y = rng.negative_binomial(1.5, 1.5 / (1.5 + mean))
    return pd.DataFrame(
        {"trt": np.where(treated, "progabide", "placebo"), "age": age, "base": base, "period": period, "y": y}
    )


def vocabulary_like(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Synthetic, in the shape of the GSS vocabulary table (carData `Vocab`: year, sex, years
    of education, and `vocabulary`, words right out of 10): a beta-binomial score whose mean
    rises with education, 0 to 10."""
    rng = np.random.default_rng(seed)
    education = np.clip(np.round(rng.normal(13, 3, rows)), 0, 20).astype(int)
    mean = 1 / (1 + np.exp(-(0.15 * (education - 13) + 0.5)))
    vocabulary = rng.binomial(10, rng.beta(12 * mean, 12 * (1 - mean)))
    return pd.DataFrame(
        {
            "year": rng.choice(np.arange(1974, 2017, 2), rows),
            "sex": rng.choice(["Female", "Male"], rows),
            "education": education,
            "vocabulary": vocabulary,
        }
    )


def test_a_count_or_a_score_is_a_regression_target_not_classes() -> None:
    """A number of seizures (tens of integer values, a long tail of single rows) and words
    right out of 10 (11 values, few at 0): no class imbalance, no label-noise verdict; the
    summary reads a regression target and a note says why."""
    for frame, label in ((seizures_like(), "y"), (vocabulary_like(), "vocabulary")):
        counts = frame[label].value_counts()
        assert counts.size >= 11
        assert counts.min() / counts.max() < 0.1  # what DAT009 used to report
        report = check_report(frame, label=label)
        codes = {f.code for f in report.findings}
        assert not codes & {"DAT009", "DAT012"}, [f.message for f in report.findings]
        assert report.summary.label_distribution["kind"] == "regression"
        assert any("count or a score" in note for note in report.summary.notes), report.summary.notes


def test_class_codes_stay_classes_whatever_their_counts() -> None:
    """Digits 0-9 (flat counts), glass-like proportions in code order, and labels of a few
    codes however skewed: classes."""
    assert is_classification(table("digits")["target"])
    assert is_classification(table("digits_rare")["target"])
    assert is_classification(pd.Series(np.repeat(np.arange(7), [5, 40, 400, 900, 300, 50, 4])))
    rng = np.random.default_rng(0)
    for seed in range(20):  # arbitrary codes of random sizes
        sizes = np.random.default_rng(seed).integers(5, 300, 15)
        assert is_classification(pd.Series(np.repeat(rng.permutation(15), sizes)))
