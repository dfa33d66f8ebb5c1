"""Quality of each split on its own: conflicting labels (DAT006), duplicates (DAT007),
missing values (DAT008), class imbalance (DAT009)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from trainmedic.data._chance import chance_within
from trainmedic.data._context import Dataset, Split
from trainmedic.data._hashing import U64
from trainmedic.data._predictability import is_classification, is_count_or_score
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat006_conflicting_labels as dat006
from trainmedic.rules.dat import dat007_duplicate_rows as dat007
from trainmedic.rules.dat import dat008_missing_values as dat008
from trainmedic.rules.dat import dat009_class_imbalance as dat009


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
        conflicts = dat006.LabelConflicts(
            split.name, len(split), len(conflicted), rows, split.example_rows(mask), chance
        )
        found.extend(judged_conflicts(data, conflicts))
    return found


def judged_conflicts(data: Dataset, conflicts: dat006.LabelConflicts) -> list[Finding]:
    """DAT006 for the conflicted feature rows of a split; within what chance gives, a note
    (in `data.notes`) instead."""
    note = dat006.note(conflicts)
    if note is not None:
        data.notes.append(note)
    return dat006.judge(conflicts)


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
        distinct = int(pd.Series(full[mask]).nunique())
        repeated = dat007.RepeatedRows(
            split.name, len(split), extra, distinct, split.example_rows(mask), chance
        )
        found.extend(judged_duplicates(data, repeated))
    return found


def judged_duplicates(data: Dataset, repeated: dat007.RepeatedRows) -> list[Finding]:
    """DAT007 for the repeating rows of a split; within what chance gives, a note."""
    note = dat007.note(repeated)
    if note is not None:
        data.notes.append(note)
    return dat007.judge(repeated)


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
                examples = split.example_rows(missing)
                found.extend(
                    dat008.judge(dat008.MissingLabels(split.name, label, count, len(split), examples))
                )
        if split.features:
            fractions = {c: float(split.frame[c].isna().mean()) for c in split.features}
            found.extend(dat008.judge(dat008.MissingFeatures(split.name, fractions)))
    return found


def class_imbalance(data: Dataset) -> list[Finding]:
    """DAT009: the minority/majority ratio of the training labels below the threshold."""
    label = data.roles.label
    if label is None:
        return []
    target = data.train.frame[label].dropna()
    if target.empty:
        return []
    if not is_classification(target):
        counts = target.value_counts()
        if is_count_or_score(counts):
            data.notes.append(
                f"label {label!r} read as a count or a score, not classes: its {len(counts)} integral "
                "values' counts follow their order; checked as a regression target"
            )
        return []
    return dat009.judge(class_counts(target.value_counts()))


def class_counts(counts: pd.Series) -> dat009.ClassCounts:
    """DAT009's evidence from the training label's value counts, most frequent first."""
    return dat009.ClassCounts([(_plain(k), int(n)) for k, n in counts.items()])


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
