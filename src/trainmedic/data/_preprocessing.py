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
from itertools import combinations

from trainmedic.data._answers import Moments
from trainmedic.data._context import Dataset
from trainmedic.data._leakage import EVALUATION_SPLITS
from trainmedic.data._parity import kind
from trainmedic.findings import Finding
from trainmedic.rules.data import PREPROCESSING_BEFORE_SPLIT


def preprocessing_before_split(data: Dataset) -> list[Finding]:
    splits = [s for s in data.splits if s.name in EVALUATION_SPLITS]
    if len(splits) < 2:
        return []
    train = splits[0]
    numeric = [c for c in train.features if kind(train.frame[c]) == "number"]
    moments = {s.name: {c: Moments.of(s.frame[c]) for c in numeric if c in s.frame.columns} for s in splits}
    return scaled_together([s.name for s in splits], numeric, moments)


def scaled_together(
    splits: Sequence[str], numeric: Sequence[str], moments: dict[str, dict[str, Moments]]
) -> list[Finding]:
    """DAT014 from the moments of each split's numeric columns (train first): the largest
    union of train with later splits whose joint scaling explains the columns."""
    train = splits[0]
    for others in _subsets(splits[1:]):
        group = [train, *others]
        columns = [c for c in numeric if all(c in moments[s] for s in others)]
        joint = _jointly_scaled(group, columns, moments)
        if joint:
            return [_finding(list(group), joint, len(columns))]  # smaller unions would repeat it
    return []


def _subsets(others: Sequence[str]) -> list[tuple[str, ...]]:
    """Larger unions first: train+val+test, then train+val, train+test."""
    return [c for size in range(len(others), 0, -1) for c in combinations(others, size)]


def _jointly_scaled(
    group: Sequence[str], columns: Sequence[str], moments: dict[str, dict[str, Moments]]
) -> dict[str, dict[str, object]]:
    joint = {}
    for column in columns:
        parts = [moments[s][column] for s in group]
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
        elif union.unit_range() and not train.unit_range() and union.fractional:
            joint[column] = {
                "scaling": "min-max",
                "union_range": [union.low, union.high],
                "train_range": [round(train.low, 6), round(train.high, 6)],
            }
    return joint


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
