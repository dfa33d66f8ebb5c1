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

from trainmedic.data._answers import Matches, SharedValues
from trainmedic.data._chance import Chance, chance_across
from trainmedic.data._context import Dataset, Split
from trainmedic.data._hashing import ROUND_DECIMALS, rounded_row_hashes, row_decimals
from trainmedic.data._predictability import feature_scores
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
    """DAT001: rows of a later split whose features are identical to a row of an earlier one,
    beyond what chance gives in the feature space (different people sharing every attribute)."""
    found = []
    for earlier, later in split_pairs(data):
        if not later.features:
            continue
        mask = in_other(later.feature_hash, earlier.feature_hash)
        count = int(mask.sum())
        if count == 0:
            continue
        chance = chance_across(earlier.frame, later.frame, later.features, count)
        distinct = int(pd.Series(later.feature_hash[mask]).nunique())
        answer = Matches(count, distinct, later.example_rows(mask))
        pair = (earlier.name, later.name)
        found.extend(overlap_finding(data, pair, len(later), answer, chance, features=len(later.features)))
    return found


def overlap_finding(
    data: Dataset, pair: tuple[str, str], total: int, answer: Matches, chance: Chance, *, features: int
) -> list[Finding]:
    """DAT001 for the rows of `pair[1]` (of `total`) equal to a row of `pair[0]`; within what
    chance gives, a note instead."""
    earlier, later = pair
    count = answer.rows
    if not chance.beyond_chance:
        data.notes.append(
            f"{count:,} {later} rows share every feature with a {earlier} row, as chance "
            f"predicts (~{chance.expected_text}) in a feature space of ~{chance.combinations:,.0f} "
            "combinations: different examples with equal attributes, not reported as overlap"
        )
        return []
    message = (
        f"{count:,} of {total:,} {later} rows ({count / total:.1%}) have "
        f"features identical to a {earlier} row"
    )
    if chance.expected >= 0.5:
        message += f" (chance alone gives about {chance.expected_text})"
    return [
        SPLIT_OVERLAP.finding(
            message,
            evidence={
                "splits": [earlier, later],
                "rows": count,
                "fraction": round(count / total, 6),
                "distinct_examples": answer.distinct,
                "example_rows": {later: answer.examples},
                "features_compared": features,
                **chance.evidence(),
            },
        )
    ]


def near_duplicate_overlap(data: Dataset) -> list[Finding]:
    """DAT002: equal after rounding/case/whitespace normalisation, but not exactly equal."""
    found = []
    for earlier, later in split_pairs(data):
        if not later.features:
            continue
        exact = in_other(later.feature_hash, earlier.feature_hash)
        near = in_other(later.near_hash, earlier.near_hash) & ~exact
        near |= rounded_overlap(earlier, later, ~(exact | near))
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
                    "normalisation": (
                        "floats to ~6 significant digits, or to the decimals a row is written "
                        f"with (up to {ROUND_DECIMALS}); text stripped, lower-cased"
                    ),
                },
            )
        )
    return found


