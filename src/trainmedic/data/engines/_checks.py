"""The data checks answered by a `TableEngine`: the same findings as the pandas checks.

Counts that decide a finding (overlapping rows, duplicates, conflicts, missing values,
class counts, groups, times, scaling moments, unseen categories) are exact aggregates of
the engine. Each finding is decided and worded by its file in `trainmedic.rules.dat`, fed
the evidence the pandas check sends, so codes, slugs, evidence and messages cannot drift apart.

The checks that fit a model or a test statistic (near-duplicates, target leakage by
single-feature scores, drift, label noise) and the yardsticks of chance run the pandas
code on a seeded sample of each split (`SAMPLE_ROWS`, fewer where the memory budget is
small: `_budget.Shares.sample_rows`); the report's notes say so when a split is larger than
the sample.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from trainmedic.data import _identifiers as identifiers
from trainmedic.data import _leakage as leakage
from trainmedic.data import _parity as parity
from trainmedic.data import _quality as quality
from trainmedic.data._chance import chance_across, chance_within
from trainmedic.data._context import MAX_EXAMPLES, Dataset, Split
from trainmedic.data._predictability import is_class_codes
from trainmedic.data.engines._protocol import TableEngine
from trainmedic.data.summary import DataSummary, classes_distribution, regression_distribution
from trainmedic.errors import UsageError
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat001_split_overlap as dat001
from trainmedic.rules.dat import dat003_group_overlap as dat003
from trainmedic.rules.dat import dat004_temporal_overlap as dat004
from trainmedic.rules.dat import dat006_conflicting_labels as dat006
from trainmedic.rules.dat import dat007_duplicate_rows as dat007
from trainmedic.rules.dat import dat008_missing_values as dat008
from trainmedic.rules.dat import dat009_class_imbalance as dat009
from trainmedic.rules.dat import dat010_schema_mismatch as dat010
from trainmedic.rules.dat import dat014_preprocessing_before_split as dat014
from trainmedic.rules.dat import dat015_identifier_column as dat015

SAMPLE_ROWS = 200_000  # the most rows any sampled pandas check reads (feature scores)
SAMPLE_SEED = 0
_MAX_CLASSES = 100_000
_MAX_UNSEEN = 10_000


@dataclass(eq=False)
class EngineData:
    """The engine, each split's row count and column kinds, and `data`: the splits as seeded
    samples (what the sampled checks read; its notes collect every check's notes)."""

    engine: TableEngine
    data: Dataset
    rows: dict[str, int]
    kinds: dict[str, dict[str, str]]

    def split(self, name: str) -> Split:
        return next(s for s in self.data.splits if s.name == name)


def sampled_dataset(
    engine: TableEngine, data_of: Callable[[list[tuple[str, pd.DataFrame]]], Dataset]
) -> EngineData:
    """Row counts, kinds and samples of every split; `data_of(frames)` builds the Dataset
    (the runner's own validation and feature selection, so both engines choose alike)."""
    names = engine.splits()
    rows = {name: engine.row_count(name) for name in names}
    kinds = {name: engine.column_kinds(name) for name in names}
    size = min(SAMPLE_ROWS, engine.sample_rows)
    frames = [(name, engine.sample(name, size, SAMPLE_SEED)) for name in names]
    data = data_of(frames)
    sampled = [name for name in names if rows[name] > size]
    if sampled:
        data.notes.append(
            f"{engine.name} engine: near-duplicates, target leakage, drift and label noise ran on "
            f"seeded samples of {size:,} rows of {', '.join(sampled)}; every other check counts "
            "all rows"
        )
    return EngineData(engine, data, rows, kinds)


def with_sample_sizes(ctx: EngineData, findings: list[Finding]) -> list[Finding]:
    """Findings of a sampled check, each saying how many rows of its splits it read when a
    split was larger than its sample (`sampled_rows`: split -> rows read)."""
    out = []
    for finding in findings:
        named = finding.evidence.get("splits") or [finding.evidence.get("split", ctx.data.train.name)]
        splits = [s for s in named if isinstance(s, str) and s in ctx.rows]
        if (
            any(ctx.rows[s] > len(ctx.split(s).frame) for s in splits)
            and "sampled_rows" not in finding.evidence
        ):
            sizes = {s: len(ctx.split(s).frame) for s in splits}
            out.append(replace(finding, evidence={**finding.evidence, "sampled_rows": sizes}))
        else:
            out.append(finding)
    return out


def exact_identifiers(engine: TableEngine, frame: pd.DataFrame, features: list[str]) -> dict[str, float]:
    """Identifier columns judged on the train sample, their distinct fraction counted exactly."""
    found = {}
    train = engine.splits()[0]
    total = engine.row_count(train)
    for column, sampled in identifiers.identifier_columns(frame, features).items():
        if total == len(frame):
            found[column] = sampled
            continue
        known = total - engine.null_counts(train, [column])[column]
        distinct = engine.distinct_count(train, column) / max(known, 1)
        if distinct >= dat015.IDENTIFIER_UNIQUE_FRACTION:
            found[column] = round(float(distinct), 6)
    return found


def split_overlap(ctx: EngineData) -> list[Finding]:
    found = []
    for earlier, later in leakage.split_pairs(ctx.data):
        if not later.features or later.features != earlier.features:
            continue  # hashes over other columns never match (as in the pandas check)
        answer = ctx.engine.overlap(earlier.name, later.name, later.features, limit=MAX_EXAMPLES)
        if answer.rows == 0:
            continue
        sizes = (ctx.rows[earlier.name], ctx.rows[later.name])
        chance = chance_across(earlier.frame, later.frame, later.features, answer.rows, sizes=sizes)
        pair = (earlier.name, later.name)
        overlap = dat001.Overlap(
            pair,
            answer.rows,
            ctx.rows[later.name],
            answer.distinct,
            answer.examples,
            len(later.features),
            chance,
        )
        found.extend(leakage.judged_overlap(ctx.data, overlap))
    return found


def group_overlap(ctx: EngineData) -> list[Finding]:
    column = ctx.data.roles.group
    if column is None:
        return []
    found = []
    for earlier, later in leakage.split_pairs(ctx.data):
        if column not in ctx.kinds[earlier.name] or column not in ctx.kinds[later.name]:
            continue
        answer = ctx.engine.shared_values(earlier.name, later.name, column, limit=10)
        if answer.rows:
            evidence = leakage.group_evidence(
                (earlier.name, later.name), column, ctx.rows[later.name], answer
            )
            found.extend(dat003.judge(evidence))
    return found


def temporal_overlap(ctx: EngineData) -> list[Finding]:
    column = ctx.data.roles.time
    if column is None:
        return []
    found = []
    for earlier, later in leakage.split_pairs(ctx.data):
        if column not in ctx.kinds[earlier.name] or column not in ctx.kinds[later.name]:
            continue
        latest = _time_bounds(ctx, earlier.name, column)[1]
        if latest is None:
            continue
        answer = ctx.engine.rows_before(later.name, column, earlier.name, limit=MAX_EXAMPLES)
        if answer.rows == 0:
            continue
        earliest = _time_bounds(ctx, later.name, column)[0]
        overlap = dat004.TemporalOverlap(
            (earlier.name, later.name),
            column,
            ctx.rows[later.name],
            answer.rows,
            answer.examples,
            latest,
            earliest,
        )
        found.extend(dat004.judge(overlap))
    return found


def _time_bounds(ctx: EngineData, split: str, column: str) -> tuple[object, object]:
    try:
        return ctx.engine.time_bounds(split, column)
    except UsageError as exc:
        raise leakage.time_error(column, split, str(exc).rsplit("cannot read: ", 1)[-1]) from exc


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
    counts = _label_counts(ctx)
    if counts is None:
        return []
    return dat009.judge(quality.class_counts(counts))


def _label_counts(ctx: EngineData) -> pd.Series | None:
    """The training label's value counts when it is a class label (None for a regression)."""
    label = ctx.data.roles.label
    if label is None:
        return None
    pairs = ctx.engine.value_counts(ctx.data.train.name, label, limit=_MAX_CLASSES)
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
            if ctx.engine.distinct_count(train.name, column) > parity.CATEGORY_MAX_LEVELS:
                continue  # free text: unseen values are expected
            train_counts = ctx.engine.value_counts(train.name, column, limit=parity.CATEGORY_MAX_LEVELS)
            known = pd.Series([v for v, _ in train_counts])
            counts = ctx.engine.unseen_values(train.name, other.name, column, limit=_MAX_UNSEEN)
            parity.sort_unseen(column, counts, known, ctx.rows[other.name], into=(variants, unseen))
            if column in unseen:
                other_rows = ctx.rows[other.name] - ctx.engine.null_counts(other.name, [column])[column]
                train_rows = np.array([n for _, n in train_counts], dtype=np.int64)
                chance[column] = parity.unseen_chance(train_rows, unseen[column].rows, other_rows)
        found.extend(dat010.judge(dat010.Categories(other.name, variants, unseen, chance)))
    return found


def preprocessing_before_split(ctx: EngineData) -> list[Finding]:
    splits = [s.name for s in ctx.data.splits if s.name in leakage.EVALUATION_SPLITS]
    if len(splits) < 2:
        return []
    train_kinds = ctx.kinds[splits[0]]
    numeric = [c for c in ctx.data.train.features if train_kinds[c] == "number"]
    # a column numeric in train and text elsewhere is a schema mismatch (DAT010), not a scaling
    moments = {
        s: ctx.engine.moments(s, [c for c in numeric if ctx.kinds[s].get(c) == "number"]) for s in splits
    }
    return dat014.judge(dat014.SplitMoments(splits, numeric, moments))


def identifier_findings(ctx: EngineData) -> list[Finding]:
    found = []
    for column, distinct in ctx.data.identifiers.items():
        shared = {}
        for earlier, later in leakage.split_pairs(ctx.data):
            if column in ctx.kinds[earlier.name] and column in ctx.kinds[later.name]:
                count = ctx.engine.shared_values(earlier.name, later.name, column, limit=0).rows
                if count:
                    shared[f"{earlier.name}/{later.name}"] = count
        found.extend(dat015.judge(identifiers.identifier(column, distinct, shared)))
    return found


EXACT_CHECKS: Mapping[str, Callable[[EngineData], list[Finding]]] = {
    "split-overlap": split_overlap,
    "group-overlap": group_overlap,
    "temporal-overlap": temporal_overlap,
    "conflicting-labels": conflicting_labels,
    "duplicate-rows": duplicate_rows,
    "missing-values": missing_values,
    "class-imbalance": class_imbalance,
    "schema-mismatch": schema_mismatch,
    "preprocessing-before-split": preprocessing_before_split,
    "identifier-column": identifier_findings,
}


def engine_summary(ctx: EngineData) -> DataSummary:
    """The report's summary from the engine's counts (the tables are never loaded whole)."""
    train = ctx.data.train
    label = ctx.data.roles.label
    distribution: dict[str, object] = {}
    counts = _label_counts(ctx)
    if counts is not None:
        distribution = classes_distribution(counts)
    elif label is not None:
        m = ctx.engine.moments(train.name, [label])[label]
        if m.n:
            std = (max(m.squares - m.n * m.mean**2, 0.0) / (m.n - 1)) ** 0.5 if m.n > 1 else float("nan")
            distribution = regression_distribution(m.mean, std, m.low, m.high)
    memory = sum(int(s.frame.memory_usage(deep=True).sum()) for s in ctx.data.splits)
    return DataSummary(
        rows=dict(ctx.rows),
        columns=len(ctx.kinds[train.name]),
        features=len(train.features),
        dtypes=dict(Counter(ctx.kinds[train.name][c] for c in train.features).most_common()),
        label=label,
        label_distribution=distribution,
        memory_mb=round(memory / 2**20, 1),
        notes=list(ctx.data.notes),
    )
