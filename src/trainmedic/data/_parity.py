"""Parity between training data and every other split: schema (DAT010) and drift (DAT011).

Drift statistics run on at most `DRIFT_MAX_ROWS` rows per split (a seeded
sample, said in the evidence): KS and PSI are stable long before a million rows,
and p-values at a million rows flag differences too small to matter — which is
why a feature is reported only when the shift is both significant and large
(PSI or the effect size over its threshold).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._context import Dataset
from trainmedic.data._hashing import normalise
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat010_schema_mismatch as dat010
from trainmedic.rules.dat import dat011_feature_drift as dat011
from trainmedic.rules.dat.dat011_feature_drift import Drift

DRIFT_MAX_ROWS = 100_000
CATEGORY_MAX_LEVELS = 1000
_PSI_BINS = 10
_TOP_LEVELS = 50
_EPS = 1e-4
_SEED = 0


def kind(series: pd.Series) -> str:
    """The dtype family that matters to a model: int and float are both numbers."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_numeric_dtype(dtype):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    return "text"


def schema_mismatch(data: Dataset) -> list[Finding]:
    """DAT010: columns missing/extra/reordered, dtype families changed, unseen categories."""
    train = data.train
    train_kinds = kinds(train.frame)
    found = []
    for other in data.evaluation():
        other_kinds = kinds(other.frame)
        text = {}
        for column in text_columns(train.features, train_kinds, other_kinds):
            counts = non_numbers(other.frame[column])
            if counts:
                text[column] = dat010.Values(
                    sum(n for _, n in counts), len(other), [str(v) for v, _ in counts[:5]]
                )
        columns = dat010.ColumnKinds(
            other.name, train.features, train_kinds, other_kinds, data.roles.special(), text
        )
        found.extend(dat010.judge(columns))
        variants: dict[str, dat010.Values] = {}
        unseen: dict[str, dat010.Values] = {}
        chance: dict[str, dat010.UnseenChance] = {}
        for column in category_columns(train.features, train_kinds, other_kinds):
            train_counts = train.frame[column].value_counts(sort=False)
            if len(train_counts) > CATEGORY_MAX_LEVELS:
                continue  # free text: unseen values are expected
            known = pd.Series(train_counts.index)
            values = other.frame[column]
            new_values = values[values.notna() & ~values.isin(known)].value_counts(sort=False)
            counts = [(v, int(n)) for v, n in new_values.items()]
            sort_unseen(column, counts, known, len(other), into=(variants, unseen))
            if column in unseen:
                present = int(values.notna().sum())
                chance[column] = unseen_chance(train_counts.to_numpy(), unseen[column].rows, present)
        found.extend(dat010.judge(dat010.Categories(other.name, variants, unseen, chance)))
    return found


def unseen_chance(
    train_counts: npt.NDArray[np.int64], unseen_rows: int, other_rows: int
) -> dat010.UnseenChance:
    """What a random split of the column gives: train's rows of values seen once (N1 of n,
    Good-Turing's estimate of the share of new rows), and the tail of the split's `unseen_rows`
    U among U + N1 at the rate m / (m + n) (DAT010 explains the test)."""
    from scipy.stats import binom

    singletons = int((np.asarray(train_counts) == 1).sum())
    rows = int(np.asarray(train_counts).sum())
    share = other_rows / (other_rows + rows) if other_rows + rows else 0.0
    p_value = float(binom.sf(unseen_rows - 1, unseen_rows + singletons, share)) if unseen_rows else 1.0
    return dat010.UnseenChance(singletons, rows, p_value)


def kinds(frame: pd.DataFrame) -> dict[str, str]:
    """Each column's dtype family, in the frame's order."""
    return {str(c): kind(frame[c]) for c in frame.columns}


def text_columns(features: list[str], train_kinds: dict[str, str], other_kinds: dict[str, str]) -> list[str]:
    """Columns of numbers in train read as text in the other split, in its order."""
    return [
        c
        for c in other_kinds
        if c in features and train_kinds[c] == "number" and other_kinds[c] in ("text", "category")
    ]


def non_numbers(values: pd.Series) -> list[tuple[object, int]]:
    """The values that are not numbers (NaN as text included), with their counts, first
    appearance first."""
    present = values[values.notna()]
    parsed = pd.to_numeric(present.astype(str), errors="coerce")
    text = present[parsed.isna().to_numpy()]
    return [(v, int(n)) for v, n in text.value_counts(sort=False).items()]


def category_columns(
    features: list[str], train_kinds: dict[str, str], other_kinds: dict[str, str]
) -> list[str]:
    """Common text/category columns, in the other split's order."""
    return [c for c in other_kinds if c in features and train_kinds[c] in ("text", "category")]


def sort_unseen(
    column: str,
    counts: list[tuple[object, int]],
    known: pd.Series,
    total: int,
    *,
    into: tuple[dict[str, dat010.Values], dict[str, dat010.Values]],
) -> None:
    """Values of `column` never seen in train (with their counts, first appearance first):
    a case/whitespace variant of a known category ('Male ' for 'male') is an encoding
    inconsistency, anything else unseen (DAT010 decides when there are enough of them)."""
    if not counts:
        return
    variants, unseen = into
    folded_known = set(normalise(known).dropna())
    values = pd.Series([v for v, _ in counts], dtype=object)
    rows = np.array([n for _, n in counts], dtype=np.int64)
    variant = normalise(values).isin(folded_known).to_numpy(dtype=bool)
    if variant.any():
        variants[column] = _values(values[variant], rows[variant], total)
    if (~variant).any():
        unseen[column] = _values(values[~variant], rows[~variant], total)


