"""DAT014: features scaled with statistics of all the data before it was split (measured here,
decided and worded by `trainmedic.rules.dat.dat014_preprocessing_before_split`).

A StandardScaler fitted on the training split leaves *train* at mean 0 and
standard deviation 1 to floating-point precision; one fitted on everything
leaves the *union* of the splits there and train only close to it. The same
holds for min-max scaling: the union spans exactly [0, 1], train does not. Both
are cheap to test from per-split sums (no concatenation), and an exact 0/1 is
no accident in real data.
"""

from __future__ import annotations

import pandas as pd

from trainmedic.data._answers import moments_of
from trainmedic.data._context import Dataset
from trainmedic.data._leakage import EVALUATION_SPLITS
from trainmedic.data._parity import kind
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat014_preprocessing_before_split as dat014


def preprocessing_before_split(data: Dataset) -> list[Finding]:
    """DAT014 from the moments of each split's numeric columns (train first)."""
    splits = [s for s in data.splits if s.name in EVALUATION_SPLITS]
    if len(splits) < 2:
        return []
    train = splits[0]
    numeric = [c for c in train.features if kind(train.frame[c]) == "number"]
    # a column numeric in train and text elsewhere is a schema mismatch (DAT010), not a scaling
    moments = {
        s.name: {c: moments_of(s.frame[c]) for c in numeric if _numeric_in(s.frame, c)} for s in splits
    }
    return dat014.judge(dat014.SplitMoments([s.name for s in splits], numeric, moments))


def _numeric_in(frame: pd.DataFrame, column: str) -> bool:
    return column in frame.columns and kind(frame[column]) == "number"
