"""Queries and Spark jobs of one `check data --engine spark`, for each engine parity case.

Every query the Spark engine runs is at least one Spark job (one per shuffle stage, with
adaptive execution), and on the parity cases' tables of a few hundred rows its fixed cost
(planning, scheduling, a task per partition) is most of a check's time. The count does not
depend on the machine's load, unlike the seconds printed beside it. Counted on one local
Spark (`local[2]`, 2 shuffle partitions, as the tests run): the engine's `rows`/`frame`
calls and the jobs Spark's status tracker saw start.

    python benchmarks/spark_check_queries.py                  # every case
    python benchmarks/spark_check_queries.py split_overlap    # some of them
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.data.engine_cases

os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")  # as tests/spark

from tests.data.engine_cases import CASES, check_options, write_case

from trainmedic.data import check_report
from trainmedic.spark import data as spark_data
from trainmedic.spark._session import spark_session

QUERIES: collections.Counter[str] = collections.Counter()


def counted(method: Any, name: str) -> Any:
    def call(self: Any, sql: str) -> Any:
        QUERIES[name] += 1
        return method(self, sql)

    return call


def main(names: list[str]) -> None:
    session = spark_session(
        "local[2]", {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    )
    tracker = session.sparkContext.statusTracker()

    def jobs_started() -> int:
        ids = tracker.getJobIdsForGroup()  # jobs outside a job group: every job of a check
        return max(ids) + 1 if ids else 0

    for name in ("rows", "frame"):
        setattr(spark_data.SparkRunner, name, counted(getattr(spark_data.SparkRunner, name), name))
    total_queries = total_jobs = 0
    for make in CASES:
        if names and make.__name__ not in names:
            continue
        case = make()
        with tempfile.TemporaryDirectory() as folder:
            paths: dict[str, Any] = dict(write_case(case, Path(folder)))
            QUERIES.clear()
            before, started = jobs_started(), time.perf_counter()
            check_report(**paths, **check_options(case), engine="spark")
            seconds, jobs = time.perf_counter() - started, jobs_started() - before
        queries = sum(QUERIES.values())
        total_queries, total_jobs = total_queries + queries, total_jobs + jobs
        print(f"{make.__name__:30s} {queries:4d} queries {jobs:5d} jobs {seconds:6.1f} s", flush=True)
    print(f"{'all':30s} {total_queries:4d} queries {total_jobs:5d} jobs")
    session.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
