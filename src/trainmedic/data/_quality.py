"""Quality of each split on its own: conflicting labels (DAT006), duplicates (DAT007),
missing values (DAT008), class imbalance (DAT009)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from trainmedic.data._chance import chance_within
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
        if not chance.beyond_chance:
            data.notes.append(
                f"{split.name}: {rows:,} rows share their features with rows of another label, where "
                f"chance makes ~{chance.expected_text} rows share features (a feature space of "
                f"~{chance.combinations:,.0f} combinations): the label is uncertain given these "
                "features, not conflicting"
            )
            continue
        found.append(
            CONFLICTING_LABELS.finding(
                f"{len(conflicted):,} distinct feature rows in {split.name} carry more than one "
                f"label ({rows:,} rows, {rows / len(split):.1%})",
                evidence={
                    "split": split.name,
                    "examples": len(conflicted),
                    "rows": rows,
                    "fraction": round(rows / len(split), 6),
                    "example_rows": split.example_rows(mask),
                    **chance.evidence(),
                },
            )
        )
    return found


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
        chance = chance_within(split.frame, columns, int(pd.Series(full).duplicated(keep=False).sum()))
        if not chance.beyond_chance:
            data.notes.append(
                f"{split.name}: {extra:,} rows repeat an earlier row, as chance predicts in a feature "
                f"space of ~{chance.combinations:,.0f} combinations: not reported as duplicates"
            )
            continue
        found.append(
            DUPLICATE_ROWS.finding(
                f"{extra:,} rows of {split.name} ({extra / len(split):.1%}) repeat an earlier row",
                evidence={
                    "split": split.name,
                    "duplicate_rows": extra,
                    "fraction": round(extra / len(split), 6),
                    "distinct_duplicated": int(pd.Series(full[mask]).nunique()),
                    "example_rows": split.example_rows(mask),
                    **chance.evidence(),
                },
            )
        )
    return found


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
                    MISSING_VALUES.finding(
                        f"{count:,} rows of {split.name} ({count / len(split):.1%}) have no label "
                        f"in {label!r}",
                        severity=Severity.ERROR,
                        evidence={
                            "split": split.name,
                            "column": label,
                            "rows": count,
                            "fraction": round(count / len(split), 6),
                            "example_rows": split.example_rows(missing),
                        },
                        fix="Drop or label these rows before training; never train on missing labels.",
                    )
                )
        if not split.features:
            continue
        fractions = pd.Series({c: split.frame[c].isna().mean() for c in split.features}, dtype="float64")
        over = fractions[fractions > MISSING_FRACTION].sort_values(ascending=False)
        if over.empty:
            continue
        found.append(
            MISSING_VALUES.finding(
                f"{len(over)} feature(s) of {split.name} are missing in more than "
                f"{MISSING_FRACTION:.0%} of rows (worst: {over.index[0]!r} {over.iloc[0]:.1%})",
                evidence={
                    "split": split.name,
                    "columns": {str(c): round(float(v), 6) for c, v in over.head(_MAX_LISTED).items()},
                    "threshold": MISSING_FRACTION,
                },
            )
        )
    return found


def class_imbalance(data: Dataset) -> list[Finding]:
    """DAT009: the minority/majority ratio of the training labels below the threshold."""
    label = data.roles.label
    if label is None:
        return []
    target = data.train.frame[label].dropna()
    if target.empty or not is_classification(target):
        return []
    counts = target.value_counts()
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
