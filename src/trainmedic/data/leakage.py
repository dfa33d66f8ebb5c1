"""Leakage between splits (DAT001-DAT004) and from a single feature into the label (DAT005).

Overlap checks compare 64-bit row hashes with pandas' hash-table `isin`, so each
pair of splits costs O(rows). Serving data is not an evaluation split: it is
compared for schema and drift (parity), never for overlap.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data.context import Dataset, Split
from trainmedic.data.predictability import feature_scores
from trainmedic.errors import UsageError
from trainmedic.findings import Finding
from trainmedic.rules.data import (
    GROUP_OVERLAP,
    NEAR_DUPLICATE_OVERLAP,
    SPLIT_OVERLAP,
    TARGET_LEAKAGE,
    TARGET_LEAKAGE_SCORE,
    TEMPORAL_OVERLAP,
)

EVALUATION_SPLITS = ("train", "val", "test")


def split_pairs(data: Dataset) -> Iterator[tuple[Split, Split]]:
    """(earlier, later) for every pair of train/val/test, in time order."""
    ordered = [s for s in data.splits if s.name in EVALUATION_SPLITS]
    for i, earlier in enumerate(ordered):
        for later in ordered[i + 1 :]:
            yield earlier, later


def in_other(later: npt.NDArray[np.uint64], earlier: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    return np.asarray(pd.Series(later).isin(pd.Series(earlier)).to_numpy(), dtype=bool)


def split_overlap(data: Dataset) -> list[Finding]:
    """DAT001: rows of a later split whose features are identical to a row of an earlier one."""
    found = []
    for earlier, later in split_pairs(data):
        if not later.features:
            continue
        mask = in_other(later.feature_hash, earlier.feature_hash)
        count = int(mask.sum())
        if count == 0:
            continue
        distinct = int(pd.Series(later.feature_hash[mask]).nunique())
        found.append(
            SPLIT_OVERLAP.finding(
                f"{count:,} of {len(later):,} {later.name} rows ({count / len(later):.1%}) have "
                f"features identical to a {earlier.name} row",
                evidence={
                    "splits": [earlier.name, later.name],
                    "rows": count,
                    "fraction": round(count / len(later), 6),
                    "distinct_examples": distinct,
                    "example_rows": {later.name: later.example_rows(mask)},
                    "features_compared": len(later.features),
                },
            )
        )
    return found


def near_duplicate_overlap(data: Dataset) -> list[Finding]:
    """DAT002: equal after rounding/case/whitespace normalisation, but not exactly equal."""
    found = []
    for earlier, later in split_pairs(data):
        if not later.features:
            continue
        exact = in_other(later.feature_hash, earlier.feature_hash)
        near = in_other(later.near_hash, earlier.near_hash) & ~exact
        count = int(near.sum())
        if count == 0:
            continue
        found.append(
            NEAR_DUPLICATE_OVERLAP.finding(
                f"{count:,} {later.name} rows ({count / len(later):.1%}) are near-duplicates of "
                f"{earlier.name} rows (equal up to rounding, case or whitespace)",
                evidence={
                    "splits": [earlier.name, later.name],
                    "rows": count,
                    "fraction": round(count / len(later), 6),
                    "example_rows": {later.name: later.example_rows(near)},
                    "normalisation": "floats to ~6 significant digits; text stripped, lower-cased",
                },
            )
        )
    return found


def group_overlap(data: Dataset) -> list[Finding]:
    """DAT003: a group value present in two evaluation splits."""
    column = data.roles.group
    if column is None:
        return []
    found = []
    for earlier, later in split_pairs(data):
        groups = later.frame[column]
        mask = np.asarray(groups.isin(earlier.frame[column].dropna()).to_numpy(), dtype=bool)
        mask = mask & np.asarray(groups.notna().to_numpy(), dtype=bool)
        rows = int(mask.sum())
        if rows == 0:
            continue
        shared = pd.unique(groups[mask])
        found.append(
            GROUP_OVERLAP.finding(
                f"{len(shared):,} {column!r} groups appear in both {earlier.name} and {later.name} "
                f"({rows:,} {later.name} rows, {rows / len(later):.1%})",
                evidence={
                    "splits": [earlier.name, later.name],
                    "column": column,
                    "groups": len(shared),
                    "groups_fraction": round(len(shared) / max(groups.nunique(), 1), 6),
                    "rows": rows,
                    "fraction": round(rows / len(later), 6),
                    "example_groups": [_plain(v) for v in shared[:10]],
                },
            )
        )
    return found


def temporal_overlap(data: Dataset) -> list[Finding]:
    """DAT004: rows of a later split timed before the latest time of an earlier split."""
    column = data.roles.time
    if column is None:
        return []
    times = {s.name: as_time(s.frame[column], column=column, split=s.name) for s in data.splits}
    found = []
    for earlier, later in split_pairs(data):
        latest = times[earlier.name].max()
        if pd.isna(latest):
            continue
        later_times = times[later.name]
        mask = np.asarray((later_times < latest).to_numpy(), dtype=bool)
        rows = int(mask.sum())
        if rows == 0:
            continue
        found.append(
            TEMPORAL_OVERLAP.finding(
                f"{rows:,} {later.name} rows ({rows / len(later):.1%}) are timed before the latest "
                f"{earlier.name} time {latest}",
                evidence={
                    "splits": [earlier.name, later.name],
                    "column": column,
                    "rows": rows,
                    "fraction": round(rows / len(later), 6),
                    f"{earlier.name}_latest": str(latest),
                    f"{later.name}_earliest": str(later_times.min()),
                    "example_rows": {later.name: later.example_rows(mask)},
                },
            )
        )
    return found


def as_time(series: pd.Series, *, column: str, split: str) -> pd.Series:
    """Numbers and datetimes compare as they are; text is parsed, or a usage error."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_datetime64_any_dtype(series.dtype):
        return series
    try:
        parsed = pd.to_datetime(series, errors="raise", format="mixed", utc=True)
    except (ValueError, TypeError) as exc:
        raise UsageError(
            f"--time {column!r} in {split}: cannot parse as a timestamp ({exc}); expected dates or numbers"
        ) from exc
    return parsed


def target_leakage(data: Dataset) -> list[Finding]:
    """DAT005: a feature that alone predicts the label on held-out train rows."""
    train = data.train
    label = data.roles.label
    if label is None or not train.features:
        return []
    scores = feature_scores(train.frame, train.features, label)
    found = []
    top = [{"feature": s.feature, "score": round(s.score, 4)} for s in scores[:5]]
    for score in scores:
        if score.score < TARGET_LEAKAGE_SCORE:
            break
        found.append(
            TARGET_LEAKAGE.finding(
                f"Feature {score.feature!r} alone predicts {label!r} on held-out rows "
                f"({score.metric} {score.value:.4f}, baseline {score.baseline:.4f})",
                evidence={
                    "feature": score.feature,
                    "score": round(score.score, 6),
                    "metric": score.metric,
                    "value": round(score.value, 6),
                    "baseline": round(score.baseline, 6),
                    "threshold": TARGET_LEAKAGE_SCORE,
                    "rows_scored": score.rows,
                    "top_features": top,
                },
            )
        )
    return found


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
