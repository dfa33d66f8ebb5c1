"""Which column plays which part (label, group, time, id, features), checked against the data.

A misspelt column name is the most common bad input: it gets one line naming the
option, the split, and the closest existing names (as scikit-learn does).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from trainmedic.errors import UsageError


@dataclass(frozen=True, slots=True)
class Roles:
    """The parts columns play; every column not named here is a feature."""

    label: str | None = None
    group: str | None = None
    time: str | None = None
    id: str | None = None
    ignore: tuple[str, ...] = ()

    def special(self) -> set[str]:
        named = {self.label, self.group, self.time, self.id, *self.ignore}
        return {c for c in named if c is not None}

    def features(self, frame: pd.DataFrame) -> list[str]:
        """Feature columns of `frame`, in its own order."""
        special = self.special()
        return [str(c) for c in frame.columns if c not in special]


def require_column(frame: pd.DataFrame, column: str, *, option: str, split: str) -> None:
    """Raise a one-line usage error when `column` is not in `frame`, with close names."""
    if column in frame.columns:
        return
    raise UsageError(f"{option} {column!r} is not a column of {split}{suggest(column, frame.columns)}")


def suggest(wanted: str, names: Iterable[object]) -> str:
    """'; did you mean 'label'? columns: [...]' (the column list is cut when long)."""
    columns = [str(n) for n in names]
    close = difflib.get_close_matches(wanted, columns, n=3, cutoff=0.6)
    lowered = [c for c in columns if c.lower() == wanted.lower() and c not in close]
    hint = f"; did you mean {', '.join(repr(c) for c in lowered + close)}?" if lowered + close else ""
    shown = columns if len(columns) <= 12 else [*columns[:12], "..."]
    return f"{hint}; columns: {shown}"


def validate_roles(roles: Roles, splits: Sequence[tuple[str, pd.DataFrame]]) -> None:
    """Every named column must exist in every split that should carry it.

    Serving data has no label (nor group/time) by nature, so only train/val/test must
    hold them.
    """
    for name, frame in splits:
        for option, column in (
            ("--label", roles.label),
            ("--group", roles.group),
            ("--time", roles.time),
            ("--id", roles.id),
        ):
            if column is None:
                continue
            if name == "serving":
                continue  # serving data carries none of them by nature
            require_column(frame, column, option=option, split=name)
        for column in roles.ignore:
            if name == "train":
                require_column(frame, column, option="--ignore", split=name)
