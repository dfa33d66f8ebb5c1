"""Parity: the DuckDB engine gives the pandas engine's findings on every case of
`engine_cases` (real DuckDB over Parquet and CSV files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.data import check_report
from trainmedic.findings import Severity

from .engine_cases import CASES, check_options, projection, write_case

pytest.importorskip("duckdb")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("make", CASES, ids=lambda make: make.__name__)
def test_duckdb_gives_the_pandas_findings(make, fmt: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    case = make()
    paths = write_case(case, tmp_path, fmt)
    options = check_options(case)
    pandas = check_report(**paths, **options, engine="pandas")
    duckdb = check_report(**paths, **options, engine="duckdb")
    serious = [f.code for f in pandas.findings if f.severity.at_least(Severity.WARNING)]
    if case.code is None:
        assert serious == [], [f.message for f in pandas.findings]
    else:
        assert case.code in [f.code for f in pandas.findings], [f.message for f in pandas.findings]
    assert projection(duckdb.findings) == projection(pandas.findings)
    same_words = [f for f in pandas.findings if f.code != "DAT014"]  # DAT014 prints sums at 1e-17
    assert sorted(f.message for f in duckdb.findings if f.code != "DAT014") == sorted(
        f.message for f in same_words
    )
    assert duckdb.summary.rows == pandas.summary.rows
    assert duckdb.summary.notes == pandas.summary.notes
    assert duckdb.summary.label_distribution == pandas.summary.label_distribution
