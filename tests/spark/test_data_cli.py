"""The real `trainmedic check data --engine spark` command: findings end to end, and bad input
(a missing path, an unreadable Parquet, an unreachable master, no Java, no pyspark) as one
line and exit 2, before or instead of a Java stack trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainmedic.cli.options import findings_exit_code
from trainmedic.data import check_report

from ..conftest import run_cli
from ..data.engine_cases import check_options, projection, split_overlap, write_case
from .conftest import java_missing

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

SPARK = ("--engine", "spark", "--spark-master", "local[2]", "--spark-conf", "spark.sql.shuffle.partitions=2")


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The usage error's text, after checking the contract: exit 2, one line, no output."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("trainmedic: error: ")
    return lines[0].removeprefix("trainmedic: error: ")


@pytest.mark.skipif(java_missing() is not None, reason=str(java_missing()))
def test_spark_engine_end_to_end_gives_the_pandas_findings(tmp_path: Path) -> None:
    case = split_overlap()
    del case.splits["test"]  # two splits: the command's whole path at the least Spark time
    paths = write_case(case, tmp_path)
    result = run_cli(
        "check", "data", str(paths["train"]), "--val", str(paths["val"]),
        "--label", "y", "--no-label-noise", "--format", "json", *SPARK,
        timeout=600,
    )  # fmt: skip
    pandas = check_report(**paths, **check_options(case), engine="pandas")
    assert result.returncode == findings_exit_code(pandas.findings, "error"), result.stderr
    assert result.stderr == ""  # Spark's own log and progress bars stay out of the terminal
    document = json.loads(result.stdout)
    assert document["summary"]["rows"] == pandas.summary.rows
    codes = [(f["code"], f["slug"], sorted(f["evidence"])) for f in document["findings"]]
    assert codes == [(p["code"], p["slug"], p["keys"]) for p in projection(pandas.findings)]
    assert ("DAT001", "split-overlap") in [(c, s) for c, s, _ in codes]


def test_a_missing_path_is_one_line_before_spark_starts(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.parquet"
    started = time.monotonic()
    message = one_line_error(run_cli("check", "data", str(missing), "--label", "y", *SPARK))
    assert message == f"{missing}: no such file or folder"
    assert time.monotonic() - started < 30  # no JVM was started for it


@pytest.mark.skipif(java_missing() is not None, reason=str(java_missing()))
def test_an_unreadable_parquet_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "train.parquet"
    bad.write_bytes(b"this is not parquet at all\n" * 20)
    message = one_line_error(run_cli("check", "data", str(bad), "--label", "y", *SPARK, timeout=300))
    assert message.startswith(f"{bad}: cannot read as parquet: ")
    assert "is not a Parquet file" in message  # Spark's own reason, not py4j's "An error occurred"


def test_an_unreachable_master_is_one_line_within_seconds(tmp_path: Path) -> None:
    train = write_case(split_overlap(), tmp_path)["train"]
    started = time.monotonic()
    result = run_cli(
        "check", "data", str(train), "--label", "y", "--engine", "spark", "--spark-master", "spark://127.0.0.1:1"
    )  # fmt: skip
    message = one_line_error(result)
    assert message.startswith("--spark-master spark://127.0.0.1:1: cannot connect (127.0.0.1:1: ")
    assert time.monotonic() - started < 30  # Spark's own client would retry for a minute


def test_no_java_is_one_line_saying_what_spark_needs(tmp_path: Path) -> None:
    train = write_case(split_overlap(), tmp_path)["train"]
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk"), "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "trainmedic", "check", "data", str(train), "--label", "y", *SPARK],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    message = one_line_error(result)
    assert message.startswith("--engine spark needs Java 17 or newer: no java at ")


def test_no_pyspark_is_one_line_with_the_install_command(tmp_path: Path) -> None:
    train = write_case(split_overlap(), tmp_path)["train"]
    code = (
        "import sys; sys.modules['pyspark'] = None\n"  # import pyspark now raises ImportError
        "from trainmedic.cli.main import main\n"
        f"sys.exit(main(['check', 'data', {str(train)!r}, '--label', 'y', '--engine', 'spark']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert one_line_error(result) == (
        "--engine spark needs pyspark: pip install pyspark (or, in trainmedic's checkout, "
        "pip install -e '.[spark]')"
    )
