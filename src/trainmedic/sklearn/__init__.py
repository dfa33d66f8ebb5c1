"""scikit-learn: audit a cross-validation (or a train/validation split) for leaks it cannot see.

`audit(estimator, X, y, cv=5)` looks at the data the CV folds receive, the way
`cross_val_score` would split it, and reports:

- DAT014: X was standardised / min-max scaled / mean-imputed with statistics of
  all its rows before CV split it. The signature is exact: the joint data has
  column mean 0 and std 1 to float precision (what `StandardScaler().fit_transform(X)`
  leaves), while no training fold alone does; or a value repeated in a column
  equals that column's joint mean (what `SimpleImputer().fit_transform(X)` leaves).
  Raw data never has those statistics by chance.
- DAT001: identical rows fall in both the training and the validation folds. When
  the duplicated rows are mostly of the minority class and the classes are balanced
  only because of them, the cause given is oversampling before the split.
- DAT009: a heavy class imbalance scored with accuracy (the default scorer of a
  classifier), with the metrics to use instead.

Under `trainmedic run` the same audit runs by itself inside `cross_val_score`,
`cross_validate` and `GridSearchCV`/`RandomizedSearchCV.fit`: `install` wraps them, in
`sklearn.model_selection`'s namespace (what `from sklearn.model_selection import ...`
binds), along with `train_test_split`. Each wrapper ships the audit's findings as events
and then calls the original unchanged; an audit that fails is one line on stderr.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from trainmedic.events import FindingRaised
from trainmedic.findings import Finding
from trainmedic.instrument import channel
from trainmedic.rules.dat import dat001_split_overlap as dat001
from trainmedic.rules.dat import dat009_class_imbalance as dat009
from trainmedic.rules.dat import dat014_preprocessing_before_split as dat014
from trainmedic.rules.dat.dat009_class_imbalance import SUITABLE_IMBALANCE_SCORERS

__all__ = ["SUITABLE_IMBALANCE_SCORERS", "audit", "install"]

_MEAN_TOL = 1e-7  # |mean| of a jointly standardised column (float64 round-off is ~1e-16)
_STD_TOL = 1e-6
_IMPUTE_MIN_REPEATS = 3
# Values within this share of the lattice step of its points (float32 data read as float64,
# pixels / 255) lie on it; a column needs this many distinct values to have a lattice at all.
_LATTICE_TOL = 1e-3
_LATTICE_MIN_POINTS = 4
# Data divided by a constant: this share of its values on the lattice k/d (continuous values
# never come near it; values imputed after the division are off it).
_LATTICE_SHARE = 0.8
_MAX_OVERSAMPLING_CLASSES = 50  # more classes than this: no class balance of the duplicates measured
# Above this many cells the row comparison (a sort of all rows) is skipped: the audit runs inside the
# user's cross_val_score and must stay small next to it.
_MAX_CELLS_FOR_DUPLICATES = 50_000_000

Matrix = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class _Split:
    """Row indices of one train/test split of the audited cross-validation."""

    train: npt.NDArray[np.intp]
    test: npt.NDArray[np.intp]


def audit(
    estimator: Any,
    X: Any,
    y: Any = None,
    *,
    cv: Any = 5,
    groups: Any = None,
    scoring: Any = None,
    X_val: Any = None,
    y_val: Any = None,
) -> list[Finding]:
    """Findings for training `estimator` on X, y evaluated by `cv` (or on X_val, y_val when given)."""
    numeric = _numeric(X)
    if X_val is not None:
        numeric_val = _numeric(X_val)
        joint = np.vstack([numeric, numeric_val]) if numeric_val.shape[1] == numeric.shape[1] else numeric
        splits = [_Split(np.arange(len(numeric)), np.arange(len(numeric), len(joint)))]
        all_y = None if y is None or y_val is None else np.concatenate([np.asarray(y), np.asarray(y_val)])
        where = "the training and validation sets together"
    else:
        joint = numeric
        splits = _cv_splits(estimator, X, y, cv, groups)
        all_y = None if y is None else np.asarray(y)
        where = f"all {len(joint):,} rows that cross-validation then split"
    found: list[Finding] = []
    found.extend(_preprocessing_before_split(joint, splits, estimator, where))
    found.extend(_split_overlap(joint, splits, all_y))
    if all_y is not None and _is_classifier(estimator):
        found.extend(_imbalance_without_metric(all_y, scoring))
    return found


# -- the data the folds receive ----------------------------------------------------------------------
def _numeric(X: Any) -> Matrix:
    """The numeric columns as float64 (categoricals and strings do not carry scaling statistics)."""
    if hasattr(X, "toarray") and not isinstance(X, np.ndarray):  # scipy sparse: scaling shows in dense only
        return np.empty((X.shape[0], 0))
    if hasattr(X, "select_dtypes"):  # a pandas DataFrame
        return np.asarray(X.select_dtypes("number"), dtype=np.float64)
    array = np.asarray(X)
    if array.ndim != 2:  # one value a row, or images and sequences: one column per element, as flattened
        array = array.reshape(len(array), -1)
    if array.dtype.kind not in "biuf":
        return np.empty((array.shape[0], 0))
    return array.astype(np.float64, copy=False)


def _cv_splits(estimator: Any, X: Any, y: Any, cv: Any, groups: Any) -> list[_Split]:
    from sklearn.base import is_classifier
    from sklearn.model_selection import check_cv

    splitter = check_cv(cv, y, classifier=estimator is not None and is_classifier(estimator))
    return [
        _Split(np.asarray(train), np.asarray(test))
        for train, test in splitter.split(X, y, groups)  # a generator cv is consumed: callers pass a list
    ]


def _is_classifier(estimator: Any) -> bool:
    from sklearn.base import is_classifier

    return estimator is not None and bool(is_classifier(estimator))


# -- DAT014 ------------------------------------------------------------------------------------------
def _continuous_columns(data: Matrix) -> list[int]:
    """Columns with more than two distinct finite values (one-hot and flags are not scaled data)."""
    columns = []
    for j in range(data.shape[1]):
        column = data[:, j]
        finite = column[np.isfinite(column)]
        if finite.size > 2 and np.unique(finite[:1000]).size > 2:
            columns.append(j)
    return columns


def _preprocessing_before_split(
    joint: Matrix, splits: Sequence[_Split], estimator: Any, where: str
) -> list[Finding]:
    if joint.shape[0] < dat014.AUDIT_MIN_ROWS or not splits:
        return []
    columns = _continuous_columns(joint)
    if not columns:
        return []
    for signature in (_standardised, _min_max, _mean_imputed):  # the first that DAT014 judges enough
        kind, hit, details = signature(joint, columns)
        if not hit:
            continue
        # The proof from the folds: a training fold alone does not have those statistics.
        scaling = dat014.FoldScaling(
            signature=kind,
            hit=hit,
            columns=len(columns),
            where=where,
            estimator=None if estimator is None else type(estimator).__name__,
            pipeline=_is_pipeline(estimator),
            train_fold_mean=_rounded(np.nanmean(joint[splits[0].train][:, hit], axis=0)),
            validation_fold_mean=_rounded(np.nanmean(joint[splits[0].test][:, hit], axis=0)),
            details=details,
            constant_scale=kind == dat014.MIN_MAX and len(hit) > 1 and _constant_scale(joint[:, hit]),
            folds=len(splits),
        )
        found = dat014.judge(scaling)
        if found:
            return found
    return []


Signature = tuple[str, list[int], dict[str, Any]]


def _standardised(data: Matrix, columns: list[int]) -> Signature:
    block = data[:, columns]
    means = np.nanmean(block, axis=0)
    stds = np.nanstd(block, axis=0)
    hit = [
        c
        for c, m, s in zip(columns, means, stds, strict=True)
        if abs(m) < _MEAN_TOL and abs(s - 1) < _STD_TOL
    ]
    return dat014.STANDARDISED, hit, {"joint_max_abs_mean": float(np.max(np.abs(means)))}


def _min_max(data: Matrix, columns: list[int]) -> Signature:
    block = data[:, columns]
    lows, highs = np.nanmin(block, axis=0), np.nanmax(block, axis=0)
    hit = [c for c, lo, hi in zip(columns, lows, highs, strict=True) if lo == 0.0 and abs(hi - 1.0) < 1e-12]
    return dat014.MIN_MAX, hit, {}


def _constant_scale(block: Matrix) -> bool:
    """Values on one lattice k/d for all columns (d = 255, 256, 100, 10): divided by a constant.
    Nearly all of them: values imputed afterwards fall between the lattice's points."""
    sample = block[: min(len(block), 2000)]
    sample = sample[np.isfinite(sample).all(axis=1)]
    for denominator in (255.0, 256.0, 100.0, 10.0):
        scaled = sample * denominator
        if np.mean(np.isclose(scaled, np.round(scaled), rtol=0, atol=1e-6)) >= _LATTICE_SHARE:
            return True
    return False


