"""DAT014: features scaled with statistics of all the data before it was split.

A StandardScaler fitted on the training split leaves *train* at mean 0 and
standard deviation 1 to floating-point precision; one fitted on everything
leaves the *union* of the splits there and train only close to it. The same
holds for min-max scaling: the union spans exactly [0, 1], train does not. Both
are cheap to test from per-split sums (no concatenation), and an exact 0/1 is
no accident in real data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from trainmedic.data._context import Dataset, Split
from trainmedic.data._leakage import EVALUATION_SPLITS
from trainmedic.data._parity import kind
from trainmedic.findings import Finding
from trainmedic.rules.data import PREPROCESSING_BEFORE_SPLIT

MEAN_TOLERANCE = 1e-6
STD_TOLERANCE = 1e-4
RANGE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Moments:
    """Count, sum, sum of squares and range of a numeric column: enough to compare scaling across splits."""

    n: int
    total: float
    squares: float
    low: float
    high: float

    @classmethod
    def of(cls, series: pd.Series) -> Moments:
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        finite = np.isfinite(values)
        if not finite.all():
            values = values[finite]
        if values.size == 0:
            return cls(0, 0.0, 0.0, np.inf, -np.inf)
        return cls(
            int(values.size),
            float(values.sum()),
            float(np.dot(values, values)),
            float(values.min()),
            float(values.max()),
        )

    def __add__(self, other: Moments) -> Moments:
        return Moments(
            self.n + other.n,
            self.total + other.total,
            self.squares + other.squares,
            min(self.low, other.low),
            max(self.high, other.high),
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


def preprocessing_before_split(data: Dataset) -> list[Finding]:
    splits = [s for s in data.splits if s.name in EVALUATION_SPLITS]
    if len(splits) < 2:
        return []
    train = splits[0]
    numeric = [c for c in train.features if kind(train.frame[c]) == "number"]
    moments = {(s.name, c): Moments.of(s.frame[c]) for s in splits for c in numeric if c in s.frame.columns}
    found = []
    for others in _subsets(splits[1:]):
        group = [train, *others]
        columns = [c for c in numeric if all(c in s.frame.columns for s in others)]
        joint = _jointly_scaled(group, columns, moments)
        if joint:
            names = [s.name for s in group]
            found.append(_finding(names, joint, len(columns)))
            break  # the largest union that explains it; smaller ones would repeat it
    return found


def _subsets(others: Sequence[Split]) -> list[tuple[Split, ...]]:
    """Larger unions first: train+val+test, then train+val, train+test."""
    return [c for size in range(len(others), 0, -1) for c in combinations(others, size)]


def _jointly_scaled(
    group: Sequence[Split], columns: Sequence[str], moments: dict[tuple[str, str], Moments]
) -> dict[str, dict[str, object]]:
    joint = {}
    for column in columns:
        parts = [moments[(s.name, column)] for s in group]
        union = parts[0]
        for part in parts[1:]:
            union = union + part
        train = parts[0]
        if union.standardised() and not train.standardised():
            joint[column] = {
                "scaling": "standard",
                "union_mean": float(f"{union.mean:.3g}"),
                "union_std": round(union.std, 6),
                "train_mean": round(train.mean, 6),
                "train_std": round(train.std, 6),
            }
        elif union.unit_range() and not train.unit_range() and _fractional(group, column):
            joint[column] = {
                "scaling": "min-max",
                "union_range": [union.low, union.high],
                "train_range": [round(train.low, 6), round(train.high, 6)],
            }
    return joint


def _fractional(group: Sequence[Split], column: str) -> bool:
    """A 0/1 flag also spans [0, 1]: only columns with fractional values count as scaled."""
    return any(
        bool(np.any(np.mod(s.frame[column].dropna().to_numpy(dtype=np.float64), 1) != 0)) for s in group
    )


def _finding(names: list[str], joint: dict[str, dict[str, object]], compared: int) -> Finding:
    first = next(iter(joint))
    detail = joint[first]
    how = (
        f"mean {detail['union_mean']}, std {detail['union_std']} over {' + '.join(names)}; "
        f"train alone mean {detail['train_mean']}, std {detail['train_std']}"
        if detail["scaling"] == "standard"
        else f"range {detail['union_range']} over {' + '.join(names)}; train alone {detail['train_range']}"
    )
    return PREPROCESSING_BEFORE_SPLIT.finding(
        f"{len(joint)} of {compared} numeric features were scaled on {' + '.join(names)} together, "
        f"not on train alone (e.g. {first!r}: {how})",
        evidence={"splits": names, "features": dict(list(joint.items())[:20]), "scaled_features": len(joint)},
    )
