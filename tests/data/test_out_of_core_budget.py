"""The DuckDB check within any budget from 512 MiB: the budget is split in proportion between
DuckDB and Python, and a Parquet row group larger than DuckDB's share is read column by
column instead of ending the check out of memory (real DuckDB, the real check)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trainmedic.data import check_report
from trainmedic.data.engines import ROW, open_table_engine
from trainmedic.data.engines._budget import DUCKDB_SHARE, FLOOR, MAX_SAMPLE_ROWS, shares

from .synth import clean_table

pytest.importorskip("duckdb")

ROWS, COLUMNS, REPEATED = 300_000, 110, 300
MiB = 2**20


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300,000 rows x 110 float columns written by pandas in one row group (264 MB, as pyarrow
    writes any frame of up to a million rows), which DuckDB read at once: more than the whole
    limit that a fixed 768 MiB reserve for Python left it of a 512 MiB budget (256 MiB), and
    the check ended "duckdb ran out of its memory limit (0.2 GiB) and could not spill"."""
    rng = np.random.default_rng(0)
    values = rng.normal(size=(ROWS - REPEATED, COLUMNS))
    values = np.vstack([values, values[:REPEATED]])  # 300 exact copies: DAT007 counts every row
    frame = pd.DataFrame(values, columns=[f"x{i}" for i in range(COLUMNS)])
    frame["y"] = (frame["x0"] + frame["x1"] > 0).astype("int64")
    path = tmp_path_factory.mktemp("wide") / "train.parquet"
    frame.to_parquet(path, index=False)
    return path


def test_a_row_group_larger_than_duckdbs_share_is_checked_within_the_smallest_budget(wide: Path) -> None:
    report = check_report(wide, label="y", label_noise=False, engine="duckdb", memory_budget="512MiB")
    duplicates = next(f for f in report.findings if f.code == "DAT007")
    assert duplicates.evidence["duplicate_rows"] == REPEATED  # exact: every row counted
    assert report.summary.rows == {"train": ROWS}
    sampled = next(n for n in report.summary.notes if "seeded samples of" in n)
    size = int(re.search(r"samples of ([\d,]+) rows", sampled).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert size < MAX_SAMPLE_ROWS  # the Python side's sample shrinks with the budget


def _settings(path: Path, budget: int) -> dict[str, str]:
    engine = open_table_engine("duckdb", {"train": path}, budget=budget)
    try:
        names = ("memory_limit", "threads", "disable_parquet_prefetching", "preserve_insertion_order")
        rows = engine.runner.rows(  # type: ignore[attr-defined]
            f"SELECT name, value FROM duckdb_settings() WHERE name IN ({', '.join(repr(n) for n in names)})"
        )
        return {str(name): str(value) for name, value in rows}
    finally:
        engine.close()


def _mib(setting: str) -> float:
    number, unit = setting.split()
    return float(number) * {"MiB": 1, "GiB": 1024}[unit]


def test_the_budget_is_split_in_proportion(wide: Path) -> None:
    small, large = _settings(wide, FLOOR), _settings(wide, 4 * FLOOR)
    assert _mib(small["memory_limit"]) == pytest.approx(DUCKDB_SHARE * FLOOR / MiB, rel=0.01)
    assert _mib(large["memory_limit"]) == pytest.approx(4 * _mib(small["memory_limit"]), rel=0.01)
    assert small["threads"] == "1"  # a thread per 128 MiB of DuckDB's share
    assert small["disable_parquet_prefetching"] == "true"  # a 264 MB row group is read column by column
    assert small["preserve_insertion_order"] == "false"  # Parquet carries its own row numbers
    for budget in (FLOOR, 2 * FLOOR, 4 * FLOOR, 64 * FLOOR):
        split = shares(budget, cpus=64)
        assert split.duckdb + split.python == budget
        assert split.duckdb == int(DUCKDB_SHARE * budget)
        assert split.threads == min(64, max(1, split.duckdb // (128 * MiB)))
    rows = [shares(b).sample_rows(columns=21, splits=2) for b in (FLOOR, 2 * FLOOR, 4 * FLOOR)]
    assert rows == sorted(rows)
    assert rows[0] < rows[-1] == MAX_SAMPLE_ROWS


def test_a_sample_is_the_rows_of_the_smallest_hashes_read_in_one_stream(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    clean_table(5000, 0).to_parquet(path, index=False)
    engine = open_table_engine("duckdb", {"train": path}, budget=FLOOR)
    try:
        sample = engine.sample("train", 400, seed=3)
        everything = engine.runner.frame(  # type: ignore[attr-defined]
            f'SELECT {ROW} FROM "tm_train" ORDER BY hash({ROW} + 3) LIMIT 400'
        )
    finally:
        engine.close()
    assert len(sample) == 400
    assert list(sample.index) == sorted(everything[ROW])
