"""Questions of the data checks that scan the same relation, asked as one query.

Every query is at least one pass over a split (on Spark, one or more jobs: a task per
partition, a shuffle per group-by), and on small tables its fixed cost dominates. So the
`SqlTableEngine` asks what several checks need of one relation in one aggregation and
keeps the answer for the length of the check (the tables do not change meanwhile):

- `profile_query`: a split's row count, the missing values of every column and the
  moments of every numeric column, in one pass. Missing values are asked of every split
  (DAT008), the moments of two or more (DAT014, the regression label's summary), and on a
  columnar file a pass reads only the columns it names, so one pass over all of them costs
  about what the null counts alone did.
- `hash_groups_query`: duplicates (DAT007) and conflicting labels (DAT006) both group one
  split's row hashes; one query groups by (hash, label), then by hash, and sums what each
  check counts. Both group-bys spill (DuckDB) or shuffle (Spark), as the queries they
  replace did; nothing but the sums reaches the driver.
- `remembered`: an answer asked twice (the label's class counts by DAT009 and the summary,
  a category's distinct count for every evaluation split) is read from the first asking.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from trainmedic.data.engines._protocol import Moments

_MOMENTS = 6  # count, sum, sum of squares, min, max, whether any value is fractional


@dataclass(frozen=True, slots=True)
class Profile:
    """What one pass over a split counted."""

    rows: int
    nulls: dict[str, int]  # column -> missing values (NaN counts as missing)
    moments: dict[str, Moments]  # numeric column -> moments of its finite values


def profile_query(relation: str, values: Mapping[str, str], numeric: Sequence[str]) -> str:
    """One aggregation over `relation`: count(*), then each column's missing values (its
    comparable value, `values[column]`, is NULL), then the `Moments` sums of each `numeric`
    column. Each value is computed once, in a projection below the aggregation, so the
    aggregates name it instead of repeating its expression."""
    columns = list(values)
    aliases = {c: f"v{i}" for i, c in enumerate(columns)}
    finite = {c: f"f{i}" for i, c in enumerate(numeric)}
    projected = ", ".join(f"{values[c]} AS {aliases[c]}" for c in columns) or "1 AS v"
    kept = [*aliases.values()] + [
        f"(CASE WHEN {aliases[c]} IS NOT NULL AND {aliases[c]} - {aliases[c]} = 0 THEN {aliases[c]} END) "
        f"AS {finite[c]}"
        for c in numeric
    ]
    parts = ["count(*)"]
    parts += [f"sum(CASE WHEN {aliases[c]} IS NULL THEN 1 ELSE 0 END)" for c in columns]
    for column in numeric:
        f = finite[column]
        parts.append(
            f"count({f}), sum({f}), sum({f} * {f}), min({f}), max({f}), "
            f"max(CASE WHEN {f} <> floor({f}) THEN 1 ELSE 0 END)"
        )
    inner = f"SELECT {', '.join(kept or ['v'])} FROM (SELECT {projected} FROM {relation}) AS p"
    return f"SELECT {', '.join(parts)} FROM ({inner}) AS q"


def read_profile(row: Sequence[Any], columns: Sequence[str], numeric: Sequence[str]) -> Profile:
    """The `Profile` in the row `profile_query(relation, columns, numeric)` returned."""
    nulls = {c: int(v or 0) for c, v in zip(columns, row[1 : 1 + len(columns)], strict=True)}
    moments = {}
    start = 1 + len(columns)
    for i, column in enumerate(numeric):
        n, total, squares, low, high, fractional = row[start + _MOMENTS * i : start + _MOMENTS * (i + 1)]
        if not n:
            moments[column] = Moments(0, 0.0, 0.0, float("inf"), float("-inf"), False)
        else:
            moments[column] = Moments(
                int(n), float(total), float(squares), float(low), float(high), bool(fractional)
            )
    return Profile(int(row[0]), nulls, moments)


@dataclass(frozen=True, slots=True)
class HashGroups:
    """Counts over a hash relation (h = the features' hash, y = the label or NULL)."""

    extra: int  # rows equal on (h, y) to an earlier row
    involved: int  # rows whose (h, y) occurs more than once
    repeated: int  # distinct (h, y) occurring more than once
    conflicted: int  # distinct h with more than one non-missing y
    conflict_rows: int  # rows with a non-missing y whose h is conflicted
    shared: int  # rows whose h occurs more than once (whatever their y)


def hash_groups_query(table: str) -> str:
    """One query for `HashGroups`: group by (h, y), then by h (y is missing in at most one
    group of each h, as GROUP BY puts NULLs together), then sum."""
    pairs = f"SELECT h, y, count(*) AS n FROM {table} GROUP BY h, y"
    per_hash = (
        "SELECT sum(n) AS rows_h, sum(CASE WHEN y IS NOT NULL THEN n ELSE 0 END) AS labelled, "
        "min(y) AS low, max(y) AS high, "
        "sum(CASE WHEN n > 1 THEN n - 1 ELSE 0 END) AS extra, "
        "sum(CASE WHEN n > 1 THEN n ELSE 0 END) AS involved, "
        "sum(CASE WHEN n > 1 THEN 1 ELSE 0 END) AS repeated "
        f"FROM ({pairs}) AS p GROUP BY h"
    )
    conflicted = "low IS NOT NULL AND low <> high"
    return (
        "SELECT sum(extra), sum(involved), sum(repeated), "
        f"sum(CASE WHEN {conflicted} THEN 1 ELSE 0 END), "
        f"sum(CASE WHEN {conflicted} THEN labelled ELSE 0 END), "
        "sum(CASE WHEN rows_h > 1 THEN rows_h ELSE 0 END) "
        f"FROM ({per_hash}) AS g"
    )


def read_hash_groups(row: Sequence[Any]) -> HashGroups:
    return HashGroups(*(int(v or 0) for v in row))


class _Remembering(Protocol):
    _answers: dict[tuple[object, ...], object]
    _id: str | None


P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=_Remembering)


def remembered(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """The method's answer for these arguments (and the row ids in use) asked once per engine;
    a list or dict answer is copied, so a caller that changes it changes only its copy."""

    def asked(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        named = tuple(sorted(kwargs.items()))
        key = (method.__name__, self._id, *(tuple(a) if isinstance(a, list) else a for a in args), named)
        if key not in self._answers:
            self._answers[key] = method(self, *args, **kwargs)
        answer = self._answers[key]
        return type(answer)(answer) if isinstance(answer, (list, dict)) else answer  # type: ignore[return-value]

    functools.update_wrapper(asked, method)
    return asked