def rounded_overlap(earlier: Split, later: Split, candidates: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Later rows written with d <= ROUND_DECIMALS decimals that equal an earlier row rounded
    to d decimals (text folded). Only the precisions later rows actually use are hashed."""
    found = np.zeros(len(later), dtype=bool)
    floats = [c for c in later.features if pd.api.types.is_float_dtype(later.frame[c].dtype)]
    if not floats or not candidates.any() or not set(later.features) <= set(earlier.frame.columns):
        return found
    decimals = row_decimals(later.frame, floats)
    for d in np.unique(decimals[candidates]):
        if d > ROUND_DECIMALS:
            continue
        rows = candidates & (decimals == d)
        mine = rounded_row_hashes(later.frame, later.features, int(d))
        theirs = rounded_row_hashes(earlier.frame, later.features, int(d))
        found |= rows & in_other(mine, theirs)
    return found


def group_overlap(data: Dataset) -> list[Finding]:
    """DAT003: a group value present in two evaluation splits."""
    column = data.roles.group
    if column is None:
        return []
    found = []
    for earlier, later in split_pairs(data):
        if column not in earlier.frame.columns or column not in later.frame.columns:
            continue  # the runner notes a split without the column
        groups = later.frame[column]
        mask = np.asarray(groups.isin(earlier.frame[column].dropna()).to_numpy(), dtype=bool)
        mask = mask & np.asarray(groups.notna().to_numpy(), dtype=bool)
        rows = int(mask.sum())
        if rows == 0:
            continue
        shared = pd.unique(groups[mask])
        answer = SharedValues(rows, len(shared), int(groups.nunique()), [_plain(v) for v in shared[:10]])
        found.append(group_finding((earlier.name, later.name), column, len(later), answer))
    return found


def group_finding(pair: tuple[str, str], column: str, total: int, answer: SharedValues) -> Finding:
    """DAT003: groups of `column` found in both splits of `pair`, `total` rows in the later one."""
    earlier, later = pair
    rows = answer.rows
    return GROUP_OVERLAP.finding(
        f"{answer.shared:,} {column!r} groups appear in both {earlier} and {later} "
        f"({rows:,} {later} rows, {rows / total:.1%})",
        evidence={
            "splits": [earlier, later],
            "column": column,
            "groups": answer.shared,
            "groups_fraction": round(answer.shared / max(answer.distinct, 1), 6),
            "rows": rows,
            "fraction": round(rows / total, 6),
            "example_groups": answer.examples[:10],
        },
    )


def temporal_overlap(data: Dataset) -> list[Finding]:
    """DAT004: rows of a later split timed before the latest time of an earlier split."""
    column = data.roles.time
    if column is None:
        return []
    times = {
        s.name: as_time(s.frame[column], column=column, split=s.name)
        for s in data.splits
        if s.name in EVALUATION_SPLITS and column in s.frame.columns
    }
    found = []
    for earlier, later in split_pairs(data):
        if earlier.name not in times or later.name not in times:
            continue  # the runner notes a split without the column
        latest = times[earlier.name].max()
        if pd.isna(latest):
            continue
        later_times = times[later.name]
        mask = np.asarray((later_times < latest).to_numpy(), dtype=bool)
        rows = int(mask.sum())
        if rows == 0:
            continue
        answer = Matches(rows, rows, later.example_rows(mask))
        found.append(
            temporal_finding(
                (earlier.name, later.name), column, len(later), answer, (latest, later_times.min())
            )
        )
    return found


def temporal_finding(
    pair: tuple[str, str], column: str, total: int, answer: Matches, bounds: tuple[object, object]
) -> Finding:
    """DAT004: rows of the later split timed before `bounds[0]`, the earlier split's latest
    time; `bounds[1]` is the later split's earliest."""
    earlier, later = pair
    latest, earliest = bounds
    rows = answer.rows
    return TEMPORAL_OVERLAP.finding(
        f"{rows:,} {later} rows ({rows / total:.1%}) are timed before the latest {earlier} time {latest}",
        evidence={
            "splits": [earlier, later],
            "column": column,
            "rows": rows,
            "fraction": round(rows / total, 6),
            f"{earlier}_latest": str(latest),
            f"{later}_earliest": str(earliest),
            "example_rows": {later: answer.examples},
        },
    )


def time_error(column: str, split: str, reason: str) -> UsageError:
    """The one line for a --time column that holds something other than times."""
    return UsageError(
        f"--time {column!r} in {split}: cannot parse as a timestamp ({reason}); expected dates or numbers"
    )


def as_time(series: pd.Series, *, column: str, split: str) -> pd.Series:
    """Numbers and datetimes compare as they are; text is parsed, or a usage error."""
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_datetime64_any_dtype(series.dtype):
        return series
    try:
        parsed = pd.to_datetime(series, errors="raise", format="mixed", utc=True)
    except (ValueError, TypeError) as exc:
        raise time_error(column, split, str(exc)) from exc
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
