"""Leakage-free splits: identical rows and groups never straddle a split, time runs forward.

Rows are first joined into *components*: rows with identical features are one
component, rows of one group are one component, and the two links combine (a
row shared by two groups joins them) through connected components of a sparse
graph, so nothing loops over rows in Python. Components, not rows, are then
assigned to splits; the result is verified by the same checks as
`trainmedic check data` (DAT001, DAT003, DAT004) before it is returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._columns import Roles, require_column
from trainmedic.data._context import Dataset, Split
from trainmedic.data._hashing import column_hash, row_hashes
from trainmedic.data._leakage import group_overlap, split_overlap, temporal_overlap
from trainmedic.errors import UsageError

STRATEGIES = ("random", "stratified", "group", "time")
SPLIT_NAMES = ("train", "val", "test")
Index = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class NestedFold:
    """One outer fold: positions (for `df.iloc`) of its training and test rows, and the
    inner folds over its training rows (also absolute positions) for model selection."""

    train: Index
    test: Index
    inner: list[tuple[Index, Index]]


def split(
    frame: pd.DataFrame,
    strategy: str = "stratified",
    *,
    label: str | None = None,
    group: str | None = None,
    time: str | None = None,
    ignore: Sequence[str] = (),
    sizes: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
) -> tuple[pd.DataFrame, ...]:
    """Train/val/test (as many parts as `sizes`), leakage-free by construction and verified."""
    fractions = _fractions(sizes)
    _validate(frame, strategy, label=label, group=group, time=time)
    if strategy == "time":
        assignment = _time_assignment(frame[time], fractions)
    else:
        components = row_components(frame, label=label, group=group, time=time, ignore=ignore)
        strata = frame[label] if strategy == "stratified" else None
        assignment = _component_assignment(components, fractions, strata, seed)
    parts = tuple(frame.iloc[np.flatnonzero(assignment == i)] for i in range(len(fractions)))
    verify(parts, label=label, group=group, time=time, ignore=ignore)
    return parts


def nested_cv(
    frame: pd.DataFrame,
    strategy: str = "stratified",
    *,
    label: str | None = None,
    group: str | None = None,
    time: str | None = None,
    ignore: Sequence[str] = (),
    outer: int = 5,
    inner: int = 3,
    seed: int = 0,
) -> list[NestedFold]:
    """Nested cross-validation folds on scikit-learn's splitters, over leakage-free components."""
    _validate(frame, strategy, label=label, group=group, time=time)
    positions = np.arange(len(frame))
    if strategy == "time":
        order = np.argsort(frame[time].to_numpy(), kind="stable")
        return [
            NestedFold(
                order[tr], order[te], [(order[tr][a], order[tr][b]) for a, b in _time_folds(len(tr), inner)]
            )
            for tr, te in _time_folds(len(frame), outer)
        ]
    components = row_components(frame, label=label, group=group, time=time, ignore=ignore)
    y = frame[label].to_numpy() if strategy == "stratified" else None
    folds = []
    for tr, te in _group_folds(positions, components, y, outer, seed):
        sub_y = y[tr] if y is not None else None
        inner_folds = [
            (tr[a], tr[b]) for a, b in _group_folds(np.arange(len(tr)), components[tr], sub_y, inner, seed)
        ]
        folds.append(NestedFold(tr, te, inner_folds))
    return folds


