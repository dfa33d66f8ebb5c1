"""`split` and `nested_cv`: sizes, stratification, groups and time kept, nothing leaks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trainmedic.data import check, nested_cv, split
from trainmedic.errors import UsageError

from .synth import clean_table


def frame_with_duplicates() -> pd.DataFrame:
    frame = clean_table(2000, 0)
    frame["y"] = np.where(np.arange(len(frame)) % 10 == 0, 1, 0)  # 10 % positives
    frame["patient"] = np.arange(len(frame)) // 5
    frame["day"] = np.arange(len(frame)) // 20
    return pd.concat([frame, frame.iloc[:300]], ignore_index=True)  # duplicates to keep together


def test_stratified_split_keeps_class_shares_and_duplicates_together() -> None:
    frame = frame_with_duplicates()
    train, val, test = split(frame, "stratified", label="y", ignore=["patient", "day"], seed=1)
    assert len(train) + len(val) + len(test) == len(frame)
    assert len(train) == pytest.approx(0.8 * len(frame), rel=0.02)
    for part in (train, val, test):
        assert part["y"].mean() == pytest.approx(frame["y"].mean(), abs=0.01)
    found = check(train, val, test, label="y", ignore=["patient", "day"], label_noise=False)
    assert {f.code for f in found} == {"DAT007"}  # the duplicates stay, each within one split


def test_group_split_never_shares_a_group() -> None:
    frame = frame_with_duplicates()
    parts = split(frame, "group", label="y", group="patient", ignore=["day"], sizes=(0.7, 0.3))
    assert len(parts) == 2
    assert set(parts[0]["patient"]).isdisjoint(parts[1]["patient"])


def test_time_split_runs_forward_and_keeps_equal_times_together() -> None:
    frame = clean_table(1000, 0).assign(day=np.arange(1000) // 10)
    train, val, test = split(frame, "time", time="day")
    assert train["day"].max() < val["day"].min() <= val["day"].max() < test["day"].min()


def test_time_split_with_duplicates_across_the_boundary_is_refused() -> None:
    frame = clean_table(500, 0).assign(day=np.arange(500))
    frame = pd.concat([frame, frame.iloc[:5].assign(day=499)], ignore_index=True)
    with pytest.raises(UsageError, match="split-overlap check fails on the split"):
        split(frame, "time", time="day")


def test_nested_cv_folds_are_disjoint_and_group_safe() -> None:
    frame = frame_with_duplicates()
    folds = nested_cv(frame, "stratified", label="y", group="patient", ignore=["day"], outer=4, inner=3)
    assert len(folds) == 4
    tested = np.concatenate([f.test for f in folds])
    assert sorted(tested.tolist()) == list(range(len(frame)))
    for fold in folds:
        assert set(frame["patient"].iloc[fold.train]).isdisjoint(frame["patient"].iloc[fold.test])
        assert len(fold.inner) == 3
        for inner_train, inner_test in fold.inner:
            assert set(inner_train) | set(inner_test) == set(fold.train)
            assert set(frame["patient"].iloc[inner_train]).isdisjoint(frame["patient"].iloc[inner_test])
    time_folds = nested_cv(frame.drop_duplicates(), "time", time="day", outer=3, inner=2)
    for fold in time_folds:
        assert frame["day"].iloc[fold.train].max() <= frame["day"].iloc[fold.test].min()


def test_bad_split_arguments() -> None:
    frame = clean_table(100, 0)
    with pytest.raises(UsageError, match="strategy 'kfold' is not one of"):
        split(frame, "kfold")
    with pytest.raises(UsageError, match="strategy 'group' needs group=COLUMN"):
        split(frame, "group")
    with pytest.raises(UsageError, match=r"label 'why' is not a column"):
        split(frame, "stratified", label="why")
    with pytest.raises(UsageError, match="must be two or more positive fractions"):
        split(frame, "random", sizes=(1.0,))
