"""One local Spark for every Spark test (starting one costs seconds), skipped only without Java."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

# Small tables: one task per stage is fastest, and the settings a check runs with
# otherwise are the ones `trainmedic.spark._session` gives a local master.
TEST_SETTINGS = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}


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
