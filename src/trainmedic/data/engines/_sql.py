"""The `TableEngine` questions written once as SQL; a `Dialect` holds what engines spell apart.

A backend (DuckDB, Spark) registers each split as a relation `tm_<split>` holding every
column plus `__tm_row`, a row number in read order, and executes SQL through a small
`SqlRunner`. Everything else, the queries themselves, lives here, so DuckDB and Spark
answer with the same definitions (what a row hash covers, what counts as missing, which
examples are shown).

Values are compared through `Dialect.comparable`: numbers (and booleans) as doubles with
NaN taken for missing and -0.0 for 0.0, categories as text, so that 3 in one split and 3.0
in another are equal, as in the pandas hashes (`trainmedic.data._hashing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from trainmedic.data.engines._batches import (
    HashGroups,
    Profile,
    hash_groups_query,
    profile_query,
    read_hash_groups,
    read_profile,
    remembered,
)
from trainmedic.data.engines._budget import MAX_SAMPLE_ROWS
from trainmedic.data.engines._protocol import Conflicts, Duplicates, Matches, Moments, SharedValues

ROW = "__tm_row"
_OVERSAMPLE = 1.25  # rows passed to a sample's top-n per row sampled (see `sample`)
_ID = "__tm_id"
SPLIT_ORDER = ("train", "val", "test", "serving")
_NUMBER_TYPES = (
    *("TINYINT", "SMALLINT", "INT", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"),
    *("FLOAT", "DOUBLE", "REAL", "DECIMAL", "BYTE", "SHORT", "LONG"),
)


@dataclass(frozen=True, slots=True)
class Dialect:
    """What DuckDB SQL and Spark SQL spell differently."""

    name: str
    quote_char: str  # '"' (DuckDB) or '`' (Spark)
    string_type: str  # VARCHAR / STRING
    hash_function: str  # hash (DuckDB) / xxhash64 (Spark)
    hash_skips_nulls: bool  # Spark's xxhash64 ignores NULL arguments: hash a null flag beside each value
    timestamp_parse: str  # '{}' is the text expression: CAST({} AS TIMESTAMPTZ) / to_timestamp({})
    random_order: str  # '{seed}': orders rows randomly, reproducibly: hash(__tm_row + {seed})
    hash_low: int  # the least value of hash_function: 0 (DuckDB's UBIGINT) / -2**63 (Spark's LONG)

    def quote(self, name: str) -> str:
        q = self.quote_char
        return f"{q}{name.replace(q, q + q)}{q}"

    def relation(self, split: str) -> str:
        return self.quote(f"tm_{split}")

    def comparable(self, column: str, kind: str) -> str:
        """The value as compared and hashed across splits (see the module docstring)."""
        q = self.quote(column)
        if kind in ("number", "bool"):
            number = f"CAST({q} AS DOUBLE)"
            return f"(CASE WHEN isnan({number}) THEN NULL ELSE {number} + 0.0 END)"
        if kind in ("text", "category"):
            return f"CAST({q} AS {self.string_type})"
        return q

    def row_hash(self, expressions: Sequence[str]) -> str:
        """One 64-bit hash of the expressions, in order; missing is a value of its own."""
        if not expressions:
            return "CAST(0 AS BIGINT)"
        if self.hash_skips_nulls:
            expressions = [part for e in expressions for part in (e, f"({e}) IS NULL")]
        return f"{self.hash_function}({', '.join(expressions)})"

    def time_value(self, column: str, kind: str) -> str:
        """Numbers and timestamps as they are; text parsed as a timestamp."""
        q = self.quote(column)
        if kind in ("text", "category"):
            return self.timestamp_parse.format(q)
        return q

    def kind(self, sql_type: str) -> str:
        """The pandas dtype family (`_parity.kind`) of an SQL column type."""
        upper = sql_type.upper()
        if upper.startswith(("BOOL",)):
            return "bool"
        if upper.startswith(_NUMBER_TYPES):
            return "number"
        if upper.startswith(("TIMESTAMP", "DATETIME")):
            return "datetime"
        if upper.startswith("ENUM"):
            return "category"
        return "text"


DUCKDB = Dialect(
    name="duckdb",
    quote_char='"',
    string_type="VARCHAR",
    hash_function="hash",
    hash_skips_nulls=False,
    timestamp_parse="CAST({} AS TIMESTAMPTZ)",
    random_order=f"hash({ROW} + {{seed}})",
    hash_low=0,
)
SPARK = Dialect(
    name="spark",
    quote_char="`",
    string_type="STRING",
    hash_function="xxhash64",
    hash_skips_nulls=True,
    timestamp_parse="to_timestamp({})",
    random_order=f"xxhash64({ROW}, {{seed}})",
    hash_low=-(2**63),
)


class SqlRunner(Protocol):
    """How a backend executes the SQL written here."""

    def rows(self, sql: str) -> list[tuple[Any, ...]]: ...

    def frame(self, sql: str) -> pd.DataFrame: ...

    def materialize(self, name: str, sql: str) -> None:
        """Keep the result of `sql` as relation `name` (a temp table, a cached view)."""
        ...

    def column_types(self, relation: str) -> list[tuple[str, str]]:
        """(column, SQL type) of a relation, in order."""
        ...

    def close(self) -> None: ...


class SqlTableEngine:
    """`TableEngine` answered by SQL over the relations a backend registered."""

    def __init__(self, name: str, dialect: Dialect, runner: SqlRunner, splits: Sequence[str]) -> None:
        self.name = name
        self.dialect = dialect
        self.runner = runner
        self._splits = [s for s in SPLIT_ORDER if s in splits]
        self._id: str | None = None
        self._kinds: dict[str, dict[str, str]] = {}
        self._hashed: dict[tuple[str, tuple[str, ...], str | None], str] = {}
        self._answers: dict[tuple[object, ...], object] = {}
        self.sample_rows = MAX_SAMPLE_ROWS

    def splits(self) -> list[str]:
        return list(self._splits)

    def identify_rows_by(self, column: str | None) -> None:
        self._id = column

    def row_count(self, split: str) -> int:
        return self._profile(split).rows

    def column_kinds(self, split: str) -> dict[str, str]:
        if split not in self._kinds:
            types = self.runner.column_types(self.dialect.relation(split))
            self._kinds[split] = {c: self.dialect.kind(t) for c, t in types if c != ROW}
        return self._kinds[split]

    def null_counts(self, split: str, columns: Sequence[str]) -> dict[str, int]:
        nulls = self._profile(split).nulls
        return {c: nulls[c] for c in columns}

    @remembered
    def missing_rows(self, split: str, column: str, *, limit: int) -> Matches:
        rows = self._profile(split).nulls[column]
        if rows == 0:
            return Matches(0, 0)
        source = f"FROM {self.dialect.relation(split)} WHERE {self._value(split, column)} IS NULL"
        return Matches(rows, rows, self._ids(f"SELECT {self._id_expr(split)}, {ROW} {source}", limit))

    def moments(self, split: str, columns: Sequence[str]) -> dict[str, Moments]:
        known = self._profile(split).moments
        other = [c for c in columns if c not in known]  # not numeric in this split: asked as they are
        if other:
            known = {**known, **self._profile(split, tuple(other)).moments}
        return {c: known[c] for c in columns}

    @remembered
    def distinct_count(self, split: str, column: str) -> int:
        value = self._value(split, column)  # a spillable GROUP BY, not count(DISTINCT)
        relation = self.dialect.relation(split)
        values = f"SELECT {value} AS v FROM {relation} WHERE {value} IS NOT NULL GROUP BY {value}"
        return int(self._one(f"SELECT count(*) FROM ({values}) AS d"))

    @remembered
    def duplicates(self, split: str, features: Sequence[str], label: str | None, *, limit: int) -> Duplicates:
        table = self._hashes(split, features, label)
        groups = self._hash_groups(table)
        if not groups.repeated:
            return Duplicates(0, 0, 0)
        repeated = (
            f"SELECT h, y, count(*) AS n, min({ROW}) AS first FROM {table} GROUP BY h, y HAVING count(*) > 1"
        )
        examples = self._ids(
            f"SELECT t.{_ID}, t.{ROW} FROM {table} AS t JOIN ({repeated}) AS r "
            f"ON t.h = r.h AND (t.y = r.y OR (t.y IS NULL AND r.y IS NULL)) WHERE t.{ROW} > r.first",
            limit,
        )
        return Duplicates(groups.extra, groups.involved, groups.repeated, examples)

    @remembered
    def conflicts(self, split: str, features: Sequence[str], label: str, *, limit: int) -> Conflicts:
        table = self._hashes(split, features, label)
        groups = self._hash_groups(table)
        if groups.conflicted == 0:
            return Conflicts(0, 0, 0)
        conflicted = f"SELECT h FROM {table} WHERE y IS NOT NULL GROUP BY h HAVING min(y) <> max(y)"
        rows_sql = f"FROM {table} AS t WHERE t.y IS NOT NULL AND t.h IN ({conflicted})"
        examples = self._ids(f"SELECT t.{_ID}, t.{ROW} {rows_sql}", limit)
        return Conflicts(groups.conflicted, groups.conflict_rows, groups.shared, examples)

    @remembered
    def overlap(
        self, earlier: str, later: str, features: Sequence[str], *, limit: int, label: str | None = None
    ) -> Matches:
        if not set(features) <= set(self.column_kinds(earlier)):
            return Matches(0, 0)  # a column the earlier split lacks: no row can be equal
        mine, theirs = self._hashes(later, features, label), self._hashes(earlier, features, label)
        # one spillable aggregation over both sides, not a hash join on the larger split
        both = f"SELECT h, 0 AS side FROM {theirs} UNION ALL SELECT h, 1 AS side FROM {mine}"
        shared = (
            f"SELECT h, sum(side) AS n FROM ({both}) AS b GROUP BY h HAVING min(side) = 0 AND max(side) = 1"
        )
        rows, distinct = self.runner.rows(f"SELECT sum(n), count(*) FROM ({shared}) AS s")[0]
        if not rows:
            return Matches(0, 0)
        matched = f"FROM {mine} AS t WHERE t.h IN (SELECT h FROM ({shared}) AS s)"
        return Matches(int(rows), int(distinct), self._ids(f"SELECT t.{_ID}, t.{ROW} {matched}", limit))

    @remembered
    def shared_values(self, earlier: str, later: str, column: str, *, limit: int) -> SharedValues:
        mine, theirs = self._value(later, column), self._value(earlier, column)
        known = f"SELECT DISTINCT {theirs} FROM {self.dialect.relation(earlier)} WHERE {theirs} IS NOT NULL"
        source = f"FROM {self.dialect.relation(later)} WHERE {mine} IN ({known})"
        counted = f"SELECT count(*) AS n {source} GROUP BY {mine}"
        rows, shared = self.runner.rows(f"SELECT sum(n), count(*) FROM ({counted}) AS c")[0]
        rows = rows or 0
        distinct = self.distinct_count(later, column)
        if not rows or limit <= 0:
            return SharedValues(int(rows), int(shared), distinct)
        raw = self.dialect.quote(column)
        first = self.runner.rows(
            f"SELECT min({raw}) AS v, min({ROW}) AS f {source} GROUP BY {mine} ORDER BY f LIMIT {int(limit)}"
        )
        return SharedValues(int(rows), int(shared), distinct, [_plain(v) for v, _ in first])

    @remembered
    def value_counts(self, split: str, column: str, *, limit: int) -> list[tuple[object, int]]:
        value, raw = self._value(split, column), self.dialect.quote(column)
        rows = self.runner.rows(
            f"SELECT min({raw}), count(*) AS n, min({ROW}) AS f FROM {self.dialect.relation(split)} "
            f"WHERE {value} IS NOT NULL GROUP BY {value} ORDER BY n DESC, f LIMIT {int(limit)}"
        )
        return [(_plain(v), int(n)) for v, n, _ in rows]

    @remembered
    def unseen_values(self, earlier: str, later: str, column: str, *, limit: int) -> list[tuple[object, int]]:
        mine, theirs = self._value(later, column), self._value(earlier, column)
        known = f"SELECT DISTINCT {theirs} FROM {self.dialect.relation(earlier)} WHERE {theirs} IS NOT NULL"
        rows = self.runner.rows(
            f"SELECT min({self.dialect.quote(column)}), count(*), min({ROW}) AS f "
            f"FROM {self.dialect.relation(later)} WHERE {mine} IS NOT NULL AND {mine} NOT IN ({known}) "
            f"GROUP BY {mine} ORDER BY f LIMIT {int(limit)}"
        )
        return [(_plain(v), int(n)) for v, n, _ in rows]

    @remembered
    def non_numbers(self, split: str, column: str, *, limit: int) -> tuple[int, list[tuple[object, int]]]:
        raw = self.dialect.quote(column)
        number = f"TRY_CAST({raw} AS DOUBLE)"
        source = (
            f"FROM {self.dialect.relation(split)} "
            f"WHERE {raw} IS NOT NULL AND ({number} IS NULL OR isnan({number}))"
        )
        rows = int(self._one(f"SELECT count(*) {source}"))
        if rows == 0 or limit <= 0:
            return rows, []
        values = self.runner.rows(
            f"SELECT {raw}, count(*), min({ROW}) AS f {source} GROUP BY {raw} ORDER BY f LIMIT {int(limit)}"
        )
        return rows, [(_plain(v), int(n)) for v, n, _ in values]

    @remembered
    def time_bounds(self, split: str, column: str) -> tuple[object, object]:
        time = self.dialect.time_value(column, self.column_kinds(split)[column])
        sql = f"SELECT min({time}), max({time}) FROM {self.dialect.relation(split)}"
        low, high = self.runner.rows(sql)[0]
        return _plain(low), _plain(high)

    @remembered
    def rows_before(self, split: str, column: str, earlier: str, *, limit: int) -> Matches:
        mine = self.dialect.time_value(column, self.column_kinds(split)[column])
        theirs = self.dialect.time_value(column, self.column_kinds(earlier)[column])
        source = (
            f"FROM {self.dialect.relation(split)} WHERE {mine} < "
            f"(SELECT max({theirs}) FROM {self.dialect.relation(earlier)})"
        )
        rows = int(self._one(f"SELECT count(*) {source}"))
        if rows == 0:
            return Matches(0, 0)
        return Matches(rows, rows, self._ids(f"SELECT {self._id_expr(split)}, {ROW} {source}", limit))

    def sample(self, split: str, n: int, seed: int) -> pd.DataFrame:
        """The `n` rows of the smallest random-order hashes, in read order. A filter on the
        hash passes about `_OVERSAMPLE` x `n` rows to the top-n, so the scan streams and
        only those rows are held; in the rare case fewer pass, the top-n runs on every row.
        The rows arrive in any order and are put in read order here: at most `n` of them,
        which a sort on the driver orders without the engine's sort (a shuffle on Spark)."""
        relation = self.dialect.relation(split)
        total = self.row_count(split)
        if total <= n:
            return _indexed(self.runner.frame(f"SELECT * FROM {relation}"))
        order = self.dialect.random_order.format(seed=int(seed))
        share = min(_OVERSAMPLE * n / total + 64 / total, 1.0)
        below = self.dialect.hash_low + int(share * 2**64)
        frame = pd.DataFrame()
        for where in (f" WHERE {order} < {below}" if share < 1.0 else "", ""):
            chosen = f"SELECT * FROM {relation}{where} ORDER BY {order} LIMIT {int(n)}"
            frame = _indexed(self.runner.frame(chosen))
            if len(frame) == n:
                break
        return frame

    def close(self) -> None:
        self.runner.close()

    # -- helpers -------------------------------------------------------------------------

    @remembered
    def _profile(self, split: str, only: tuple[str, ...] = ()) -> Profile:
        """Rows, missing values and numeric moments of every column of a split, in one pass
        (`only`: moments of these columns, whatever their kind)."""
        values = {c: self._value(split, c) for c in only or self.column_kinds(split)}
        numeric = list(only) or [c for c, kind in self.column_kinds(split).items() if kind == "number"]
        row = self.runner.rows(profile_query(self.dialect.relation(split), values, numeric))[0]
        return read_profile(row, list(values), numeric)

    @remembered
    def _hash_groups(self, table: str) -> HashGroups:
        """Duplicates' and conflicts' counts over one hash relation (one query for both)."""
        return read_hash_groups(self.runner.rows(hash_groups_query(table))[0])

    def _value(self, split: str, column: str) -> str:
        return self.dialect.comparable(column, self.column_kinds(split)[column])

    def _id_expr(self, split: str) -> str:
        if self._id is not None and self._id in self.column_kinds(split):
            return self.dialect.quote(self._id)
        return ROW

    def _hashes(self, split: str, features: Sequence[str], label: str | None) -> str:
        """A relation (row, id, h = hash of the features, y = the label's value) made once."""
        key = (split, tuple(features), label)
        if label is None:  # the feature hash of a table made with a label serves as well
            key = next((k for k in self._hashed if k[:2] == key[:2]), key)
        if key not in self._hashed:
            name = f"tm_hash_{split}_{len(self._hashed)}"
            has_label = label is not None and label in self.column_kinds(split)
            label_value = self._value(split, label) if has_label and label is not None else "NULL"
            h = self.dialect.row_hash([self._value(split, c) for c in features])
            self.runner.materialize(
                name,
                f"SELECT {ROW}, {self._id_expr(split)} AS {_ID}, {h} AS h, {label_value} AS y "
                f"FROM {self.dialect.relation(split)}",
            )
            self._hashed[key] = self.dialect.quote(name)
        return self._hashed[key]

    def _ids(self, sql: str, limit: int) -> list[object]:
        """The first `limit` ids of a query selecting (id, row), in read order."""
        if limit <= 0:
            return []
        rows = self.runner.rows(f"SELECT * FROM ({sql}) AS e ORDER BY 2 LIMIT {int(limit)}")
        return [_plain(row[0]) for row in rows]

    def _one(self, sql: str) -> Any:
        return self.runner.rows(sql)[0][0]


def _indexed(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame in read order, indexed by its `__tm_row` column (the row numbers)."""
    if not frame[ROW].is_monotonic_increasing:
        frame = frame.sort_values(ROW, ignore_index=True)  # row numbers are unique: any sort is stable
    index = pd.Index(frame.pop(ROW).to_numpy())
    return frame.set_axis(index, axis=0)


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
