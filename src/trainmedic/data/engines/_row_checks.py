"""The data checks an engine answers with exact counts of rows: conflicting labels, duplicate
rows, missing values, class counts and the schema (its column kinds and unseen categories).

Beside `_checks` (the overlaps, the scaling moments and the identifiers); each finding is
decided and worded by its file in `trainmedic.rules.dat`, fed the evidence the pandas check sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from trainmedic.data import _parity as parity
from trainmedic.data import _quality as quality
from trainmedic.data._chance import chance_within
from trainmedic.data._context import MAX_EXAMPLES
from trainmedic.data._predictability import is_class_codes
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat006_conflicting_labels as dat006
from trainmedic.rules.dat import dat007_duplicate_rows as dat007
from trainmedic.rules.dat import dat008_missing_values as dat008
from trainmedic.rules.dat import dat009_class_imbalance as dat009
from trainmedic.rules.dat import dat010_schema_mismatch as dat010

if TYPE_CHECKING:
    from trainmedic.data.engines._checks import EngineData

MAX_CLASSES = 100_000
MAX_UNSEEN = 10_000


def conflicting_labels(ctx: EngineData) -> list[Finding]:
    label = ctx.data.roles.label
    found = []
    for split in ctx.data.splits:
        if label is None or label not in ctx.kinds[split.name]:
            continue
        answer = ctx.engine.conflicts(split.name, split.features, label, limit=MAX_EXAMPLES)
        if answer.hashes == 0:
            continue
        total = ctx.rows[split.name]
        chance = chance_within(split.frame, split.features, answer.involved, size=total)
        conflicts = dat006.LabelConflicts(
            split.name, total, answer.hashes, answer.rows, answer.examples, chance
        )
        found.extend(quality.judged_conflicts(ctx.data, conflicts))
    return found


def duplicate_rows(ctx: EngineData) -> list[Finding]:
    label = ctx.data.roles.label
    found = []
    for split in ctx.data.splits:
        if split.name == "serving" or not split.features:
            continue
        labelled = label if label is not None and label in ctx.kinds[split.name] else None
        answer = ctx.engine.duplicates(split.name, split.features, labelled, limit=MAX_EXAMPLES)
        if answer.extra == 0:
            continue
        columns = split.features + ([labelled] if labelled is not None else [])
        total = ctx.rows[split.name]
        chance = chance_within(split.frame, columns, answer.involved, size=total)
        repeated = dat007.RepeatedRows(
            split.name, total, answer.extra, answer.distinct, answer.examples, chance
        )
        found.extend(quality.judged_duplicates(ctx.data, repeated))
    return found


def missing_values(ctx: EngineData) -> list[Finding]:
    label = ctx.data.roles.label
    found = []
    for split in ctx.data.splits:
        total = ctx.rows[split.name]
        if label is not None and label in ctx.kinds[split.name]:
            answer = ctx.engine.missing_rows(split.name, label, limit=MAX_EXAMPLES)
            if answer.rows:
                missing = dat008.MissingLabels(split.name, label, answer.rows, total, answer.examples)
                found.extend(dat008.judge(missing))
        if split.features:
            nulls = ctx.engine.null_counts(split.name, split.features)
            found.extend(
                dat008.judge(dat008.MissingFeatures(split.name, {c: n / total for c, n in nulls.items()}))
            )
    return found


def class_imbalance(ctx: EngineData) -> list[Finding]:
    counts = label_counts(ctx)
    if counts is None:
        return []
    return dat009.judge(quality.class_counts(counts))


def label_counts(ctx: EngineData) -> pd.Series | None:
    """The training label's value counts when it is a class label (None for a regression)."""
    label = ctx.data.roles.label
    if label is None:
        return None
    pairs = ctx.engine.value_counts(ctx.data.train.name, label, limit=MAX_CLASSES)
    if not pairs:
        return None
    values = pd.Series([v for v, _ in pairs])
    counts = pd.Series([n for _, n in pairs], index=pd.Index(values), dtype="int64")
    numeric = pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype)
    if numeric and not is_class_codes(counts[counts.index.notna()]):
        return None
    return counts


def schema_mismatch(ctx: EngineData) -> list[Finding]:
    train = ctx.data.train
    train_kinds = ctx.kinds[train.name]
    found = []
    for other in ctx.data.evaluation():
        other_kinds = ctx.kinds[other.name]
        special = ctx.data.roles.special()
        text = {}
        for column in parity.text_columns(train.features, train_kinds, other_kinds):
            rows, counts = ctx.engine.non_numbers(other.name, column, limit=5)
            if rows:
                text[column] = dat010.Values(rows, ctx.rows[other.name], [str(v) for v, _ in counts])
        columns = dat010.ColumnKinds(other.name, train.features, train_kinds, other_kinds, special, text)
        found.extend(dat010.judge(columns))
        variants: dict[str, dat010.Values] = {}
        unseen: dict[str, dat010.Values] = {}
        chance: dict[str, dat010.UnseenChance] = {}
        for column in parity.category_columns(train.features, train_kinds, other_kinds):
            # one more than the most levels: as many as there are, or enough to say there are more
            train_counts = ctx.engine.value_counts(train.name, column, limit=parity.CATEGORY_MAX_LEVELS + 1)
            if len(train_counts) > parity.CATEGORY_MAX_LEVELS:
                continue  # free text: unseen values are expected
            known = pd.Series([v for v, _ in train_counts])
            counts = ctx.engine.unseen_values(train.name, other.name, column, limit=MAX_UNSEEN)
            parity.sort_unseen(column, counts, known, ctx.rows[other.name], into=(variants, unseen))
            if column in unseen:
                other_rows = ctx.rows[other.name] - ctx.engine.null_counts(other.name, [column])[column]
                train_rows = np.array([n for _, n in train_counts], dtype=np.int64)
                chance[column] = parity.unseen_chance(train_rows, unseen[column].rows, other_rows)
        found.extend(dat010.judge(dat010.Categories(other.name, variants, unseen, chance)))
    return found
