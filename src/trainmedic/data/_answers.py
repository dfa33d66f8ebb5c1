"""What a check counts, as plain values: the answers of a `TableEngine` and of the pandas
checks alike, so one function per finding turns either into the finding's words."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

MEAN_TOLERANCE = 1e-6
STD_TOLERANCE = 1e-4
RANGE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Matches:
    """Rows of a split that match something (a row of another split, an earlier row...)."""

    rows: int
    distinct: int  # distinct row hashes (or values) among them
    examples: list[object] = field(default_factory=list)  # up to `limit` row ids, read order


@dataclass(frozen=True, slots=True)
class Duplicates:
    """Rows equal to an earlier row of the same split (hash of `columns`)."""

    extra: int  # rows that repeat an earlier row (pandas `duplicated()`)
    involved: int  # rows whose hash occurs more than once (pandas `duplicated(keep=False)`)
    distinct: int  # distinct hashes that repeat
    examples: list[object] = field(default_factory=list)  # ids of repeating rows, read order


@dataclass(frozen=True, slots=True)
class Conflicts:
    """Feature hashes that carry more than one label value within one split."""

    hashes: int  # distinct feature hashes with more than one (non-missing) label
    rows: int  # rows with a known label whose feature hash is among them
    involved: int  # rows (all, label known or not) whose feature hash occurs more than once
    examples: list[object] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SharedValues:
    """Non-missing values of one column of `later` that also occur in `earlier`."""

    rows: int  # rows of later holding a shared value
    shared: int  # distinct shared values
    distinct: int  # distinct non-missing values of the column in later
    examples: list[object] = field(default_factory=list)  # shared values, first appearance in later


@dataclass(frozen=True, slots=True)
class Moments:
    """Count, sum, sum of squares and range of a numeric column: enough to compare scaling across splits."""

    n: int
    total: float
    squares: float
    low: float
    high: float
    fractional: bool  # a value that is not a whole number (a 0/1 flag also spans [0, 1])

    @classmethod
    def of(cls, series: pd.Series) -> Moments:
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        finite = np.isfinite(values)
        if not finite.all():
            values = values[finite]
        if values.size == 0:
            return cls(0, 0.0, 0.0, np.inf, -np.inf, False)
        return cls(
            int(values.size),
            float(values.sum()),
            float(np.dot(values, values)),
            float(values.min()),
            float(values.max()),
            bool(np.any(np.mod(values, 1) != 0)),
        )

    def __add__(self, other: Moments) -> Moments:
        return Moments(
            self.n + other.n,
            self.total + other.total,
            self.squares + other.squares,
            min(self.low, other.low),
            max(self.high, other.high),
            self.fractional or other.fractional,
        )

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else float("nan")

    @property
    def std(self) -> float:  # ddof=0, as StandardScaler
        return float(np.sqrt(max(self.squares / self.n - self.mean**2, 0.0))) if self.n else float("nan")

    def standardised(self) -> bool:
        return self.n > 1 and abs(self.mean) < MEAN_TOLERANCE and abs(self.std - 1) < STD_TOLERANCE

    def unit_range(self) -> bool:
        return abs(self.low) < RANGE_TOLERANCE and abs(self.high - 1) < RANGE_TOLERANCE