def row_components(
    frame: pd.DataFrame,
    *,
    label: str | None = None,
    group: str | None = None,
    time: str | None = None,
    ignore: Sequence[str] = (),
) -> npt.NDArray[np.int64]:
    """Component id per row: identical feature rows and same-group rows share one."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    roles = Roles(label=label, group=group, time=time, ignore=tuple(ignore))
    rows, _ = pd.factorize(pd.Series(row_hashes(frame, roles.features(frame))))
    if group is None:
        return np.asarray(rows, dtype=np.int64)
    groups, _ = pd.factorize(pd.Series(column_hash(frame[group])))
    n_rows = int(rows.max()) + 1
    n_nodes = n_rows + int(groups.max()) + 1
    graph = coo_matrix((np.ones(len(rows)), (rows, groups + n_rows)), shape=(n_nodes, n_nodes))
    _, labels = connected_components(graph, directed=False)
    return np.asarray(labels[rows], dtype=np.int64)


def verify(
    parts: Sequence[pd.DataFrame],
    *,
    label: str | None = None,
    group: str | None = None,
    time: str | None = None,
    ignore: Sequence[str] = (),
) -> None:
    """Run DAT001/DAT003/DAT004 on the parts; a split that leaks is a bug (or duplicate rows
    straddling a time boundary, which only deduplication can fix): raise."""
    roles = Roles(label=label, group=group, time=time, ignore=tuple(ignore))
    nonempty = [(name, p) for name, p in zip(SPLIT_NAMES, parts, strict=False) if len(p)]
    data = Dataset([Split(name, p, roles, roles.features(p)) for name, p in nonempty], roles)
    leaks = split_overlap(data) + group_overlap(data) + temporal_overlap(data)
    if leaks:
        raise UsageError(
            f"the {leaks[0].slug} check fails on the split ({leaks[0].message}); "
            "deduplicate the rows (df.drop_duplicates) and split again"
        )


def _validate(
    frame: pd.DataFrame, strategy: str, *, label: str | None, group: str | None, time: str | None
) -> None:
    if strategy not in STRATEGIES:
        raise UsageError(f"strategy {strategy!r} is not one of {list(STRATEGIES)}")
    if len(frame) == 0:
        raise UsageError("cannot split an empty DataFrame")
    needed = {"stratified": ("label", label), "group": ("group", group), "time": ("time", time)}
    if strategy in needed and needed[strategy][1] is None:
        raise UsageError(f"strategy {strategy!r} needs {needed[strategy][0]}=COLUMN")
    for option, column in (("label", label), ("group", group), ("time", time)):
        if column is not None:
            require_column(frame, column, option=option, split="the DataFrame")


def _fractions(sizes: Sequence[float]) -> npt.NDArray[np.float64]:
    values = np.asarray(sizes, dtype=np.float64)
    if values.ndim != 1 or len(values) < 2 or np.any(values <= 0):
        raise UsageError(f"sizes {list(sizes)} must be two or more positive fractions")
    return np.asarray(values / values.sum(), dtype=np.float64)


def _component_assignment(
    components: npt.NDArray[np.int64],
    fractions: npt.NDArray[np.float64],
    strata: pd.Series | None,
    seed: int,
) -> npt.NDArray[np.intp]:
    """Shuffle components (per stratum) and cut their cumulative row counts at the fractions."""
    rng = np.random.default_rng(seed)
    n_components = int(components.max()) + 1
    sizes = np.bincount(components, minlength=n_components)
    if strata is None:
        stratum = np.zeros(n_components, dtype=np.int64)
    else:
        codes, _ = pd.factorize(strata)  # a component's stratum is the label of its first row
        first = np.full(n_components, -1, dtype=np.int64)
        first[components[::-1]] = codes[::-1]
        stratum = first
    part = np.zeros(n_components, dtype=np.intp)
    for value in np.unique(stratum):
        members = rng.permutation(np.flatnonzero(stratum == value))
        counts = sizes[members]
        starts = np.cumsum(counts) - counts
        bounds = np.cumsum(fractions)[:-1] * counts.sum()
        part[members] = np.searchsorted(bounds, starts + counts / 2, side="right")
    return part[components]


def _time_assignment(times: pd.Series, fractions: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """Cut at time quantiles; equal timestamps always land in the same part."""
    codes, uniques = pd.factorize(times, sort=True)
    counts = np.bincount(codes, minlength=len(uniques))
    starts = np.cumsum(counts) - counts
    bounds = np.cumsum(fractions)[:-1] * len(times)
    part_of_time = np.searchsorted(bounds, starts + counts / 2, side="right")
    return np.asarray(part_of_time[codes], dtype=np.intp)


def _group_folds(
    positions: Index,
    components: npt.NDArray[np.int64],
    y: npt.NDArray[np.generic] | None,
    n_splits: int,
    seed: int,
) -> list[tuple[Index, Index]]:
    from sklearn.model_selection import GroupKFold, StratifiedGroupKFold, StratifiedKFold

    singletons = len(np.unique(components)) == len(components)
    if y is not None and singletons:
        splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return [(positions[a], positions[b]) for a, b in splitter.split(positions, y)]
    if y is not None:
        sgkf = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        return [(positions[a], positions[b]) for a, b in sgkf.split(positions, y, groups=components)]
    gkf = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return [(positions[a], positions[b]) for a, b in gkf.split(positions, groups=components)]


def _time_folds(n: int, n_splits: int) -> list[tuple[Index, Index]]:
    from sklearn.model_selection import TimeSeriesSplit

    return [(a, b) for a, b in TimeSeriesSplit(n_splits=n_splits).split(np.arange(n))]
