"""Leakage between splits (DAT001-DAT004) and from features into the label (DAT005).

Overlap checks compare 64-bit row hashes with pandas' hash-table `isin`, so each
pair of splits costs O(rows). Serving data is not an evaluation split: it is
compared for schema and drift (parity), never for overlap.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._answers import SharedValues
from trainmedic.data._chance import chance_across, chance_near
from trainmedic.data._context import Dataset, Split
from trainmedic.data._hashing import ROUND_DECIMALS, rounded_row_hashes, row_decimals
from trainmedic.data._predictability import predictability
from trainmedic.errors import UsageError
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat001_split_overlap as dat001
from trainmedic.rules.dat import dat002_near_duplicate_overlap as dat002
from trainmedic.rules.dat import dat003_group_overlap as dat003
from trainmedic.rules.dat import dat004_temporal_overlap as dat004
from trainmedic.rules.dat import dat005_target_leakage as dat005

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
        examples = later.example_rows(mask)
        pair = (earlier.name, later.name)
        overlap = dat001.Overlap(pair, count, len(later), distinct, examples, len(later.features), chance)
        found.extend(judged_overlap(data, overlap))
    return found


def judged_overlap(data: Dataset, overlap: dat001.Overlap) -> list[Finding]:
    """DAT001 for overlapping rows; within what chance gives, a note (in `data.notes`) instead."""
    note = dat001.note(overlap)
    if note is not None:
        data.notes.append(note)
    return dat001.judge(overlap)


def near_duplicate_overlap(data: Dataset) -> list[Finding]:
    """DAT002: equal after rounding/case/whitespace normalisation, but not exactly equal, beyond
    what chance gives in the rounded feature space; within chance, a note (in `data.notes`)."""
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
        pair = (earlier.name, later.name)
        chance = chance_near(earlier.frame, later.frame, later.features, count)
        near_rows = dat002.NearDuplicates(
            pair, count, len(later), later.example_rows(near), ROUND_DECIMALS, chance
        )
        note = dat002.note(near_rows)
        if note is not None:
            data.notes.append(note)
        found.extend(dat002.judge(near_rows))
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
        found.extend(dat003.judge(group_evidence((earlier.name, later.name), column, len(later), answer)))
    return found


def group_evidence(
    pair: tuple[str, str], column: str, total: int, answer: SharedValues
) -> dat003.GroupOverlap:
    """DAT003's evidence: groups of `column` found in both splits of `pair`, `total` rows in the later one."""
    return dat003.GroupOverlap(
        pair, column, total, answer.rows, answer.shared, answer.distinct, answer.examples
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
        pair = (earlier.name, later.name)
        overlap = dat004.TemporalOverlap(
            pair, column, len(later), rows, later.example_rows(mask), latest, later_times.min()
        )
        found.extend(dat004.judge(overlap))
    return found


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
    """DAT005: a feature that alone gives the label away on held-out train rows, or a few numeric
    features that reconstruct a numeric label."""
    train = data.train
    label = data.roles.label
    if label is None or not train.features:
        return []
    return dat005.judge(predictability(train.frame, train.features, label))


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