def _mean_imputed(data: Matrix, columns: list[int]) -> Signature:
    """A value repeated in a column and equal to the column's joint mean: SimpleImputer(strategy='mean')."""
    hit: list[int] = []
    repeats: dict[str, int] = {}
    for c in columns:
        column = data[:, c]
        mean = float(np.nanmean(column))
        close = np.isclose(column, mean, rtol=1e-12, atol=1e-12)
        count = int(close.sum())
        if count < _IMPUTE_MIN_REPEATS or _on_lattice(column[np.isfinite(column) & ~close], mean):
            continue
        if np.unique(column).size > count / 2 + 2:
            hit.append(c)
            repeats[str(c)] = count
    return dat014.MEAN_IMPUTED, hit, {"imputed_values_per_column": repeats}


def _on_lattice(others: Matrix, value: float) -> bool:
    """Whether `value` lies on the lattice the other values of its column lie on (integers,
    sixteenths of 8x8 digits, pixels / 255, half points): there a mean can be one of the data's
    own values by chance. A mean imputed into such data falls between the lattice's points."""
    points = np.unique(others)
    if points.size < _LATTICE_MIN_POINTS:
        return False  # two or three values lie on the lattice of their own differences
    step = float(np.min(np.diff(points)))
    units = (points - points[0]) / step
    if not np.allclose(units, np.round(units), atol=_LATTICE_TOL):
        return False
    offset = (value - points[0]) / step
    return bool(abs(offset - round(offset)) <= _LATTICE_TOL)


