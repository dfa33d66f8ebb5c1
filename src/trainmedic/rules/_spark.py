"""Which processes of a run are Spark's own, by their command lines.

A PySpark driver (`python train.py` with a local SparkSession, or the Python process
`spark-submit train.py` starts) works with processes Spark starts for it: the JVM (its
main class `org.apache.spark.deploy.SparkSubmit`, the gateway pyspark talks to through
py4j) and, for Python UDFs and RDD code, `python -m pyspark.daemon` with its forked
`pyspark.worker`s. The driver is the trainer; these work for it, and end with it: the JVM
when its stdin from the driver closes, the daemon with the JVM. Ending them after the
driver has exited is not a leak of the user's code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

_PYTHON_WORKER_MODULES = frozenset({"pyspark.daemon", "pyspark.worker"})


def is_spark_python_worker(cmdline: Sequence[str]) -> bool:
    """`python -m pyspark.daemon` (and its forks): Spark's Python workers, never a trainer."""
    args = list(cmdline[1:])
    while args and args[0].startswith("-") and args[0] != "-m":  # interpreter options (-u, -X ...)
        args.pop(0)
    return len(args) >= 2 and args[0] == "-m" and args[1] in _PYTHON_WORKER_MODULES


def is_spark_jvm(cmdline: Sequence[str]) -> bool:
    """A Spark JVM (driver gateway, local executor, spark-submit): java running org.apache.spark.*."""
    if not cmdline or PurePath(cmdline[0]).name.lower().removesuffix(".exe") != "java":
        return False
    return any(arg.startswith("org.apache.spark.") for arg in cmdline)


def is_spark_process(cmdline: Sequence[str]) -> bool:
    return is_spark_python_worker(cmdline) or is_spark_jvm(cmdline)
