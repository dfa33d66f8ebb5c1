"""Data readiness before training: `trainmedic.data.check(train, val, test, ...)`.

Leakage across splits, duplicates, conflicting and noisy labels, imbalance,
missing values, schema and drift, on pandas DataFrames or table files; image
datasets (class-per-folder trees or CSVs of paths) through `check_images`.
Leakage-free splits with `split` and `nested_cv`.
"""

from __future__ import annotations

from trainmedic.data.images import read_images
from trainmedic.data.readers import read_table
from trainmedic.data.runner import CHECKS, DataReport, check, check_report
from trainmedic.data.splits import NestedFold, nested_cv, split
from trainmedic.data.summary import DataSummary


def check_images(*args: object, **kwargs: object) -> DataReport:
    """Image datasets (folders or CSVs of paths): see `image_checks.check_images_report`."""
    from trainmedic.data.image_checks import check_images_report

    return check_images_report(*args, **kwargs)  # type: ignore[arg-type]


__all__ = [
    "CHECKS",
    "DataReport",
    "DataSummary",
    "NestedFold",
    "check",
    "check_images",
    "check_report",
    "nested_cv",
    "read_images",
    "read_table",
    "split",
]
