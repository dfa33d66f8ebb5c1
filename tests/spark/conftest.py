"""One local Spark for every Spark test (starting one costs seconds), skipped only without Java."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

# Small tables: one task per stage is fastest, and the settings a check runs with
# otherwise are the ones `trainmedic.spark._session` gives a local master.
TEST_SETTINGS = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
# Every JVM pyspark starts goes through spark-submit, whose launcher adds SPARK_SUBMIT_OPTS to
# the driver's java command (the session here, and those of the `trainmedic` commands and
# scripts these tests run). A test's JVM lives seconds: the C2 compiler and the parallel
# collector's threads cost more CPU than they win back (half the CPU of the parity cases on
# 2 cores); the bytecode run, and so every result, is the same.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def java_missing() -> str | None:
    """Why Spark cannot start here (no usable `java`), or None."""
    try:
        shown = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Spark needs Java 17: `java -version` failed ({exc})"
    if shown.returncode != 0:
        return f"Spark needs Java 17: `java -version` exited {shown.returncode}"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    from trainmedic.spark._session import active_session, spark_session

    running = active_session()
    session = running or spark_session("local[2]", TEST_SETTINGS)
    yield session
    if running is None:
        session.stop()
