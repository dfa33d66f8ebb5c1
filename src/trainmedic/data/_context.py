"""The splits being checked, with the per-row hashes every check shares (computed once)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._columns import Roles
from trainmedic.data._hashing import U64, column_hash, normalised_row_hashes, row_hashes

SPLIT_ORDER = ("train", "val", "test", "serving")
MAX_EXAMPLES = 10


@dataclass(eq=False)
class Split:
    """One split: its name, its frame, and the columns that are features."""

    name: str
    frame: pd.DataFrame
    roles: Roles
    features: list[str]

    def __len__(self) -> int:
        return len(self.frame)

    @cached_property
    def feature_hash(self) -> U64:
        """Features only (label, group, time, id and ignored columns left out)."""
        return row_hashes(self.frame, self.features)

    @cached_property
    def near_hash(self) -> U64:
        return normalised_row_hashes(self.frame, self.features)

    @cached_property
    def label_codes(self) -> U64 | None:
        """A hash per label value (None when there is no label column in this split)."""
        label = self.roles.label
        if label is None or label not in self.frame.columns:
            return None
        return column_hash(self.frame[label])

    def example_rows(self, mask: npt.NDArray[np.bool_], limit: int = MAX_EXAMPLES) -> list[object]:
        """Up to `limit` row labels (the id column's values when one was given)."""
        positions = np.flatnonzero(mask)[:limit]
        return self.row_ids(positions)

    def row_ids(self, positions: npt.NDArray[np.intp]) -> list[object]:
        if self.roles.id is not None and self.roles.id in self.frame.columns:
            return [_plain(v) for v in self.frame[self.roles.id].to_numpy()[positions]]
        return [_plain(v) for v in self.frame.index.to_numpy()[positions]]


@dataclass(slots=True)
class Dataset:
    """All splits of one check, train first; the split order is the time order."""

    splits: list[Split]
    roles: Roles
    notes: list[str] = field(default_factory=list)
    identifiers: dict[str, float] = field(default_factory=dict)  # key columns left out of the features

    @property
    def train(self) -> Split:
        return self.splits[0]

    def labelled(self) -> list[Split]:
        return [s for s in self.splits if s.label_codes is not None]

    def evaluation(self) -> list[Split]:
        """The splits after train (val, test, serving)."""
        return self.splits[1:]


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
