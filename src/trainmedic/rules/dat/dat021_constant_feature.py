"""DAT021 `constant-feature`: a feature column holds one value in every training row.

Collector: this file's `check_tables(data)`, which `trainmedic check data` runs on the training
split (pandas; on a DuckDB or Spark engine, on its seeded sample). Over the feature columns (the
label, group, time, id and identifier columns are not features), it finds those whose every
training row holds the same value, none missing, and counts, in each later split (val, test,
serving), the rows where that column holds another value. It measures, and `judge` decides on
the `ConstantColumns` it builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

# Below this many training rows a column can be constant by chance: a binary feature whose rarer
# value has a 10 % share is constant over 30 rows in 4 % of tables (0.9 ** 30).
MIN_ROWS = 30
# A value never seen in n training rows has a rate below 3 / n at 95 % confidence (the rule of
# three). A later split where the column holds other values at SKEW_FACTOR times that rate, in at
# least MIN_OTHER_ROWS rows, differs from train beyond chance, even over many columns and splits.
SKEW_FACTOR = 10
MIN_OTHER_ROWS = 5
_SHOWN = 5  # columns named in a message


def _example() -> TablesExample:
    """A discount joined from another table on a key that never matched in train: the join's
    fill value, 0.0, in every training row; in val the real discounts."""
    train, val = rows(300, seed=0), rows(100, seed=1)
    train["discount"] = [0.0] * 300
    val["discount"] = [round(0.05 * (i % 5), 2) for i in range(100)]
    return tables(train=train, val=val)


SPEC = FindingSpec(
    code="DAT021",
    slug="constant-feature",
    severity=Severity.WARNING,
    title="A feature with one value in every training row",
    what=(
        "A feature column holds the same value in every row of the training split, none missing "
        "(a column with one value and missing cells is not constant: missingness can be learned). "
        "A warning when a later split (val, test, serving) holds other values in that column beyond "
        "chance (10 x the rate train could have missed, at least 5 rows): the model meets at "
        "inference values it never trained on. Else an info: the column is dead weight. The columns, "
        "their one value and the rows with other values per split are given."
    ),
    why=(
        "A constant column carries no information: no model can learn from it. It is usually a "
        "step that went wrong upstream: a join whose key never matched (every row got the fill "
        "value), a filter that kept one value and the column it filtered on, a placeholder or a "
        "default never replaced. When the serving data holds the real values, the model ignores "
        "a feature that matters there."
    ),
    example=(
        "train = orders.merge(discounts, on='sku', how='left').fillna({'discount': 0.0})  # the sku "
        "keys differ in type: 'discount' is 0.0 in every training row, varied in val"
    ),
    fix=(
        "Trace the column to the step that made it: check the join keys (types, spelling) and the "
        "filters; fill it with its real values, or drop it (--ignore COL) if it is constant by design."
    ),
    decided_in=("data check",),
    measured=(
        "per feature column of train: one value in every row, none missing (`check_tables` in its"
        " finding's file); rows holding another value in each later split"
    ),
    reported_when=(
        "any such column (info); other values in a later split at 10 × the rule-of-three rate of "  # noqa: RUF001 (a multiplication sign)
        "train (3 / rows) and in 5 rows or more (warning)"
    ),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class ConstantColumns:
    """The constant feature columns of the training split: `values` (column -> its one value),
    and per later split its rows (`other_rows`) and, per column, how many hold another value
    (`varies`: column -> split -> rows)."""

    split: str
    rows: int
    values: dict[str, Any]
    other_rows: dict[str, int]
    varies: dict[str, dict[str, int]]


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # a numpy scalar
    return item() if callable(item) else value


def check_tables(data: Any) -> list[Finding]:
    """Measure the training split of a `trainmedic.data` Dataset against its later splits."""
    train = data.train
    values: dict[str, Any] = {}
    for column in train.features:
        series = train.frame[column]
        if getattr(series, "ndim", 1) != 1 or len(series) == 0:
            continue  # a duplicated column name: a frame, not a column
        if series.notna().all() and series.nunique() == 1:
            values[column] = _plain(series.iloc[0])
    varies: dict[str, dict[str, int]] = {}
    other_rows: dict[str, int] = {}
    for split in data.evaluation():
        other_rows[split.name] = len(split.frame)
        for column, value in values.items():
            if column in split.frame.columns and getattr(split.frame[column], "ndim", 1) == 1:
                known = split.frame[column].dropna()
                varies.setdefault(column, {})[split.name] = int((known != value).sum())
    return judge(ConstantColumns(train.name, len(train.frame), values, other_rows, varies))


def skewed(evidence: ConstantColumns) -> dict[str, dict[str, int]]:
    """column -> the later splits where it holds other values beyond chance, with their rows."""
    bound = 3 / max(evidence.rows, 1)
    found: dict[str, dict[str, int]] = {}
    for column, splits in evidence.varies.items():
        for split, count in splits.items():
            total = evidence.other_rows.get(split, 0)
            if count >= MIN_OTHER_ROWS and total and count / total >= SKEW_FACTOR * bound:
                found.setdefault(column, {})[split] = count
    return found


def _named(evidence: ConstantColumns, columns: list[str]) -> str:
    shown = ", ".join(f"{c!r} = {evidence.values[c]!r}"[:60] for c in columns[:_SHOWN])
    return shown + (f" and {len(columns) - _SHOWN} more" if len(columns) > _SHOWN else "")


def message(evidence: ConstantColumns) -> str:
    columns = list(evidence.values)
    text = (
        f"{len(columns)} feature column{'s' if len(columns) > 1 else ''} of {evidence.split} "
        f"hold{'' if len(columns) > 1 else 's'} one value in all {evidence.rows:,} rows "
        f"({_named(evidence, columns)}): nothing to learn from"
    )
    skew = skewed(evidence)
    if skew:
        column, splits = next(iter(skew.items()))
        split, count = next(iter(splits.items()))
        others = f" ({len(skew) - 1} more such columns)" if len(skew) > 1 else ""
        text += (
            f"; {column!r} holds other values in {count:,} of {evidence.other_rows[split]:,} {split} "
            f"rows{others}: values the model never trained on"
        )
    return text


def judge(evidence: ConstantColumns) -> list[Finding]:
    """A warning when a constant column varies in a later split beyond chance, else an info."""
    if evidence.rows < MIN_ROWS or not evidence.values:
        return []
    skew = skewed(evidence)
    return [
        SPEC.finding(
            message(evidence),
            severity=Severity.WARNING if skew else Severity.INFO,
            evidence={
                "split": evidence.split,
                "rows": evidence.rows,
                "columns": list(evidence.values),
                "values": {c: repr(v)[:60] for c, v in evidence.values.items()},
                "varies_beyond_chance": skew,
                "other_rows": evidence.other_rows,
            },
        )
    ]
