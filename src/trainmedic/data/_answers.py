"""What a check counts, as plain values: the answers of a `TableEngine` and of the pandas
checks alike, so each finding's file (`trainmedic.rules.dat`) judges either the same way.
`Moments` is DAT014's evidence, defined there."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from trainmedic.rules.dat.dat014_preprocessing_before_split import Moments


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


def moments_of(series: pd.Series) -> Moments:
    """The `Moments` of a numeric column, over its finite values."""
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    finite = np.isfinite(values)
    if not finite.all():
        values = values[finite]
    if values.size == 0:
        return Moments(0, 0.0, 0.0, np.inf, -np.inf, False)
    return Moments(
        int(values.size),
        float(values.sum()),
        float(np.dot(values, values)),
        float(values.min()),
        float(values.max()),
        bool(np.any(np.mod(values, 1) != 0)),
    )
