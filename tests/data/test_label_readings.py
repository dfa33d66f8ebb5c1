"""How `check data` reads a label: a count or a score is a regression target, not classes.

The tables (`tests/data/ordinary.py`) are synthetic, generated in the shapes of public ones.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from trainmedic.data import check_report
from trainmedic.data._predictability import is_classification

from .ordinary import seizures_like, vocabulary_like
from .real import table


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
