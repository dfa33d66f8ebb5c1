"""How many identical feature rows chance alone gives: the yardstick of DAT001, DAT006, DAT007
(measured here; `trainmedic.rules._helpers.chance` decides and words it).

In a table of a few categorical columns (sex, class, age band) different people share
every attribute: 2 x 3 x 5 = 30 possible rows, and a random split puts most of them in
both parts. Only identical rows *beyond* what the feature space explains point at copies.

The chance that a row equals some reference row is estimated from the observed
frequencies: per column, the share of reference rows holding the row's value; across
columns their product, corrected for correlation by `rho`, the ratio of the observed to
the independent collision rate over the low-cardinality columns (correlated bands such as
radius and area collide more often than their product says). For n reference rows the
row matches with probability 1 - exp(-n q). A measured value (a column of more than
`COARSE_LEVELS` values, or mostly distinct ones) seen in one other row counts as unique,
so q is 0, so in any table with such a column every identical row is still
reported; in a table of bands, most are not. Within one split the frequencies leave the
row itself out. Frequencies come from seeded samples (`REFERENCE_SAMPLE`, `ROW_SAMPLE`),
so the cost does not grow with the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._hashing import column_hash, row_hashes
from trainmedic.rules._helpers.chance import Chance

REFERENCE_SAMPLE = 20_000
ROW_SAMPLE = 5_000
COARSE_LEVELS = 64  # a column with at most this many (repeating) values is a band/category, not a measurement
_SEED = 0


def measured(observed: int, expected: float, combinations: float) -> Chance:
    """The yardstick with the Poisson tail of `observed`: P(Poisson(expected) >= observed)."""
    from scipy.special import gammainc  # P(X >= k) = P(k, lambda), the regularised gamma

    if observed <= 0:
        return Chance(observed, expected, combinations, 1.0)
    p_value = float(gammainc(observed, expected)) if expected > 0 else 0.0
    return Chance(observed, expected, combinations, p_value)


def chance_across(
    reference: pd.DataFrame,
    rows: pd.DataFrame,
    columns: Sequence[str],
    observed: int,
    *,
    sizes: tuple[int, int] | None = None,
) -> Chance:
    """Rows of `rows` equal to some `reference` row by chance (two splits). `sizes` are the
    splits' row counts when the frames are samples of them (an out-of-core engine)."""
    if observed == 0:
        return measured(0, 0.0, float("inf"))
    reference_size, rows_size = sizes or (len(reference), len(rows))
    ref = _sample(reference, REFERENCE_SAMPLE)
    mine = _sample(rows, ROW_SAMPLE)
    probability, combinations = _match_probability(ref, mine, columns, reference_size, leave_one_out=False)
    return measured(observed, float(probability.mean() * rows_size), combinations)


def chance_within(
    frame: pd.DataFrame, columns: Sequence[str], observed: int, *, size: int | None = None
) -> Chance:
    """Rows of `frame` equal to another row of the same frame by chance. `size` is the
    split's row count when `frame` is a sample of it."""
    if observed == 0:
        return measured(0, 0.0, float("inf"))
    size = len(frame) if size is None else size
    sample = _sample(frame, REFERENCE_SAMPLE)
    probability, combinations = _match_probability(sample, sample, columns, size - 1, leave_one_out=True)
    return measured(observed, float(probability.mean() * size), combinations)


def _match_probability(
    reference: pd.DataFrame,
    rows: pd.DataFrame,
    columns: Sequence[str],
    size: int,
    *,
    leave_one_out: bool,
) -> tuple[npt.NDArray[np.float64], float]:
    """Per row of `rows`, the probability that one of `size` reference rows equals it."""
    m = len(reference) - (1 if leave_one_out else 0)
    if m <= 0 or size <= 0:
        return np.zeros(len(rows)), float("inf")
    log_q = np.zeros(len(rows))
    coarse = []
    independent_collision = 1.0
    for column in columns:
        ref_codes, row_codes, levels = _codes(reference[column], rows[column], leave_one_out)
        counts = np.bincount(ref_codes, minlength=levels).astype(np.float64)
        levels_seen = np.count_nonzero(counts)
        is_coarse = levels_seen <= COARSE_LEVELS and levels_seen <= len(reference) / 2  # values repeat
        # A measured value's one other occurrence is the copy under test, not evidence that
        # the value is common: it counts 0 (besides the row itself within a split).
        hits = counts[row_codes] - (1 if leave_one_out else 0) - (0 if is_coarse else 1)
        with np.errstate(divide="ignore"):
            log_q += np.log(np.maximum(hits, 0) / m)
        collision = float(np.sum(counts * (counts - 1)) / max(len(reference) * (len(reference) - 1), 1))
        independent_collision *= collision
        if is_coarse:
            coarse.append(column)
    rho = _correlation(reference, coarse)
    q = np.exp(log_q) * rho
    combinations = 1 / (independent_collision * rho) if independent_collision > 0 else float("inf")
    return np.asarray(-np.expm1(-size * np.minimum(q, 1.0)), dtype=np.float64), combinations


def _codes(
    reference: pd.Series, rows: pd.Series, same: bool
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], int]:
    """Shared integer codes of the values of both sides (missing is a value, as in the hashes)."""
    ref_hash = column_hash(reference)
    if same:
        codes, uniques = pd.factorize(ref_hash)
        return codes, codes, len(uniques)
    codes, uniques = pd.factorize(np.concatenate([ref_hash, column_hash(rows)]))
    return codes[: len(reference)], codes[len(reference) :], len(uniques)


def _correlation(reference: pd.DataFrame, coarse: list[str]) -> float:
    """Observed / independent collision rate of the coarse columns (>= 1 when they go together)."""
    if len(coarse) < 2 or len(reference) < 2:
        return 1.0
    pairs = len(reference) * (len(reference) - 1)
    _, joint = np.unique(row_hashes(reference, coarse), return_counts=True)
    observed = float(np.sum(joint * (joint - 1.0)) / pairs)
    independent = 1.0
    for column in coarse:
        _, counts = np.unique(column_hash(reference[column]), return_counts=True)
        independent *= float(np.sum(counts * (counts - 1.0)) / pairs)
    return max(1.0, observed / independent) if independent > 0 else 1.0


def _sample(frame: pd.DataFrame, limit: int) -> pd.DataFrame:
    if len(frame) <= limit:
        return frame
    rows = np.sort(np.random.default_rng(_SEED).choice(len(frame), limit, replace=False))
    return frame.iloc[rows]
