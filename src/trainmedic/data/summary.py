"""The readable summary at the top of a check: rows, columns, dtypes, label distribution."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from trainmedic.data._context import Dataset
from trainmedic.data._parity import kind
from trainmedic.data._predictability import is_classification

_TOP_CLASSES = 10


@dataclass(frozen=True, slots=True)
class DataSummary:
    """Shape of the data checked (rows per split, columns, dtypes, label distribution) for the report."""

    rows: dict[str, int]
    columns: int
    features: int
    dtypes: dict[str, int]
    label: str | None
    label_distribution: dict[str, Any] = field(default_factory=dict)
    memory_mb: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "columns": self.columns,
            "features": self.features,
            "dtypes": self.dtypes,
            "label": self.label,
            "label_distribution": self.label_distribution,
            "memory_mb": self.memory_mb,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        splits = ", ".join(f"{name} {count:,}" for name, count in self.rows.items())
        dtypes = ", ".join(f"{count} {name}" for name, count in self.dtypes.items())
        out = [
            f"rows: {splits}",
            f"columns: {self.columns} ({self.features} features: {dtypes}); "
            f"{self.memory_mb:,.1f} MB in memory",
        ]
        if self.label is not None:
            dist = self.label_distribution
            if dist.get("kind") == "classification":
                classes = ", ".join(f"{k} {v:.1%}" for k, v in dist["fractions"].items())
                more = (
                    f" (+{dist['classes'] - len(dist['fractions'])} more)"
                    if dist["classes"] > len(dist["fractions"])
                    else ""
                )
                out.append(f"label {self.label!r}: {dist['classes']} classes: {classes}{more}")
            elif dist:
                out.append(
                    f"label {self.label!r}: numeric, mean {dist['mean']:.4g}, std {dist['std']:.4g}, "
                    f"range [{dist['min']:.4g}, {dist['max']:.4g}]"
                )
        out.extend(f"note: {note}" for note in self.notes)
        return out


def summarize(data: Dataset) -> DataSummary:
    train = data.train
    dtypes = Counter(kind(train.frame[c]) for c in train.features)
    memory = sum(int(s.frame.memory_usage(deep=True).sum()) for s in data.splits)
    return DataSummary(
        rows={s.name: len(s) for s in data.splits},
        columns=len(train.frame.columns),
        features=len(train.features),
        dtypes=dict(dtypes.most_common()),
        label=data.roles.label,
        label_distribution=label_distribution(train.frame[data.roles.label]) if data.roles.label else {},
        memory_mb=round(memory / 2**20, 1),
        notes=list(data.notes),
    )


def label_distribution(label: pd.Series) -> dict[str, Any]:
    values = label.dropna()
    if values.empty:
        return {}
    if is_classification(values):
        return classes_distribution(values.value_counts())
    as_float = values.astype("float64")
    return regression_distribution(
        float(as_float.mean()), float(as_float.std()), float(as_float.min()), float(as_float.max())
    )


def classes_distribution(counts: pd.Series) -> dict[str, Any]:
    """The label's classes from their counts, most frequent first."""
    fractions = counts / counts.sum()
    return {
        "kind": "classification",
        "classes": len(fractions),
        "fractions": {str(k): round(float(v), 6) for k, v in fractions.head(_TOP_CLASSES).items()},
    }


def regression_distribution(mean: float, std: float, low: float, high: float) -> dict[str, Any]:
    """A numeric label: mean, std (ddof=1, as pandas), range."""
    return {"kind": "regression", "mean": mean, "std": std, "min": low, "max": high}