def _is_pipeline(estimator: Any) -> bool:
    from sklearn.pipeline import Pipeline

    inner = getattr(estimator, "estimator", None)  # a search wraps the model
    return isinstance(estimator, Pipeline) or isinstance(inner, Pipeline)


def _rounded(values: Iterable[float], limit: int = 5) -> list[float]:
    return [round(float(v), 6) for v in list(values)[:limit]]


# -- DAT001 ------------------------------------------------------------------------------------------
def _row_ids(data: Matrix) -> npt.NDArray[np.intp]:
    """An id per distinct row (identical numeric rows share it)."""
    if data.shape[1] == 0:
        return np.arange(len(data))
    _, inverse = np.unique(data, axis=0, return_inverse=True)
    return np.asarray(inverse, dtype=np.intp).ravel()


def _split_overlap(joint: Matrix, splits: Sequence[_Split], y: Any) -> list[Finding]:
    if joint.shape[1] == 0 or not splits or joint.size > _MAX_CELLS_FOR_DUPLICATES:
        return []
    ids = _row_ids(joint)
    if np.unique(ids).size == len(ids):
        return []
    shared_per_fold = [int(np.isin(ids[split.test], ids[split.train]).sum()) for split in splits]
    if not any(shared_per_fold):
        return []
    overlap = dat001.FoldOverlap(
        shared_per_fold=shared_per_fold,
        held_out_rows=sum(len(s.test) for s in splits),
        duplicate_rows=int(len(ids) - np.unique(ids).size),
        classes=_class_balance(ids, y),
    )
    return dat001.judge(overlap)


