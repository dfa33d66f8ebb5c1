"""Parity: the Spark engine gives the pandas engine's findings on every case of
`tests/data/engine_cases` (a real local Spark reading the cases' Parquet files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.data import check_report

from ..data.engine_cases import CASES, check_options, projection, write_case

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


@pytest.mark.parametrize("make", CASES, ids=lambda make: make.__name__)
def test_spark_gives_the_pandas_findings(make, spark, tmp_path: Path) -> None:
    case = make()
    paths = write_case(case, tmp_path)
    options = check_options(case)
    pandas = check_report(**paths, **options, engine="pandas")
    on_spark = check_report(**paths, **options, engine="spark")
    assert projection(on_spark.findings) == projection(pandas.findings)
    assert sorted(f.message for f in on_spark.findings if f.code != "DAT014") == sorted(
        f.message
        for f in pandas.findings
        if f.code != "DAT014"  # DAT014 prints sums at 1e-17
    )
    assert on_spark.summary.rows == pandas.summary.rows
    assert on_spark.summary.notes == pandas.summary.notes
    assert on_spark.summary.label_distribution == pandas.summary.label_distribution