def _values(values: pd.Series, rows: npt.NDArray[np.int64], total: int) -> dat010.Values:
    return dat010.Values(int(rows.sum()), total, [str(v) for v in values.iloc[:5]])


def feature_drift(data: Dataset) -> list[Finding]:
    """DAT011: per feature, KS (numbers) or chi-square (categories) plus PSI, train vs each split."""
    train = data.train
    found = []
    for other in data.evaluation():
        common = [
            c
            for c in train.features
            if c in other.frame.columns and kind(other.frame[c]) == kind(train.frame[c])
        ]
        base, sampled_base = _sample(train.frame, common)
        comp, sampled_comp = _sample(other.frame, common)
        drifts = [d for c in common if (d := measure(*_folded(base[c], comp[c]))) is not None]
        sampled = DRIFT_MAX_ROWS if sampled_base or sampled_comp else None
        found.extend(dat011.judge(dat011.Comparison(other.name, drifts, sampled)))
    return found


def _folded(base: pd.Series, comp: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Text compared case- and whitespace-blind: a spelling variant is reported once, as an
    encoding inconsistency (DAT010), not again as drift. Only when two spellings exist is
    anything rewritten (the usual case costs one pass over the distinct values)."""
    if kind(base) not in ("text", "category") or kind(comp) not in ("text", "category"):
        return base, comp
    spellings = pd.Series(pd.unique(np.concatenate([base.dropna().unique(), comp.dropna().unique()])))
    if normalise(spellings).nunique() == len(spellings):
        return base, comp
    return normalise(base).rename(base.name), normalise(comp).rename(comp.name)


def _sample(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, bool]:
    """At most DRIFT_MAX_ROWS rows of `columns`; rows are chosen first, so only they are copied."""
    if len(frame) <= DRIFT_MAX_ROWS:
        return frame, False
    rows = np.sort(np.random.default_rng(_SEED).choice(len(frame), DRIFT_MAX_ROWS, replace=False))
    return frame.iloc[rows][columns], True


def measure(base: pd.Series, comp: pd.Series) -> Drift | None:
    """The drift of one feature, or None when either side has no values."""
    from scipy import stats

    name = str(base.name)
    numeric = kind(base) == "number" and base.nunique() > _TOP_LEVELS
    if numeric:
        a = base.to_numpy(dtype=np.float64, na_value=np.nan)
        b = comp.to_numpy(dtype=np.float64, na_value=np.nan)
        a_finite, b_finite = a[np.isfinite(a)], b[np.isfinite(b)]
        if a_finite.size == 0 or b_finite.size == 0:
            return None
        result = stats.ks_2samp(a_finite, b_finite, method="asymp")
        edges = np.unique(np.quantile(a_finite, np.linspace(0, 1, _PSI_BINS + 1)[1:-1]))
        p = _histogram(a, edges)
        q = _histogram(b, edges)
        ks = float(result.statistic)
        return Drift(name, "ks", ks, float(result.pvalue), psi(p, q), ks, "ks_statistic")
    base_codes, comp_codes, levels = _levels(base, comp)
    p_counts = np.bincount(base_codes, minlength=levels)
    q_counts = np.bincount(comp_codes, minlength=levels)
    keep = (p_counts + q_counts) > 0
    table = np.vstack([p_counts[keep], q_counts[keep]])
    if table.shape[1] < 2:
        return None
    chi2, p_value, _, _ = stats.chi2_contingency(table, correction=False)
    n = table.sum()
    cramers_v = float(np.sqrt(chi2 / n)) if n else 0.0
    return Drift(
        name,
        "chi2",
        float(chi2),
        float(p_value),
        psi(p_counts / p_counts.sum(), q_counts / q_counts.sum()),
        cramers_v,
        "cramers_v",
    )


def _histogram(values: npt.NDArray[np.float64], edges: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Fractions per quantile bin of train, with one more bin for missing values."""
    codes = np.searchsorted(edges, values, side="right")
    codes[~np.isfinite(values)] = len(edges) + 1
    counts = np.bincount(codes, minlength=len(edges) + 2).astype(np.float64)
    return np.asarray(counts / counts.sum(), dtype=np.float64)


def _levels(base: pd.Series, comp: pd.Series) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], int]:
    """The top levels of train, 'other' and 'missing' as codes for both sides."""
    top = base.value_counts(dropna=True).index[:_TOP_LEVELS]
    index = pd.Index(top)
    other, missing = len(top), len(top) + 1

    def codes(series: pd.Series) -> npt.NDArray[np.intp]:
        found = index.get_indexer(series)
        found = np.where(found >= 0, found, other)
        return np.where(series.isna().to_numpy(), missing, found).astype(np.intp)

    return codes(base), codes(comp), len(top) + 2


def psi(p: npt.NDArray[np.float64], q: npt.NDArray[np.float64]) -> float:
    """Population stability index; bins empty on one side count as `_EPS`."""
    p = np.clip(p, _EPS, None)
    q = np.clip(q, _EPS, None)
    return float(np.sum((q - p) * np.log(q / p)))
