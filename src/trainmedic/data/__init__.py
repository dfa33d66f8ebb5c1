"""Data readiness before training: `trainmedic.data.check(train, val, test, ...)`.

Leakage across splits, duplicates, conflicting and noisy labels, imbalance,
missing values, schema and drift, on pandas DataFrames or table files; image
datasets (class-per-folder trees or CSVs of paths) through `check_images`.
Leakage-free splits with `split` and `nested_cv`.
"""

from __future__ import annotations

from trainmedic.data.readers import read_table
from trainmedic.data.runner import CHECKS, DataReport, check, check_report
from trainmedic.data.summary import DataSummary

__all__ = ["CHECKS", "DataReport", "DataSummary", "check", "check_report", "read_table"]
