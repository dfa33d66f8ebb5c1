"""The engine choice (`auto`), the options around it, and bad input to the DuckDB engine:
one line naming the file or option, exit 2, no traceback (real DuckDB, real CLI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from trainmedic.data import check_report
from trainmedic.data.engines import choose_engine, memory_budget, parse_size
from trainmedic.errors import UsageError

from .synth import clean_table

pytest.importorskip("duckdb")


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "train.parquet"
    clean_table(500, 0).to_parquet(path, index=False)
    return path


def test_auto_keeps_pandas_within_the_budget_and_streams_beyond(table: Path) -> None:
    size = table.stat().st_size
    assert choose_engine("auto", {"train": table}, budget=100 * 2**20) == "pandas"
    assert choose_engine("auto", {"train": table}, budget=size) == "duckdb"  # 3 x size does not fit
    assert choose_engine("auto", {"train": table.parent}, budget=100 * 2**20) == "pandas"  # a folder of parts
    assert choose_engine("auto", {"train": table.parent}, budget=size) == "duckdb"
    assert choose_engine("auto", {"train": pd.DataFrame({"a": [1]})}, budget=1) == "pandas"
    assert choose_engine("duckdb", {"train": table}, budget=2**40) == "duckdb"


def test_the_smallest_budget_streams_and_reports_the_same_as_pandas(table: Path) -> None:
    loaded = check_report(table, label="y", label_noise=False, memory_budget="512MiB")
    streamed = check_report(table, label="y", label_noise=False, memory_budget="512MiB", engine="duckdb")
    assert [f.code for f in streamed.findings] == [f.code for f in loaded.findings]
    assert streamed.summary.rows == {"train": 500}


def test_sizes_and_budget() -> None:
    assert parse_size("2GiB") == 2 * 2**30
    assert parse_size("512MB") == 512 * 2**20
    assert parse_size("1.5g") == int(1.5 * 2**30)
    assert parse_size("1000") == 1000
    assert memory_budget("1GiB") == 2**30
    assert memory_budget(512 * 2**20) == 512 * 2**20
    with pytest.raises(UsageError, match=r"--memory-budget 'lots': expected a size"):
        parse_size("lots")
    with pytest.raises(UsageError, match=r"--memory-budget '100MiB': expected at least 512MiB"):
        memory_budget("100MiB")


def test_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope.parquet: no such file or folder"):
        check_report(tmp_path / "nope.parquet", label="y", engine="duckdb")


def test_an_unreadable_parquet_names_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not parquet at all")
    with pytest.raises(UsageError, match=r"broken.parquet: cannot read"):
        check_report(broken, label="y", engine="duckdb")


def test_a_folder_of_mixed_formats_is_refused(tmp_path: Path) -> None:
    clean_table(50, 0).to_parquet(tmp_path / "a.parquet")
    clean_table(50, 1).to_csv(tmp_path / "b.csv")
    with pytest.raises(UsageError, match=r"expected a folder of table files of one format"):
        check_report(tmp_path, label="y", engine="duckdb")


def test_a_folder_of_parts_is_one_split_with_exact_row_numbers_in_every_engine(tmp_path: Path) -> None:
    frame = clean_table(300, 0)
    parts = tmp_path / "train"
    parts.mkdir()
    frame.iloc[:100].to_parquet(parts / "part-0.parquet", index=False)
    pd.concat([frame.iloc[100:300], frame.iloc[[5, 6]]]).to_parquet(parts / "part-1.parquet", index=False)
    for engine in ("duckdb", "pandas"):
        report = check_report(parts, label="y", label_noise=False, engine=engine)
        duplicate = next(f for f in report.findings if f.code == "DAT007")
        assert duplicate.evidence["example_rows"] == [300, 301]  # the rows after the first file's 100 and 200


def test_a_dataframe_is_not_for_duckdb() -> None:
    with pytest.raises(UsageError, match=r"train: the duckdb engine reads files"):
        check_report(clean_table(50, 0), label="y", engine="duckdb")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainmedic", "check", "data", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_bad_input_is_one_line_and_exit_2(table: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    for args, expected in [
        (
            (str(tmp_path / "missing.parquet"), "--label", "y", "--engine", "duckdb"),
            "missing.parquet: no such file",
        ),
        ((str(broken), "--label", "y", "--engine", "duckdb"), "broken.parquet: cannot read"),
        ((str(table), "--label", "y", "--spark-conf", "nokey"), "--spark-conf 'nokey': expected KEY=VALUE"),
        ((str(table), "--label", "y", "--memory-budget", "x"), "--memory-budget 'x': expected a size"),
        (
            (str(table), "--label", "y", "--memory-budget", "100MiB"),
            "--memory-budget '100MiB': expected at least 512MiB",
        ),
    ]:
        done = _cli(*args)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert expected in done.stderr


def test_cli_duckdb_engine_runs(table: Path) -> None:
    done = _cli(str(table), "--label", "y", "--engine", "duckdb", "--no-label-noise", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    assert '"train": 500' in done.stdout


def test_a_time_column_that_is_not_times_names_the_option(tmp_path: Path) -> None:
    frame = clean_table(50, 0).assign(when="not a date")
    frame.to_parquet(tmp_path / "train.parquet", index=False)
    frame.to_parquet(tmp_path / "val.parquet", index=False)
    with pytest.raises(UsageError, match=r"--time 'when' in train: cannot parse as a timestamp"):
        check_report(
            tmp_path / "train.parquet", tmp_path / "val.parquet", label="y", time="when", engine="duckdb"
        )


def test_sampled_checks_say_how_many_rows_they_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import trainmedic.data.engines._checks as engine_checks

    monkeypatch.setattr(engine_checks, "SAMPLE_ROWS", 400)
    frame = clean_table(1000, 0)
    frame["refund_issued"] = frame["y"].map({0: "no", 1: "yes"})
    frame = pd.concat([frame, frame.iloc[:30]], ignore_index=True)
    frame.to_parquet(tmp_path / "train.parquet", index=False)
    report = check_report(tmp_path / "train.parquet", label="y", label_noise=False, engine="duckdb")
    leak = next(f for f in report.findings if f.code == "DAT005")
    assert leak.evidence["sampled_rows"] == {"train": 400}
    duplicates = next(f for f in report.findings if f.code == "DAT007")
    assert duplicates.evidence["duplicate_rows"] == 30  # exact: every row counted
    assert "sampled_rows" not in duplicates.evidence
    assert any("seeded samples of 400 rows of train" in note for note in report.summary.notes)


def test_a_csv_written_with_its_index_names_the_column_as_pandas_does(tmp_path: Path) -> None:
    frame = clean_table(600, 0)
    frame = frame[frame["kind"] != "c"]  # filtered, then `to_csv()` as written by default: index and all
    frame.iloc[:300].to_csv(tmp_path / "train.csv")
    frame.iloc[300:].to_csv(tmp_path / "val.csv")
    reports = [
        check_report(
            tmp_path / "train.csv", tmp_path / "val.csv", label="y", label_noise=False, engine=engine
        )
        for engine in ("pandas", "duckdb")
    ]
    pandas, duckdb = ([f.message for f in r.findings] for r in reports)
    assert any("'Unnamed: 0'" in m for m in pandas), pandas  # a feature to whoever reads the file back
    assert duckdb == pandas
