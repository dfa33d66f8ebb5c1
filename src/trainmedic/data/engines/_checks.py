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

import pandas as pd

from trainmedic.data import _identifiers as identifiers
from trainmedic.data import _leakage as leakage
from trainmedic.data._chance import chance_across
from trainmedic.data._context import MAX_EXAMPLES, Dataset, Split
from trainmedic.data.engines import _row_checks as row_checks
from trainmedic.data.engines._protocol import TableEngine
from trainmedic.data.engines._row_checks import label_counts
from trainmedic.data.summary import DataSummary, classes_distribution, regression_distribution
from trainmedic.errors import UsageError
from trainmedic.findings import Finding
from trainmedic.registry import specs_for
from trainmedic.rules.dat import dat001_split_overlap as dat001
from trainmedic.rules.dat import dat003_group_overlap as dat003
from trainmedic.rules.dat import dat004_temporal_overlap as dat004
from trainmedic.rules.dat import dat014_preprocessing_before_split as dat014
from trainmedic.rules.dat import dat015_identifier_column as dat015

SAMPLE_ROWS = 200_000  # the most rows any sampled pandas check reads (feature scores)
SAMPLE_SEED = 0


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
        answer = ctx.engine.overlap(
            earlier.name, later.name, later.features, limit=MAX_EXAMPLES, label=ctx.data.roles.label
        )
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


def identifier_column(ctx: EngineData) -> list[Finding]:
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


def engine_summary(ctx: EngineData) -> DataSummary:
    """The report's summary from the engine's counts (the tables are never loaded whole)."""
    train = ctx.data.train
    label = ctx.data.roles.label
    distribution: dict[str, object] = {}
    counts = label_counts(ctx)
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


def _exact(slug: str) -> Callable[[EngineData], list[Finding]]:
    """The engine's answer to a data check: the function named after its slug, here or in
    `_row_checks`."""
    name = slug.replace("-", "_")
    found = globals().get(name) or getattr(row_checks, name, None)
    if not callable(found):
        raise LookupError(f"data check {slug!r} is declared for the engines, but no {name}(ctx) answers it")
    return found  # type: ignore[no-any-return]


#: The data checks the engines answer exactly: the findings declared `decided_in=("data engine", ...)`,
#: by slug, in catalogue order; every other data check runs its pandas code on the seeded samples.
EXACT_CHECKS: Mapping[str, Callable[[EngineData], list[Finding]]] = {
    spec.slug: _exact(spec.slug) for spec in specs_for("data engine")
}
