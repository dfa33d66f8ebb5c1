"""One 64-bit hash per row, vectorised: the basis of every overlap and duplicate check.

`pandas.util.hash_pandas_object` hashes a column in C; combining the columns'
hashes is a few numpy operations, so a million rows x 20 columns hash in well
under a second and no Python loop ever runs over rows. With 64 bits, a chance
collision among 10^7 rows has probability ~3e-6: negligible for counting.

The *normalised* hash makes rows equal up to rounding, case and whitespace hash
equally: floats are rounded to `NEAR_SIGNIFICANT_BITS` bits of mantissa (relative
rounding, about 6 significant digits: a CSV export or a float32 cast), strings
are stripped, lower-cased and have inner whitespace collapsed. Strings are
normalised per distinct value (factorize first), so the cost follows the number
of distinct values, not of rows.

A re-export that rounds to a few decimals (12.3456 -> 12.3) moves a value much further
than 6 significant digits. `row_decimals` finds the later rows whose every float is
written with at most `ROUND_DECIMALS` decimals; `rounded_row_hashes` rounds the earlier
split to that many decimals (and folds text as above), so those rows are compared at the
precision they were written in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

U64 = npt.NDArray[np.uint64]
NEAR_SIGNIFICANT_BITS = 20
ROUND_DECIMALS = 3
_MIX = np.uint64(0x9E3779B97F4A7C15)


def row_hashes(frame: pd.DataFrame, columns: Sequence[str]) -> U64:
    """Exact hash of each row over `columns` (missing values hash alike)."""
    if not columns:
        return np.zeros(len(frame), dtype=np.uint64)
    combined = np.zeros(len(frame), dtype=np.uint64)
    for position, column in enumerate(columns):
        combined = _combine(combined, column_hash(frame[column]), position)
    return combined


def normalised_row_hashes(frame: pd.DataFrame, columns: Sequence[str]) -> U64:
    """Hash of each row after rounding floats and normalising strings."""
    if not columns:
        return np.zeros(len(frame), dtype=np.uint64)
    combined = np.zeros(len(frame), dtype=np.uint64)
    for position, column in enumerate(columns):
        combined = _combine(combined, column_hash(normalise(frame[column])), position)
    return combined


def rounded_row_hashes(frame: pd.DataFrame, columns: Sequence[str], decimals: int) -> U64:
    """Hash of each row with floats rounded to `decimals` decimals and text folded."""
    combined = np.zeros(len(frame), dtype=np.uint64)
    for position, column in enumerate(columns):
        series = frame[column]
        if pd.api.types.is_float_dtype(series.dtype):
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
            hashed = column_hash(pd.Series(np.rint(values * 10.0**decimals), index=series.index))
        else:
            hashed = column_hash(normalise(series))
        combined = _combine(combined, hashed, position)
    return combined


def row_decimals(frame: pd.DataFrame, columns: Sequence[str]) -> npt.NDArray[np.int64]:
    """Per row, the most decimals any of its floats is written with (ROUND_DECIMALS + 1 for
    'more'); missing values and rows without floats count 0. Rows with a float of full
    precision are ruled out column by column, so a table of measurements costs one pass."""
    floats = [c for c in columns if pd.api.types.is_float_dtype(frame[c].dtype)]
    out = np.zeros(len(frame), dtype=np.int64)
    rows = np.arange(len(frame))
    for column in floats:
        values = frame[column].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
        decimals = np.full(len(values), ROUND_DECIMALS + 1, dtype=np.int64)
        for d in range(ROUND_DECIMALS, -1, -1):
            scaled = values * 10.0**d
            exact = np.abs(scaled - np.rint(scaled)) <= 1e-9 * np.maximum(1.0, np.abs(scaled))
            decimals[exact] = d
        decimals[~np.isfinite(values)] = 0
        out[rows] = np.maximum(out[rows], decimals)
        rows = rows[decimals <= ROUND_DECIMALS]
        if len(rows) == 0:
            break
    return out  # rows ruled out keep ROUND_DECIMALS + 1 from the column that ruled them out


def column_hash(series: pd.Series) -> U64:
    """A hash per value; categorical and string columns hash by value, not by code."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        codes = series.cat.codes.to_numpy()
        category_hashes = pd.util.hash_array(series.cat.categories.astype(str).to_numpy(dtype=object))
        return _lookup(codes, category_hashes)
    if _is_text(series):
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        unique_hashes = pd.util.hash_array(np.asarray(uniques, dtype=object).astype(str).astype(object))
        return _lookup(codes, unique_hashes)
    if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
        # 3 in an int column and 3.0 in a float one (a split with a NaN) are the same value
        values = series.to_numpy(dtype=np.float64, na_value=np.nan) + 0.0  # -0.0 -> 0.0
        return np.asarray(pd.util.hash_array(values), dtype=np.uint64)
    hashed = pd.util.hash_pandas_object(series, index=False).to_numpy()
    return np.asarray(hashed, dtype=np.uint64)


def normalise(series: pd.Series) -> pd.Series:
    """The value a near-duplicate shares: relative rounding for floats, folded text."""
    if pd.api.types.is_float_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        mantissa, exponent = np.frexp(values)
        scale = float(2**NEAR_SIGNIFICANT_BITS)
        rounded = np.ldexp(np.round(mantissa * scale) / scale, exponent)
        return pd.Series(rounded, index=series.index)
    if _is_text(series) or isinstance(series.dtype, pd.CategoricalDtype):
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        folded = pd.Series(np.asarray(uniques, dtype=object)).astype(str)
        folded = folded.str.strip().str.lower().str.replace(r"\s+", " ", regex=True)
        values = np.asarray(folded.to_numpy(dtype=object), dtype=object)
        if len(values) == 0:
            return pd.Series(np.full(len(series), None, dtype=object), index=series.index, dtype=object)
        out = np.where(codes >= 0, values[np.maximum(codes, 0)], None)
        return pd.Series(out, index=series.index, dtype=object)
    return series


def _lookup(codes: npt.NDArray[np.intp], table: npt.NDArray[np.uint64]) -> U64:
    """table[code] per row; missing (-1) hashes to 0, also when every value is missing."""
    if len(table) == 0:
        return np.zeros(len(codes), dtype=np.uint64)
    out = np.where(codes >= 0, table[np.maximum(codes, 0)], np.uint64(0))
    return np.asarray(out, dtype=np.uint64)


def _is_text(series: pd.Series) -> bool:
    return bool(pd.api.types.is_object_dtype(series.dtype) or pd.api.types.is_string_dtype(series.dtype))


def _combine(acc: U64, column: U64, position: int) -> U64:
    """Order-sensitive mixing of column hashes into the row hash (uint64 wraps)."""
    with np.errstate(over="ignore"):
        salted = column ^ np.uint64((position + 1) * 0x100000001B3 & 0xFFFFFFFFFFFFFFFF)
        mixed = (acc ^ salted) * _MIX
        return np.asarray(mixed ^ (mixed >> np.uint64(29)), dtype=np.uint64)
