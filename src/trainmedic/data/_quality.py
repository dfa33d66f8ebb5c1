"""Quality of each split on its own: conflicting labels (DAT006), duplicates (DAT007),
missing values (DAT008), class imbalance (DAT009)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from trainmedic.data._answers import Conflicts, Duplicates
from trainmedic.data._chance import Chance, chance_within
from trainmedic.data._context import Dataset, Split
from trainmedic.data._hashing import U64
from trainmedic.data._predictability import is_classification
from trainmedic.findings import Finding, Severity
from trainmedic.rules.data import (
    CLASS_IMBALANCE,
    CLASS_IMBALANCE_RATIO,
    CONFLICTING_LABELS,
    DUPLICATE_ROWS,
    MISSING_FRACTION,
    MISSING_VALUES,
)

_MAX_LISTED = 20


def conflicting_labels(data: Dataset) -> list[Finding]:
    """DAT006: feature hashes that carry more than one label value within a split."""
    found = []
    for split in data.labelled():
        labels = split.label_codes
        assert labels is not None
        known = split.frame[data.roles.label].notna().to_numpy()
        pairs = pd.DataFrame({"h": split.feature_hash[known], "y": labels[known]}).drop_duplicates()
        conflicted = pairs["h"][pairs["h"].duplicated()].unique()
        if len(conflicted) == 0:
            continue
        mask = pd.Series(split.feature_hash).isin(conflicted).to_numpy() & known
        rows = int(mask.sum())
        shared = int(pd.Series(split.feature_hash).duplicated(keep=False).sum())
        chance = chance_within(split.frame, split.features, shared)
        answer = Conflicts(len(conflicted), rows, shared, split.example_rows(mask))
        found.extend(conflicts_finding(data, split.name, len(split), answer, chance))
    return found


def conflicts_finding(
    data: Dataset, split: str, total: int, answer: Conflicts, chance: Chance
) -> list[Finding]:
    """DAT006 for the conflicted feature rows of a split of `total` rows; within what chance
    gives, a note instead (in `data.notes`)."""
    hashes, rows, examples = answer.hashes, answer.rows, answer.examples
    if not chance.beyond_chance:
        data.notes.append(
            f"{split}: {rows:,} rows share their features with rows of another label, where "
            f"chance makes ~{chance.expected_text} rows share features (a feature space of "
            f"~{chance.combinations:,.0f} combinations): the label is uncertain given these "
            "features, not conflicting"
        )
        return []
    return [
        CONFLICTING_LABELS.finding(
            f"{hashes:,} distinct feature rows in {split} carry more than one "
            f"label ({rows:,} rows, {rows / total:.1%})",
            evidence={
                "split": split,
                "examples": hashes,
                "rows": rows,
                "fraction": round(rows / total, 6),
                "example_rows": examples,
                **chance.evidence(),
            },
        )
    ]


def duplicate_rows(data: Dataset) -> list[Finding]:
    """DAT007: rows equal to an earlier row of the same split, features and label alike."""
    found = []
    for split in data.splits:
        if split.name == "serving" or not split.features:
            continue  # serving repeats requests by nature
        full = _with_label(split)
        mask = pd.Series(full).duplicated().to_numpy()
        extra = int(mask.sum())
        if extra == 0:
            continue
        label = data.roles.label
        columns = split.features + ([label] if label is not None and split.label_codes is not None else [])
        involved = int(pd.Series(full).duplicated(keep=False).sum())
        chance = chance_within(split.frame, columns, involved)
        answer = Duplicates(extra, involved, int(pd.Series(full[mask]).nunique()), split.example_rows(mask))
        found.extend(duplicates_finding(data, split.name, len(split), answer, chance))
    return found


def duplicates_finding(
    data: Dataset, split: str, total: int, answer: Duplicates, chance: Chance
) -> list[Finding]:
    """DAT007 for the repeating rows of a split of `total` rows; within what chance gives, a note."""
    extra, distinct, examples = answer.extra, answer.distinct, answer.examples
    if not chance.beyond_chance:
        data.notes.append(
            f"{split}: {extra:,} rows repeat an earlier row, as chance predicts in a feature "
            f"space of ~{chance.combinations:,.0f} combinations: not reported as duplicates"
        )
        return []
    return [
        DUPLICATE_ROWS.finding(
            f"{extra:,} rows of {split} ({extra / total:.1%}) repeat an earlier row",
            evidence={
                "split": split,
                "duplicate_rows": extra,
                "fraction": round(extra / total, 6),
                "distinct_duplicated": distinct,
                "example_rows": examples,
                **chance.evidence(),
            },
        )
    ]


def _with_label(split: Split) -> U64:
    if split.label_codes is None:
        return split.feature_hash
    with np.errstate(over="ignore"):
        return np.asarray(split.feature_hash * np.uint64(1_000_003) ^ split.label_codes, dtype=np.uint64)


def missing_values(data: Dataset) -> list[Finding]:
    """DAT008: a feature missing in more than MISSING_FRACTION of a split; any missing label."""
    found = []
    label = data.roles.label
    for split in data.splits:
        if label is not None and label in split.frame.columns:
            missing = split.frame[label].isna().to_numpy()
            count = int(missing.sum())
            if count:
                found.append(
                    missing_label_finding(split.name, label, count, len(split), split.example_rows(missing))
                )
        if split.features:
            fractions = {c: float(split.frame[c].isna().mean()) for c in split.features}
            found.extend(missing_features_finding(split.name, fractions))
    return found


def missing_label_finding(split: str, label: str, count: int, total: int, examples: list[object]) -> Finding:
    """DAT008 (error): rows without a label."""
    return MISSING_VALUES.finding(
        f"{count:,} rows of {split} ({count / total:.1%}) have no label in {label!r}",
        severity=Severity.ERROR,
        evidence={
            "split": split,
            "column": label,
            "rows": count,
            "fraction": round(count / total, 6),
            "example_rows": examples,
        },
        fix="Drop or label these rows before training; never train on missing labels.",
    )


def missing_features_finding(split: str, fractions: dict[str, float]) -> list[Finding]:
    """DAT008: the features missing in more than MISSING_FRACTION of the rows, worst first."""
    series = pd.Series(fractions, dtype="float64")
    over = series[series > MISSING_FRACTION].sort_values(ascending=False)
    if over.empty:
        return []
    return [
        MISSING_VALUES.finding(
            f"{len(over)} feature(s) of {split} are missing in more than "
            f"{MISSING_FRACTION:.0%} of rows (worst: {over.index[0]!r} {over.iloc[0]:.1%})",
            evidence={
                "split": split,
                "columns": {str(c): round(float(v), 6) for c, v in over.head(_MAX_LISTED).items()},
                "threshold": MISSING_FRACTION,
            },
        )
    ]


def class_imbalance(data: Dataset) -> list[Finding]:
    """DAT009: the minority/majority ratio of the training labels below the threshold."""
    label = data.roles.label
    if label is None:
        return []
    target = data.train.frame[label].dropna()
    if target.empty or not is_classification(target):
        return []
    return imbalance_finding(target.value_counts())


def imbalance_finding(counts: pd.Series) -> list[Finding]:
    """DAT009 from the training label's value counts, most frequent first."""
    if len(counts) < 2:
        return []
    ratio = float(counts.iloc[-1] / counts.iloc[0])
    if ratio >= CLASS_IMBALANCE_RATIO:
        return []
    return [
        CLASS_IMBALANCE.finding(
            f"Minority class {_plain(counts.index[-1])!r} has {int(counts.iloc[-1]):,} training rows, "
            f"{ratio:.1%} of the majority class {_plain(counts.index[0])!r} ({int(counts.iloc[0]):,})",
            evidence={
                "split": "train",
                "ratio": round(ratio, 6),
                "threshold": CLASS_IMBALANCE_RATIO,
                "class_counts": {str(k): int(v) for k, v in counts.head(_MAX_LISTED).items()},
                "classes": len(counts),
                "metrics": ["PR-AUC", "balanced accuracy", "F1 (per class / macro)"],
            },
        )
    ]


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
