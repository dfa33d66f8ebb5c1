"""How many identical feature rows chance alone gives: the yardstick of DAT001, DAT002, DAT006,
DAT007 (measured here; `trainmedic.evidence.chance` decides and words it).

In a table of a few categorical columns (sex, class, age band) different people share
every attribute: 2 x 3 x 5 = 30 possible rows, and a random split puts most of them in
both parts. Only identical rows *beyond* what the feature space explains point at copies.

The chance that a row equals some reference row is estimated from the observed
frequencies: per column, the share of reference rows holding the row's value; across
columns their product, corrected for correlation by `rho`, the ratio of the observed to
the independent collision rate over the low-cardinality columns (correlated bands such as
radius and area collide more often than their product says). For n reference rows the
row matches with probability 1 - exp(-n q). A measured value (a column of more than
`COARSE_LEVELS` values held by fewer than `BAND_REPEATS` rows each on average, or mostly
distinct ones) seen in one other row counts as unique,
so q is 0, so in any table with such a column every identical row is still
reported; in a table of bands, most are not. Within one split the frequencies leave the
row itself out. Frequencies come from seeded samples (`REFERENCE_SAMPLE`, `ROW_SAMPLE`),
so the cost does not grow with the table.

Near-duplicates (DAT002) are rows equal once normalised (floats rounded to the decimals the
later row is written with, or to ~6 significant digits; text folded) but not exactly. Their
chance is, per row, the probability of a match in the normalised feature space less that of
an exact match: rounding an age of 28.5 to 28 merges two values, and different people then
share every rounded attribute as often as the coarser space says. A measured column's
values, unique as frequencies, still meet in one rounding bin as often as their density
near the value times the bin's width says (`rounding_collision`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._hashing import (
    NEAR_SIGNIFICANT_BITS,
    ROUND_DECIMALS,
    column_hash,
    normalise,
    row_decimals,
    row_hashes,
)
from trainmedic.evidence.chance import Chance

REFERENCE_SAMPLE = 20_000
ROW_SAMPLE = 5_000
COARSE_LEVELS = 64  # a column with at most this many (repeating) values is a band/category, not a measurement
# ... and so is one whose values each hold this many rows on average, however many there are
# (ages in years over a few hundred people): a measurement at its recording precision repeats
# less, and its one other occurrence is then the copy under test.
BAND_REPEATS = 3
# Neighbours of a measured value used to estimate how densely the reference holds values
# near it (a k-nearest-neighbour density estimate: a few neighbours, so the estimate is
# local, yet not one, whose distance alone is too noisy).
DENSITY_NEIGHBOURS = 8
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


def chance_near(
    reference: pd.DataFrame,
    rows: pd.DataFrame,
    columns: Sequence[str],
    observed: int,
    *,
    sizes: tuple[int, int] | None = None,
) -> Chance:
    """Rows of `rows` equal to some `reference` row once normalised, not exactly, by chance
    (two splits): P(normalised match) - P(exact match) per row. `sizes` as in `chance_across`."""
    if observed == 0:
        return measured(0, 0.0, float("inf"))
    reference_size, rows_size = sizes or (len(reference), len(rows))
    ref = _sample(reference, REFERENCE_SAMPLE)
    mine = _sample(rows, ROW_SAMPLE)
    near = np.zeros(len(mine))
    exact = np.zeros(len(mine))
    floats = [c for c in columns if pd.api.types.is_float_dtype(mine[c].dtype)]
    decimals = row_decimals(mine, floats)
    decimals[decimals > ROUND_DECIMALS] = -1  # compared at ~6 significant digits
    combinations, most = float("inf"), 0
    for d in np.unique(decimals):
        chosen = decimals == d
        precision = None if d < 0 else int(d)
        rounded = normalised_frame(ref, columns, precision)
        # A value is a band or a measurement as the rounded space sees it, on both sides: an
        # age of 28 is one band of ages in years whether or not some rows say 28.5.
        coarse = coarse_columns(rounded, columns)
        floors = {
            column: rounding_collision(ref[column], mine.loc[chosen, column], precision)
            for column in floats
            if column not in coarse
        }
        near[chosen], space = _match_probability(
            rounded,
            normalised_frame(mine[chosen], columns, precision),
            columns,
            reference_size,
            leave_one_out=False,
            coarse=coarse,
            floors=floors,
        )
        exact[chosen], _ = _match_probability(
            ref, mine[chosen], columns, reference_size, leave_one_out=False, coarse=coarse
        )
        if int(chosen.sum()) > most:  # the space most rows are compared in
            combinations, most = space, int(chosen.sum())
    return measured(observed, float(np.maximum(near - exact, 0.0).mean() * rows_size), combinations)


def rounding_collision(
    reference: pd.Series, rows: pd.Series, decimals: int | None
) -> npt.NDArray[np.float64]:
    """Per value of `rows`, the probability that one reference value of a measured float column
    rounds to the same value by chance: the reference's density near it (k nearest neighbours)
    times the width of the rounding bin (10^-decimals, or the 2^-20 relative step of ~6
    significant digits). A measured value seen once counts 0 in the frequencies, yet two
    different people's measurements do share 6 significant digits now and then: two draws of a
    standard normal near 0.5 do so about once in 6 million pairs, so one table in a hundred
    with 300 x 100 rows across two splits and that one column holds such a pair.
    """
    values = rows.to_numpy(dtype=np.float64, na_value=np.nan)
    known = np.sort(reference.to_numpy(dtype=np.float64, na_value=np.nan))
    known = known[np.isfinite(known)]
    out = np.zeros(len(values))
    k = min(DENSITY_NEIGHBOURS, len(known))
    finite = np.isfinite(values)
    if k == 0 or not finite.any():
        return out
    if decimals is None:
        _, exponent = np.frexp(values[finite])
        width = np.ldexp(1.0, exponent - NEAR_SIGNIFICANT_BITS)
    else:
        width = np.full(int(finite.sum()), 10.0**-decimals)
    # the k-th nearest reference value lies among the k on each side of the insertion point
    at = np.searchsorted(known, values[finite])
    window = np.clip(at[:, None] + np.arange(-k, k)[None, :], 0, len(known) - 1)
    distances = np.sort(np.abs(known[window] - values[finite][:, None]), axis=1)[:, k - 1]
    density = k / (len(known) * 2.0 * np.maximum(distances, width / 2))
    out[finite] = np.minimum(density * width, 1.0)
    return out


def normalised_frame(frame: pd.DataFrame, columns: Sequence[str], decimals: int | None) -> pd.DataFrame:
    """`columns` as the near-duplicate hashes see them: floats rounded to `decimals` decimals
    (None: ~6 significant digits), text stripped and lower-cased."""
    out = {}
    for column in columns:
        series = frame[column]
        if decimals is not None and pd.api.types.is_float_dtype(series.dtype):
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
            out[column] = pd.Series(np.rint(values * 10.0**decimals), index=series.index)
        else:
            out[column] = normalise(series)
    return pd.DataFrame(out, index=frame.index)


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
    coarse: frozenset[str] | None = None,
    floors: dict[str, npt.NDArray[np.float64]] | None = None,
) -> tuple[npt.NDArray[np.float64], float]:
    """Per row of `rows`, the probability that one of `size` reference rows equals it.
    `coarse`: the band columns (by default those `coarse_columns` finds in `reference`).
    `floors`: per measured column, the per-row chance of a match by rounding alone
    (`rounding_collision`), used where the frequencies say less."""
    m = len(reference) - (1 if leave_one_out else 0)
    if m <= 0 or size <= 0:
        return np.zeros(len(rows)), float("inf")
    bands = coarse_columns(reference, columns) if coarse is None else coarse
    log_q = np.zeros(len(rows))
    independent_collision = 1.0
    for column in columns:
        ref_codes, row_codes, levels = _codes(reference[column], rows[column], leave_one_out)
        counts = np.bincount(ref_codes, minlength=levels).astype(np.float64)
        is_coarse = column in bands
        # A measured value's one other occurrence is the copy under test, not evidence that
        # the value is common: it counts 0 (besides the row itself within a split).
        hits = counts[row_codes] - (1 if leave_one_out else 0) - (0 if is_coarse else 1)
        share = np.maximum(hits, 0) / m
        if floors and column in floors:
            share = np.maximum(share, floors[column])
        with np.errstate(divide="ignore"):
            log_q += np.log(share)
        collision = float(np.sum(counts * (counts - 1)) / max(len(reference) * (len(reference) - 1), 1))
        independent_collision *= collision
    rho = _correlation(reference, [c for c in columns if c in bands])
    q = np.exp(log_q) * rho
    combinations = 1 / (independent_collision * rho) if independent_collision > 0 else float("inf")
    return np.asarray(-np.expm1(-size * np.minimum(q, 1.0)), dtype=np.float64), combinations


def coarse_columns(reference: pd.DataFrame, columns: Sequence[str]) -> frozenset[str]:
    """The columns of `reference` that hold bands: at most `COARSE_LEVELS` values, repeating."""
    bands = set()
    for column in columns:
        levels = int(pd.Series(column_hash(reference[column])).nunique())
        repeats = len(reference) / max(levels, 1)
        if (levels <= COARSE_LEVELS and repeats >= 2) or repeats >= BAND_REPEATS:
            bands.add(column)
    return frozenset(bands)


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
