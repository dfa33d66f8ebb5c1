"""`TableEngine`: the aggregate questions the data checks ask of a table engine.

The pandas engine answers every check from frames in memory. Tables that do not fit
(DuckDB on one machine, Spark on a cluster) answer the same questions as aggregate
queries instead; `_aggregate_checks` turns the answers into the same findings as the
pandas checks. Each method returns counts and a few examples, never a whole column, so
the driver's memory does not grow with the table. The checks that need a model (label
noise, near-duplicates, single-feature scores, drift statistics) run the pandas checks
on `sample(...)`, and their notes say how many rows were sampled.

Conventions every engine keeps:
- A split is named "train", "val", "test" or "serving" (the keys of `open_engine`'s inputs).
- Row ids (`examples`) are the engine's row numbers in read order (0-based where the
  engine can say so) or, after `identify_rows_by(column)`, that column's values.
- Missing values are a value of their own in row hashes (two rows both missing in a
  column are equal there), as in the pandas hashes; numbers hash as doubles (3 == 3.0).
- Value lists are ordered by first appearance in the split (pandas' `unique` order) unless
  said otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import pandas as pd

from trainmedic.data._answers import Conflicts, Duplicates, Matches, SharedValues
from trainmedic.rules.dat.dat014_preprocessing_before_split import Moments

# The dtype families of `trainmedic.data._parity.kind`: what a model sees as a type.
KINDS = ("number", "bool", "datetime", "category", "text")
__all__ = ["KINDS", "Conflicts", "Duplicates", "Matches", "Moments", "SharedValues", "TableEngine"]


@runtime_checkable
class TableEngine(Protocol):
    """What the aggregate checks ask. `columns` arguments are lists of column names of the split."""

    name: str  # "duckdb", "spark": said in the report's notes
    sample_rows: int  # the most rows a seeded sample of one split may hold (the memory budget's)

    def splits(self) -> list[str]:
        """The split names given, in the order train, val, test, serving."""
        ...

    def identify_rows_by(self, column: str | None) -> None:
        """Name example rows by this column's values (`--id`) instead of row numbers."""
        ...

    def row_count(self, split: str) -> int: ...

    def column_kinds(self, split: str) -> dict[str, str]:
        """Each column (in the split's order) with its family, one of `KINDS`."""
        ...

    def null_counts(self, split: str, columns: Sequence[str]) -> dict[str, int]:
        """Missing values per column (NaN in a float column counts as missing, as in pandas)."""
        ...

    def missing_rows(self, split: str, column: str, *, limit: int) -> Matches:
        """Rows where the column is missing (a label without a value)."""
        ...

    def moments(self, split: str, columns: Sequence[str]) -> dict[str, Moments]:
        """`Moments` of each numeric column, over its finite values."""
        ...

    def distinct_count(self, split: str, column: str) -> int:
        """Distinct non-missing values of one column."""
        ...

    def duplicates(self, split: str, features: Sequence[str], label: str | None, *, limit: int) -> Duplicates:
        """Rows equal on the features and the label (when the split has `label`; a missing
        label is a value) to an earlier row."""
        ...

    def conflicts(self, split: str, features: Sequence[str], label: str, *, limit: int) -> Conflicts: ...

    def overlap(
        self, earlier: str, later: str, features: Sequence[str], *, limit: int, label: str | None = None
    ) -> Matches:
        """Rows of `later` whose row hash over `features` is the hash of some row of `earlier`
        (none when `earlier` lacks one of them); `distinct` counts the distinct hashes among them.
        `label` does not change the answer: an engine may keep it beside the hashes, which the
        duplicates and conflicts of the same features then read without hashing again."""
        ...

    def shared_values(self, earlier: str, later: str, column: str, *, limit: int) -> SharedValues: ...

    def value_counts(self, split: str, column: str, *, limit: int) -> list[tuple[object, int]]:
        """Non-missing values with their counts, most frequent first (ties: first appearance),
        at most `limit` of them."""
        ...

    def unseen_values(self, earlier: str, later: str, column: str, *, limit: int) -> list[tuple[object, int]]:
        """Non-missing values of `later` absent from `earlier`, with their counts in `later`,
        first appearance first, at most `limit` of them."""
        ...

    def non_numbers(self, split: str, column: str, *, limit: int) -> tuple[int, list[tuple[object, int]]]:
        """Rows of a text column whose value is not a number ('NaN' included), and those values
        with their counts, first appearance first, at most `limit` of them."""
        ...

    def time_bounds(self, split: str, column: str) -> tuple[object, object]:
        """(min, max) of a time column (numbers or timestamps; text parsed as timestamps);
        (None, None) when it holds no value."""
        ...

    def rows_before(self, split: str, column: str, earlier: str, *, limit: int) -> Matches:
        """Rows of `split` timed strictly before the latest time of `earlier`."""
        ...

    def sample(self, split: str, n: int, seed: int) -> pd.DataFrame:
        """A seeded sample of at most `n` rows, every column, as pandas. When the split has
        at most `n` rows: all of them, in read order. The index holds the row ids."""
        ...

    def close(self) -> None: ...
