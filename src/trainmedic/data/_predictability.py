"""How well features predict the label: one feature alone, one feature against the rest, and a
few numeric features together in a linear fit.

Each feature is cut into at most `BINS` bins (ordered bins for numbers, at least
`MIN_BIN_ROWS` fit rows a bin on average, each distinct value its own bin when there are
few; values for text and codes; missing as its own bin); the bins are fitted on one half
of the rows and scored on the other half, so an ID-like column (unique per row) predicts
nothing on the held-out half, while a column that encodes the label predicts it perfectly.
Classification is scored as accuracy normalised by the majority baseline,
`(acc - base) / (1 - base)`, and as the ranking AUC of the bins' class rates (prevalence-
weighted one-vs-rest); regression as R² of the bin means. One `np.bincount` per feature,
so it scales to millions of rows.

Two yardsticks for what one feature alone cannot show:
- `rest_of_table`: for the few features whose AUC is near-deterministic, the AUC of a naive
  Bayes over the bins of every *other* feature (what the rest of the table knows);
- `linear_fits`: for a regression label, up to `LINEAR_STEPS` numeric features chosen by
  orthogonal matching pursuit on the fit half, and the held-out R² of an ordinary least
  squares fit of every subset of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.rules.dat import dat005_target_leakage as dat005
from trainmedic.rules.dat.dat005_target_leakage import FeatureScore

BINS = 128
MIN_BIN_ROWS = 5  # numbers: at most one bin per 5 fit rows, so a small table's bins hold rows
MAX_ROWS = 200_000
MAX_TABLE_CELLS = 20_000_000
CLASSIFICATION_MAX_CLASSES = 50
# An integral label read as a count or a score (`ordered_quantity`): class codes show a profile
# as smooth in under 1 in 1,000 tables (a flat one, digits 0-9, is as rough as its shuffles).
ORDERED_ALPHA = 0.001
ORDER_PERMUTATIONS = 9_999
REST_CANDIDATES = 3  # features compared against the rest of the table, at most
REST_MAX_CELLS = 5_000_000  # held-out rows x classes in the naive Bayes of the rest
RAW_ORDER_FLOOR = 0.9  # binned AUC from which a number's own order is scored too
LINEAR_STEPS = 3  # numeric features chosen for the linear fits, at most
LINEAR_MAX_ROWS = 20_000
_SEED = 0  # the fit half; _SEED + 1 for subsamples drawn from it, independent of it

Codes = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


def is_classification(label: pd.Series) -> bool:
    """Text, bool, categorical or few integral values: classes; a count or a score (integral
    values whose counts follow their order, `ordered_quantity`) or any other numbers: a
    regression target."""
    if not pd.api.types.is_numeric_dtype(label.dtype) or pd.api.types.is_bool_dtype(label.dtype):
        return True
    return is_class_codes(label.dropna().value_counts())


def is_class_codes(counts: pd.Series) -> bool:
    """A numeric label's value counts (index: the values) are those of class codes: few
    integral values whose counts do not follow their order."""
    return few_integers(counts) and not ordered_quantity(counts)


def is_count_or_score(counts: pd.Series) -> bool:
    """Few integral values whose counts follow their order: a count or a score, not classes."""
    return few_integers(counts) and ordered_quantity(counts)


def few_integers(counts: pd.Series) -> bool:
    if len(counts) > CLASSIFICATION_MAX_CLASSES:
        return False
    as_float = counts.index.to_numpy(dtype=np.float64)
    return bool(np.all(np.equal(np.mod(as_float, 1), 0)))


def ordered_quantity(counts: pd.Series) -> bool:
    """The counts of integral values, taken in the values' order, rise and fall as a count or
    a score does (a number of seizures, words right out of 10) and as arbitrary class codes
    rarely do: a permutation test of the profile's departure from one mode.

    Class codes are names: any order of their counts is as likely as the one observed. A
    count or a score has a smooth profile (one mode, tails): its total variation
    sum |n(v+1) - n(v)| is that of one rise and one fall, up to sampling noise. The label is an
    ordered quantity when fewer than `ORDERED_ALPHA` of random orders of the same counts
    depart as little from one mode. A perfectly smooth profile of k values is matched by the 2^(k-1) unimodal
    orders among k!, so it takes 9 values or more: binary, three-class or seven-grade labels
    stay classes whatever their counts."""
    values = counts.sort_index().to_numpy(dtype=np.float64)
    if len(values) < 3:
        return False
    shuffled = np.random.default_rng(_SEED).permuted(np.tile(values, (ORDER_PERMUTATIONS, 1)), axis=1)
    as_small = int((_rises_and_falls(shuffled) <= _rises_and_falls(values[None, :])[0]).sum())
    return (1 + as_small) / (1 + ORDER_PERMUTATIONS) < ORDERED_ALPHA


def _rises_and_falls(profiles: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per row, the total variation beyond one rise to the peak and one fall from it (0: the
    profile is unimodal): what its ups and downs add to the smoothest order."""
    variation = np.abs(np.diff(profiles, axis=1)).sum(axis=1)
    smoothest = 2 * profiles.max(axis=1) - profiles[:, 0] - profiles[:, -1]
    return np.asarray(variation - smoothest, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Sample:
    """The rows scored (at most `MAX_ROWS` with a label), split into a fit and a held-out half."""

    frame: pd.DataFrame
    rows: npt.NDArray[np.intp] | None  # None: every row of the frame
    fit: Mask
    target: pd.Series

    def column(self, feature: str) -> pd.Series:
        series = self.frame[feature]
        return series if self.rows is None else series.iloc[self.rows]

    def classes(self) -> tuple[Codes, int]:
        codes, uniques = pd.factorize(self.target)
        return codes.astype(np.int64), len(uniques)

    def class_names(self) -> list[str]:
        return [str(_plain(v)) for v in pd.factorize(self.target)[1]]


def _sample(frame: pd.DataFrame, label: str) -> _Sample | None:
    rng = np.random.default_rng(_SEED)
    rows = np.flatnonzero(frame[label].notna().to_numpy())
    if len(rows) > MAX_ROWS:
        rows = np.sort(rng.choice(rows, MAX_ROWS, replace=False))
    if len(rows) < 20:
        return None
    every_row = len(rows) == len(frame)
    fit = rng.random(len(rows)) < 0.5
    target = frame[label] if every_row else frame[label].iloc[rows]
    return _Sample(frame, None if every_row else rows, fit, target)


def predictability(frame: pd.DataFrame, features: Sequence[str], label: str) -> dat005.Predictability:
    """Every feature's held-out score (best first), the near-deterministic features against the
    rest of the table (classes), and the linear fits of a few numeric features (regression).

    Rows with a missing label are left out. Works column by column on the chosen rows, so it
    never copies the whole frame.
    """
    sample = _sample(frame, label)
    if sample is None:
        return dat005.Predictability(label, [])
    if not is_classification(sample.target):
        scores = [_regression_score(f, *bin_codes(sample.column(f), sample.fit), sample) for f in features]
        return dat005.Predictability(label, _best_first(scores), linear=linear_fits(sample, features))
    classes, n_classes = sample.classes()
    names = sample.class_names()
    scores = []
    per_class: dict[str, npt.NDArray[np.float64]] = {}
    for feature in features:
        column = sample.column(feature)
        score, aucs = _classification_score(
            feature, bin_codes(column, sample.fit), (classes, n_classes), sample.fit
        )
        if max(score.auc or 0.0, float(aucs.max())) >= RAW_ORDER_FLOOR and _is_number(column):
            raw, raw_aucs = ordered_auc(column, classes, n_classes, sample.fit)
            score = replace(score, auc=max(score.auc or 0.0, raw))
            aucs = np.maximum(aucs, raw_aucs)
        best = int(np.argmax(aucs))
        scores.append(replace(score, class_auc=float(aucs[best]), auc_class=names[best]))
        per_class[feature] = aucs
    scores = _best_first(scores)
    near = [s for s in scores if dat005.needs_the_rest(s)]
    alone = rest_of_table(sample, features, near, per_class)
    return dat005.Predictability(label, scores, alone=alone)


def _best_first(scores: list[FeatureScore]) -> list[FeatureScore]:
    return sorted(scores, key=lambda s: (-s.score, -(s.auc or 0.0)))


def _is_number(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(series.dtype)


def ordered_auc(
    series: pd.Series, classes: Codes, n_classes: int, fit: Mask
) -> tuple[float, npt.NDArray[np.float64]]:
    """Held-out AUC of the number itself (weighted, and per class against the rest), each
    class's direction taken from the fit half (a threshold rule ranks perfectly where bins
    of 5+ rows leave the bin astride it mixed); missing values sit at the fit half's median."""
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    finite = np.isfinite(values)
    if not (finite & fit).any():
        return 0.5, np.full(n_classes, 0.5)
    values = np.where(finite, values, np.median(values[finite & fit]))
    truth = np.eye(n_classes)
    fit_auc = per_class_auc(np.repeat(values[fit][:, None], n_classes, axis=1), truth[classes[fit]])
    signs = np.where(fit_auc >= 0.5, 1.0, -1.0)
    held = ~fit
    scores, counts = values[held][:, None] * signs[None, :], truth[classes[held]]
    return _weighted_auc(scores, counts), per_class_auc(scores, counts)


def bin_codes(series: pd.Series, fit: Mask) -> tuple[Codes, int]:
    """Integer bin of each row; bin 0 is 'missing'. Numbers get ordered bins fitted on the fit
    half (its distinct values when few, else quantiles), so an unseen value falls in the bin
    of its neighbours; text and bool get a bin per value."""
    if _is_number(series):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        finite = np.isfinite(values)
        seen = values[fit & finite]
        if seen.size:
            most = int(np.clip(seen.size // MIN_BIN_ROWS, 2, BINS))
            distinct = np.unique(seen)
            if distinct.size <= most:  # codes and few values: each its own bin, cut half way
                edges = distinct[1:] / 2 + distinct[:-1] / 2  # halves first: no overflow
            else:
                edges = np.unique(np.quantile(seen, np.linspace(0, 1, most + 1)[1:-1]))
            codes = np.searchsorted(edges, values, side="right") + 1
            codes[~finite] = 0
            return codes.astype(np.int64), len(edges) + 2
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    return (codes.astype(np.int64) + 1), len(uniques) + 1


def _capped(bins: Codes, n_bins: int, n_classes: int) -> tuple[Codes, int]:
    """Huge-cardinality text: keep the most frequent values' bins within `MAX_TABLE_CELLS`."""
    if n_bins * n_classes <= MAX_TABLE_CELLS:
        return bins, n_bins
    keep = MAX_TABLE_CELLS // max(n_classes, 1) - 1
    return np.where(bins < keep, bins, keep), keep + 1


def _table(bins: Codes, classes: Codes, n_bins: int, n_classes: int) -> npt.NDArray[np.int64]:
    counts = np.bincount(bins * n_classes + classes, minlength=n_bins * n_classes)
    return counts.reshape(n_bins, n_classes)


def _classification_score(
    feature: str, binned: tuple[Codes, int], labels: tuple[Codes, int], fit: Mask
) -> tuple[FeatureScore, npt.NDArray[np.float64]]:
    """The feature's held-out score, and its held-out AUC for each class against the rest."""
    classes, n_classes = labels
    bins, n_bins = _capped(*binned, n_classes)
    held = ~fit
    table = _table(bins[fit], classes[fit], n_bins, n_classes)
    held_table = _table(bins[held], classes[held], n_bins, n_classes)
    majority = int(np.argmax(table.sum(axis=0)))
    predicted = np.where(table.sum(axis=1) > 0, np.argmax(table, axis=1), majority)
    rows = int(held.sum())
    accuracy = float(held_table[np.arange(n_bins), predicted].sum() / rows)
    baseline = float(held_table[:, majority].sum() / rows)
    score = (accuracy - baseline) / (1 - baseline) if baseline < 1 else 0.0
    rates = _bin_rates(table)
    auc = _weighted_auc(rates, held_table.astype(np.float64))
    score_of = FeatureScore(feature, max(score, 0.0), "held-out accuracy", accuracy, baseline, rows, auc)
    return score_of, per_class_auc(rates, held_table.astype(np.float64))


def _bin_rates(fit: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Each bin's class rates fitted on `fit` (bins x classes counts), shrunk towards the class
    prior by one row: scored against held-out rows, their ranking AUC."""
    prior = (fit.sum(axis=0) + 1) / (fit.sum() + fit.shape[1])
    return np.asarray((fit + prior) / (fit.sum(axis=1, keepdims=True) + 1), dtype=np.float64)


def _weighted_auc(scores: npt.NDArray[np.float64], counts: npt.NDArray[np.float64]) -> float:
    """One-vs-rest AUC of column c of `scores` for class c, weighted by the class's count;
    `counts[i, c]` rows of class c carry the scores of row i."""
    weights = counts.sum(axis=0)
    present = (weights > 0) & (weights < weights.sum())
    if not present.any():
        return 0.5
    aucs = per_class_auc(scores, counts)
    return float((aucs * weights)[present].sum() / weights[present].sum())


def per_class_auc(
    scores: npt.NDArray[np.float64], counts: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """AUC of column c of `scores` for class c against the others; 0.5 for an absent class."""
    per_row = counts.sum(axis=1)
    aucs = np.full(counts.shape[1], 0.5)
    for c in range(counts.shape[1]):
        positives = counts[:, c]
        negatives = per_row - positives
        if positives.sum() > 0 and negatives.sum() > 0:
            aucs[c] = _auc(scores[:, c], positives, negatives)
    return aucs


def _auc(score: npt.NDArray[np.float64], pos: npt.NDArray[np.float64], neg: npt.NDArray[np.float64]) -> float:
    """Mann-Whitney AUC of weighted positives over negatives; equal scores count a half."""
    levels, level = np.unique(score, return_inverse=True)
    p = np.bincount(level, weights=pos, minlength=len(levels))
    n = np.bincount(level, weights=neg, minlength=len(levels))
    below = np.cumsum(n) - n
    return float(((p * below).sum() + 0.5 * (p * n).sum()) / (p.sum() * n.sum()))


def rest_of_table(
    sample: _Sample,
    features: Sequence[str],
    near: Sequence[FeatureScore],
    per_class: dict[str, npt.NDArray[np.float64]],
) -> list[dat005.AgainstRest]:
    """For the first `REST_CANDIDATES` near-deterministic features, what the rest of the table
    knows about the label without them: the held-out AUC (weighted, and for the class the
    feature ranks best against the others) of a naive Bayes over the bins of every other
    feature, or of the best other feature alone where that is higher (naive Bayes
    double-counts redundant columns). A feature with one value for nearly every row of a class
    (`class_default`) is measured without the other near-deterministic features too: columns
    recorded with it, or computed from it, do not vouch for it."""
    candidates = near[:REST_CANDIDATES]
    if not candidates or len(features) < 2:
        return []
    classes, n_classes = sample.classes()
    fit = sample.fit
    held = np.flatnonzero(~fit)
    if len(held) * n_classes > REST_MAX_CELLS:
        held = np.sort(
            np.random.default_rng(_SEED + 1).choice(held, REST_MAX_CELLS // n_classes, replace=False)
        )
    prior = (np.bincount(classes[fit], minlength=n_classes) + 1) / (int(fit.sum()) + n_classes)
    total = np.tile(np.log(prior), (len(held), 1))
    own: dict[str, npt.NDArray[np.float64]] = {}
    names = {c.feature for c in near}
    for feature in features:
        bins, n_bins = _capped(*bin_codes(sample.column(feature), fit), n_classes)
        table = _table(bins[fit], classes[fit], n_bins, n_classes)
        # log P(class | bin) / P(class), each bin shrunk towards the prior by MIN_BIN_ROWS rows
        rates = (table + MIN_BIN_ROWS * prior) / (table.sum(axis=1, keepdims=True) + MIN_BIN_ROWS)
        contribution = np.log(rates / prior)[bins[held]]
        total += contribution
        if feature in names:
            own[feature] = contribution
    truth = np.eye(n_classes)[classes[held]]
    class_names = sample.class_names()
    weights = np.bincount(classes, minlength=n_classes).astype(np.float64)
    found = []
    for candidate in candidates:
        default = class_default(sample.column(candidate.feature), classes, class_names)
        left_out = names if default is not None else {candidate.feature}
        rest = total - sum(own[f] for f in left_out)
        posterior = np.exp(rest - rest.max(axis=1, keepdims=True))
        posterior /= posterior.sum(axis=1, keepdims=True)
        others = [per_class[f] for f in features if f not in left_out]
        rest_aucs = np.maximum.reduce([per_class_auc(posterior, truth), *others])
        best_other = max((_weighted(a, weights) for a in others), default=0.5)
        target = class_names.index(candidate.auc_class) if candidate.auc_class in class_names else 0
        found.append(
            dat005.AgainstRest(
                candidate.feature,
                candidate.auc or 0.0,
                max(_weighted_auc(posterior, truth), best_other),
                len(features) - len(left_out),
                len(held),
                label_class=candidate.auc_class,
                class_auc=candidate.class_auc,
                rest_class_auc=float(rest_aucs[target]),
                default=default,
                left_out=sorted(left_out - {candidate.feature}),
            )
        )
    return found


def _weighted(aucs: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> float:
    """Per-class AUCs weighted by the classes' rows (a binary label: the AUC itself)."""
    return float((aucs * weights).sum() / weights.sum()) if weights.sum() else 0.5


def class_default(series: pd.Series, classes: Codes, names: Sequence[str]) -> dat005.ClassDefault | None:
    """One value held by nearly every row of a class (`dat005.DEFAULT_SHARE`), the largest share
    first: what a column filled after the outcome holds where the outcome did not happen."""
    values = pd.Series(series.to_numpy(), dtype=object).fillna("<missing>")
    best: dat005.ClassDefault | None = None
    for code, name in enumerate(names):
        of_class = values[classes == code]
        if len(of_class) < dat005.DEFAULT_MIN_ROWS:
            continue
        counts = of_class.value_counts()
        share = float(counts.iloc[0] / len(of_class))
        if share >= dat005.DEFAULT_SHARE and (best is None or share > best.share):
            best = dat005.ClassDefault(name, str(_plain(counts.index[0])), share)
    return best


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _regression_score(feature: str, bins: Codes, n_bins: int, sample: _Sample) -> FeatureScore:
    y = sample.target.to_numpy(dtype=np.float64)
    fit = sample.fit
    counts = np.bincount(bins[fit], minlength=n_bins)
    sums = np.bincount(bins[fit], weights=y[fit], minlength=n_bins)
    mean = float(y[fit].mean())
    means = np.where(counts > 0, sums / np.maximum(counts, 1), mean)
    held = ~fit
    residual = float(np.sum((y[held] - means[bins[held]]) ** 2))
    total = float(np.sum((y[held] - y[held].mean()) ** 2))
    r2 = 1 - residual / total if total > 0 else 0.0
    return FeatureScore(feature, max(r2, 0.0), "held-out R²", r2, 0.0, int(held.sum()))


def linear_fits(sample: _Sample, features: Sequence[str]) -> list[dat005.LinearFit]:
    """Up to `LINEAR_STEPS` numeric features chosen by orthogonal matching pursuit on the fit
    half, and the held-out R² of a least-squares fit on every non-empty subset of them.

    On at most `LINEAR_MAX_ROWS` rows, one column in memory at a time."""
    numeric = [f for f in features if _is_number(sample.frame[f])]
    y = sample.target.to_numpy(dtype=np.float64)
    keep = np.isfinite(y)
    if len(keep) > LINEAR_MAX_ROWS:
        keep &= np.random.default_rng(_SEED + 1).random(len(keep)) < LINEAR_MAX_ROWS / len(keep)
    picked = np.flatnonzero(keep)
    fit = sample.fit[picked]
    if not numeric or fit.sum() < 10 or (~fit).sum() < 10:
        return []
    in_frame = picked if sample.rows is None else sample.rows[picked]

    def column(feature: str) -> npt.NDArray[np.float64] | None:
        return _filled(sample.frame[feature].iloc[in_frame], fit)

    y = y[picked]
    chosen = _pursuit(numeric, column, y, fit)
    columns = {f: x for f in chosen if (x := column(f)) is not None}
    fits = []
    for size in range(1, len(chosen) + 1):
        for subset in combinations(chosen, size):
            matrix = np.column_stack([columns[f] for f in subset])
            fits.append(dat005.LinearFit(subset, _held_r2(matrix, y, fit), int((~fit).sum())))
    return fits


def _filled(series: pd.Series, fit: Mask) -> npt.NDArray[np.float64] | None:
    """The column as floats, missing and infinite values set to the fit half's mean."""
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    finite = np.isfinite(values)
    if not (finite & fit).any():
        return None
    return np.asarray(np.where(finite, values, values[finite & fit].mean()), dtype=np.float64)


def _pursuit(
    features: Sequence[str],
    column: Callable[[str], npt.NDArray[np.float64] | None],
    y: npt.NDArray[np.float64],
    fit: Mask,
) -> list[str]:
    """Greedy, on the fit half: the column most correlated with what the chosen ones leave of
    `y`, orthogonalised against them (columns that add nothing new are skipped)."""
    residual = y[fit] - y[fit].mean()
    basis: list[npt.NDArray[np.float64]] = []
    chosen: list[str] = []
    for _ in range(LINEAR_STEPS):
        best, best_corr, best_vector = None, 0.0, None
        for name in features:
            x = None if name in chosen else column(name)
            if x is None:
                continue
            v = x[fit] - x[fit].mean()
            scale = float(np.linalg.norm(v))
            for q in basis:
                v = v - float(q @ v) * q
            norm = float(np.linalg.norm(v))
            if scale == 0 or norm < 1e-6 * scale:
                continue
            corr = abs(float(v @ residual)) / norm
            if corr > best_corr:
                best, best_corr, best_vector = name, corr, v / norm
        if best is None or best_vector is None:
            break
        chosen.append(best)
        basis.append(best_vector)
        residual = residual - float(best_vector @ residual) * best_vector
    return chosen


def _held_r2(matrix: npt.NDArray[np.float64], y: npt.NDArray[np.float64], fit: Mask) -> float:
    held = ~fit
    design = np.column_stack([np.ones(len(y)), matrix])
    coef, *_ = np.linalg.lstsq(design[fit], y[fit], rcond=None)
    residual = float(np.sum((y[held] - design[held] @ coef) ** 2))
    total = float(np.sum((y[held] - y[held].mean()) ** 2))
    return 1 - residual / total if total > 0 else 0.0
