"""How well one feature alone predicts the label: a histogram "tree" per feature.

Each feature is cut into at most `BINS` bins (quantiles for numbers, values for
low-cardinality columns, missing as its own bin); the bins are fitted on one
half of the rows and scored on the other half, so an ID-like column (unique per
row) predicts nothing on the held-out half, while a column that encodes the
label predicts it perfectly. Classification is scored as accuracy normalised by
the majority baseline, `(acc - base) / (1 - base)`; regression as R² of the bin
means. One `np.bincount` per feature, so it scales to millions of rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.rules.dat.dat005_target_leakage import FeatureScore

BINS = 128
MAX_ROWS = 200_000
MAX_TABLE_CELLS = 20_000_000
CLASSIFICATION_MAX_CLASSES = 50
_SEED = 0


def is_classification(label: pd.Series) -> bool:
    """Text, bool, categorical or few integral values: classes; otherwise a regression target."""
    if not pd.api.types.is_numeric_dtype(label.dtype) or pd.api.types.is_bool_dtype(label.dtype):
        return True
    values = label.dropna()
    if values.nunique() > CLASSIFICATION_MAX_CLASSES:
        return False
    as_float = values.to_numpy(dtype=np.float64)
    return bool(np.all(np.equal(np.mod(as_float, 1), 0)))


def feature_scores(frame: pd.DataFrame, features: Sequence[str], label: str) -> list[FeatureScore]:
    """Every feature's held-out score, best first; rows with a missing label are left out.

    Works column by column on the chosen rows, so it never copies the whole frame.
    """
    rng = np.random.default_rng(_SEED)
    rows = np.flatnonzero(frame[label].notna().to_numpy())
    if len(rows) > MAX_ROWS:
        rows = np.sort(rng.choice(rows, MAX_ROWS, replace=False))
    if len(rows) < 20:
        return []
    every_row = len(rows) == len(frame)
    fit = rng.random(len(rows)) < 0.5
    target = frame[label] if every_row else frame[label].iloc[rows]
    classification = is_classification(target)
    scores = []
    for feature in features:
        column = frame[feature] if every_row else frame[feature].iloc[rows]
        bins, n_bins = bin_codes(column, fit)
        if classification:
            scores.append(_classification_score(feature, bins, n_bins, target, fit))
        else:
            scores.append(_regression_score(feature, bins, n_bins, target, fit))
    return sorted(scores, key=lambda s: -s.score)


def bin_codes(series: pd.Series, fit: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], int]:
    """Integer bin of each row; bin 0 is 'missing'; quantile edges come from the fit half."""
    if pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        finite = values[fit & np.isfinite(values)]
        if finite.size and np.unique(finite[:100_000]).size > BINS:
            edges = np.unique(np.quantile(finite, np.linspace(0, 1, BINS + 1)[1:-1]))
            codes = np.searchsorted(edges, values, side="right") + 1
            codes[~np.isfinite(values)] = 0
            return codes.astype(np.int64), len(edges) + 2
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    return (codes.astype(np.int64) + 1), len(uniques) + 1


def _classification_score(
    feature: str,
    bins: npt.NDArray[np.int64],
    n_bins: int,
    target: pd.Series,
    fit: npt.NDArray[np.bool_],
) -> FeatureScore:
    classes, _ = pd.factorize(target)
    n_classes = int(classes.max()) + 1
    if n_bins * n_classes > MAX_TABLE_CELLS:  # huge-cardinality text: keep the most frequent values
        keep = MAX_TABLE_CELLS // max(n_classes, 1) - 1
        bins = np.where(bins < keep, bins, keep)
        n_bins = keep + 1
    table = np.bincount(bins[fit] * n_classes + classes[fit], minlength=n_bins * n_classes)
    table = table.reshape(n_bins, n_classes)
    overall = np.bincount(classes[fit], minlength=n_classes)
    majority = int(np.argmax(overall))
    predicted = np.where(table.sum(axis=1) > 0, np.argmax(table, axis=1), majority)
    held = ~fit
    accuracy = float(np.mean(predicted[bins[held]] == classes[held]))
    baseline = float(np.mean(classes[held] == majority))
    score = (accuracy - baseline) / (1 - baseline) if baseline < 1 else 0.0
    return FeatureScore(feature, max(score, 0.0), "held-out accuracy", accuracy, baseline, int(held.sum()))


def _regression_score(
    feature: str,
    bins: npt.NDArray[np.int64],
    n_bins: int,
    target: pd.Series,
    fit: npt.NDArray[np.bool_],
) -> FeatureScore:
    y = target.to_numpy(dtype=np.float64)
    counts = np.bincount(bins[fit], minlength=n_bins)
    sums = np.bincount(bins[fit], weights=y[fit], minlength=n_bins)
    mean = float(y[fit].mean())
    means = np.where(counts > 0, sums / np.maximum(counts, 1), mean)
    held = ~fit
    residual = float(np.sum((y[held] - means[bins[held]]) ** 2))
    total = float(np.sum((y[held] - y[held].mean()) ** 2))
    r2 = 1 - residual / total if total > 0 else 0.0
    return FeatureScore(feature, max(r2, 0.0), "held-out R²", r2, 0.0, int(held.sum()))