def _class_balance(ids: npt.NDArray[np.intp], y: Any) -> dat001.Oversampling | None:
    """How the duplicated rows fall among the classes: DAT001 reads oversampling from it."""
    if y is None or len(y) != len(ids):
        return None
    labels = np.asarray(y).ravel()
    classes, counts_now = np.unique(labels, return_counts=True)
    if not 2 <= classes.size <= _MAX_OVERSAMPLING_CLASSES:
        return None
    repeated = np.ones(len(ids), dtype=bool)
    repeated[np.unique(ids, return_index=True)[1]] = False  # every later copy of a row
    distinct = np.array([np.sum(labels[~repeated] == c) for c in classes])
    minority = classes[int(np.argmin(distinct))]
    return dat001.Oversampling(
        minority=_plain(minority),
        minority_share=float(np.mean(labels[repeated] == minority)) if repeated.any() else 0.0,
        ratio_as_given=float(counts_now.min() / counts_now.max()),
        ratio_without=float(distinct.min() / max(distinct.max(), 1)),
    )


# -- DAT009 ------------------------------------------------------------------------------------------
def _imbalance_without_metric(y: Any, scoring: Any) -> list[Finding]:
    classes, class_counts = np.unique(np.asarray(y).ravel(), return_counts=True)
    counts = [(_plain(c), int(n)) for c, n in zip(classes, class_counts, strict=True)]
    return dat009.judge(dat009.ScoredClasses(counts, scoring))


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if callable(item) else value


_ATTR = "__trainmedic_wrapped__"
_seen: set[tuple[str, str]] = set()


def install(model_selection: ModuleType) -> None:
    """Wrap the split and search entry points of `sklearn.model_selection` (idempotent)."""
    for name, wrapper in (
        ("cross_val_score", _wrap_cross_validation),
        ("cross_validate", _wrap_cross_validation),
        ("train_test_split", _wrap_train_test_split),
    ):
        original = getattr(model_selection, name, None)
        if original is not None and not getattr(original, _ATTR, False):
            setattr(model_selection, name, wrapper(original))
    from sklearn.model_selection._search import BaseSearchCV

    if not getattr(BaseSearchCV.fit, _ATTR, False):
        BaseSearchCV.fit = _wrap_search_fit(BaseSearchCV.fit)


def _report(findings: list[Finding]) -> None:
    """Ship findings once per process (a search in a loop must not repeat them)."""
    for finding in findings:
        key = (finding.code, finding.message)
        if key in _seen:
            continue
        _seen.add(key)
        channel.emit(FindingRaised(finding=finding.to_dict()))


def _safely(what: str, audit: Callable[[], list[Finding]]) -> None:
    try:
        _report(audit())
    except Exception as exc:  # the audit must never break the user's training
        sys.stderr.write(f"trainmedic: sklearn audit of {what} skipped: {exc!r}\n")


def _reusable_cv(cv: Any) -> Any:
    """A one-shot iterator of splits would be consumed by the audit: make it a list for both."""
    if hasattr(cv, "__next__"):
        return list(cv)
    return cv


def _wrap_cross_validation(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(estimator: Any, X: Any, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        if "cv" in kwargs:
            kwargs["cv"] = _reusable_cv(kwargs["cv"])
        cv = kwargs.get("cv", 5)
        cv = 5 if cv is None else cv
        groups = kwargs.get("groups") or (kwargs.get("params") or {}).get("groups")
        _safely(
            original.__name__,
            lambda: audit(estimator, X, y, cv=cv, groups=groups, scoring=kwargs.get("scoring")),
        )
        return original(estimator, X, y, *args, **kwargs)

    setattr(wrapper, _ATTR, True)
    return wrapper


def _wrap_search_fit(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def fit(self: Any, X: Any, y: Any = None, **params: Any) -> Any:
        self.cv = _reusable_cv(self.cv)
        cv = 5 if self.cv is None else self.cv
        _safely(
            type(self).__name__,
            lambda: audit(self.estimator, X, y, cv=cv, groups=params.get("groups"), scoring=self.scoring),
        )
        return original(self, X, y, **params)

    setattr(fit, _ATTR, True)
    return fit


def _wrap_train_test_split(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*arrays: Any, **options: Any) -> Any:
        parts = original(*arrays, **options)
        if len(arrays) >= 1 and len(parts) >= 2:
            y_train, y_test = (parts[2], parts[3]) if len(parts) >= 4 else (None, None)
            _safely(
                "train_test_split",
                lambda: audit(None, parts[0], y_train, X_val=parts[1], y_val=y_test),
            )
        return parts

    setattr(wrapper, _ATTR, True)
    return wrapper
