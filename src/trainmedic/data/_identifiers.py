"""Identifier columns (DAT015): a key per row is not a feature, and its values are never
"unseen categories".

A column is taken for an identifier when it names a key (`id`, `customer_id`, `key`,
`uuid`...) and is nearly unique per row, or when it is short text unique per row (a
name, a code). Free text (several words per value) and measured numbers are unique per
row too, but they are features, so numbers count only under an identifier name or as a
consecutive sequence (a row counter). Identifiers are left out of the features (like
`--id`): overlap checks then compare what the rows *say*, not their keys, and schema and
drift checks do not read a fresh key per row as drift. Their values shared across splits
are counted, since a key that reappears names the same entity twice.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from trainmedic.data._context import Dataset
from trainmedic.data._leakage import split_pairs
from trainmedic.data._parity import kind
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat015_identifier_column as dat015
from trainmedic.rules.dat.dat015_identifier_column import IDENTIFIER_UNIQUE_FRACTION

MIN_ROWS = 20  # a handful of rows is unique by accident
_KEY_NAME = re.compile(
    r"(^|[_\W])(id|key|uuid|guid|identifier)$"  # id, customer_id, row-key
    r"|^(id|key|uuid|guid)([_\W]|$)"  # id_customer
    r"|[a-z](Id|ID|Key)$"  # CustomerID, userKey
)
_FREE_TEXT_WORDS = 4
_SAMPLE = 5_000


def looks_like_key_name(name: str) -> bool:
    """`id`, `customer_id`, `CustomerID`, `row-key`, `uuid`; not `width` or `valid`."""
    return bool(_KEY_NAME.search(name) or _KEY_NAME.search(name.lower()))


def identifier_columns(frame: pd.DataFrame, features: list[str]) -> dict[str, float]:
    """Feature columns of `frame` that are identifiers, with the fraction of distinct values."""
    found = {}
    for column in features:
        series = frame[column]
        if isinstance(series, pd.DataFrame) or kind(series) not in ("text", "number"):
            continue
        head = series.iloc[:_SAMPLE].dropna()  # cheap first look: most columns repeat early
        if len(head) < MIN_ROWS or head.nunique() < IDENTIFIER_UNIQUE_FRACTION * len(head):
            continue
        if not _is_key(column, head):
            continue
        known = series.dropna()
        distinct = known.nunique() / len(known)
        if distinct >= IDENTIFIER_UNIQUE_FRACTION and _is_key(column, known):
            found[column] = round(float(distinct), 6)
    return found


def _is_key(name: str, values: pd.Series) -> bool:
    family = kind(values)
    if family == "text":
        if looks_like_key_name(name):
            return True
        sample = values.iloc[:1000].astype(str)
        return bool(sample.str.split().str.len().median() < _FREE_TEXT_WORDS)
    if family == "number":
        numbers = values.to_numpy(dtype=np.float64)
        if not np.all(np.mod(numbers, 1) == 0):
            return False  # measurements, not keys
        if looks_like_key_name(name):
            return True
        span = numbers.max() - numbers.min() + 1
        return bool(span <= 1.05 * len(numbers))  # a row counter: consecutive integers
    return False


def identifier_column(data: Dataset) -> list[Finding]:
    """DAT015: each identifier among the train columns; shared values across splits counted."""
    found = []
    for column, distinct in data.identifiers.items():
        shared = {}
        for earlier, later in split_pairs(data):
            if column in earlier.frame.columns and column in later.frame.columns:
                values = later.frame[column].dropna()
                count = int(values.isin(earlier.frame[column].dropna()).sum())
                if count:
                    shared[f"{earlier.name}/{later.name}"] = count
        found.extend(dat015.judge(identifier(column, distinct, shared)))
    return found


def identifier(column: str, distinct: float, shared: dict[str, int]) -> dat015.Identifier:
    """DAT015's evidence for one identifier column; `shared` counts its values recurring per split pair."""
    return dat015.Identifier(column, distinct, shared, looks_like_key_name(column))
