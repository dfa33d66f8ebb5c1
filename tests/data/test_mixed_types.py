"""A column numeric in train with one text value in another split (a real table, one cell
changed as a typo or a code would change it, written to CSV and Parquet as users write them):
a `schema-mismatch` finding naming the column, never a traceback, in every engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainmedic.data import check_report
from trainmedic.findings import Finding

from .real import LABEL, table, user_split

COLUMN = "magnesium"


def _mixed(tmp_path: Path, fmt: str) -> tuple[Path, Path]:
    train, val = user_split(table("wine"))
    val[COLUMN] = val[COLUMN].astype(object)
    val.loc[5, COLUMN] = "rotary"  # one validation row holds text where train holds numbers
    paths = tmp_path / f"train.{fmt}", tmp_path / f"val.{fmt}"
    if fmt == "csv":
        train.to_csv(paths[0], index=False)
        val.to_csv(paths[1], index=False)
    else:  # Parquet holds one type per column: the column is text in val
        train.to_parquet(paths[0], index=False)
        val.astype({COLUMN: str}).to_parquet(paths[1], index=False)
    return paths


def _column_changed(findings: list[Finding], split: str = "val") -> dict[str, object]:
    (finding,) = [f for f in findings if f.code == "DAT010" and f.evidence.get("dtype_changes")]
    assert finding.evidence["split"] == split
    changes: dict[str, object] = finding.evidence["dtype_changes"]
    return changes


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_a_text_value_in_a_numeric_column_is_a_schema_mismatch(tmp_path: Path, fmt: str, engine: str) -> None:
    if engine == "duckdb":
        pytest.importorskip("duckdb")
    train, val = _mixed(tmp_path, fmt)
    report = check_report(train, val, label=LABEL, engine=engine)  # every check, label noise too
    assert _column_changed(report.findings) == {COLUMN: {"train": "number", "val": "text"}}
    (finding,) = [f for f in report.findings if f.code == "DAT010"]
    assert finding.evidence["text_in_numbers"] == {
        COLUMN: {"rows": 1, "fraction": round(1 / 45, 6), "examples": ["rotary"]}
    }
    assert f"{COLUMN!r} holds text in 1 of 45 rows where train holds numbers: 'rotary'" in finding.message


def test_the_cli_reports_it_without_a_traceback(tmp_path: Path) -> None:
    train, val = _mixed(tmp_path, "csv")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainmedic",
            "check",
            "data",
            str(train),
            "--val",
            str(val),
            "--label",
            LABEL,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    assert "DAT010 schema-mismatch" in done.stdout
    assert "'magnesium' holds text in 1 of 45 rows where train holds numbers: 'rotary'" in done.stdout


def test_the_frame_api_reports_it_too() -> None:
    train, val = user_split(table("wine"))
    val[COLUMN] = val[COLUMN].astype(object)
    val.loc[5, COLUMN] = "rotary"
    report = check_report(train, val, label=LABEL)
    assert _column_changed(report.findings) == {COLUMN: {"train": "number", "val": "text"}}
