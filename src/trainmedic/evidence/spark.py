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

import re
from collections.abc import Sequence
from dataclasses import dataclass
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


def is_spark_helper(cmdline: Sequence[str]) -> bool:
    """A process that works for the driver and is never the trainer: the Python workers, and the
    start-up steps of `spark-submit` (`find_spark_home.py`, the `org.apache.spark.launcher.Main`
    JVM that builds the real command line) that run before the driver exists."""
    if is_spark_python_worker(cmdline):
        return True
    if any(PurePath(arg).name == "find_spark_home.py" for arg in cmdline[1:3]):
        return True
    return is_spark_jvm(cmdline) and "org.apache.spark.launcher.Main" in cmdline


# -- executor losses, as the driver's log reports them ------------------------------------------
# The scheduler's own words (stable across Spark 3 and 4): TaskSchedulerImpl's
# "Lost executor 1 on 10.0.0.5: <reason>", TaskSetManager's "Lost task 0.0 in stage 3.0 (TID 7)
# (10.0.0.5 executor 1): <error>", with "ExecutorLostFailure (executor 1 exited caused by one of
# the running tasks) Reason: <reason>" as the error of a task whose executor died, and
# Kubernetes' "The executor with id 2 exited with exit code 137(SIGKILL, possible container OOM)".
# In local mode the executor is the driver's JVM ("executor driver").
_LOST_EXECUTOR = re.compile(
    r"\bLost (?:an )?executor (?P<id>[\w.-]+)(?: \(already removed\))? on (?P<host>[^:\s]+): (?P<reason>.+)"
)
_LOST_TASK = re.compile(
    r"\bLost task [\d.]+ in stage [\d.]+ \(TID \d+\) "
    r"\((?P<host>\S+) executor (?P<id>[\w.-]+)\): (?P<error>.+)"
)
_LOST_FAILURE = re.compile(
    r"ExecutorLostFailure \(executor (?P<id>[\w.-]+) exited[^)]*\)(?: Reason: (?P<reason>.+))?"
)
_K8S_EXIT = re.compile(
    r"The executor with id (?P<id>[\w.-]+) exited with exit code (?P<code>-?\d+)(?P<human>\([^)]*\))?"
)
_JVM_OOM = re.compile(r"java\.lang\.OutOfMemoryError(?::[^\t]*)?")
# A resource manager's memory kill, in its own words (an exit status 137 alone may be a preemption).
_MEMORY_KILL = re.compile(
    r"exceeding (?:physical |virtual )?memory limits|possible container OOM|OOMKilled", re.IGNORECASE
)
# Spark's executor exits with status 52 on an OutOfMemoryError of its JVM (SparkExitCode.OOM).
_OOM_EXIT = re.compile(r"exit(?:ed with)? ?(?:code|status)[ :]*52\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ExecutorLoss:
    """A Spark executor the driver's log reports lost, and how."""

    executor: str  # Spark's executor id; "driver" in local mode
    host: str | None
    report: str  # the scheduler's reason or the task's error, as logged
    heap_oom: str | None  # "java.lang.OutOfMemoryError: Java heap space" when the JVM heap ran out
    memory_kill: bool  # its container was killed for memory (YARN, Kubernetes, exit code 52)


def executor_loss(lines: Sequence[str]) -> ExecutorLoss | None:
    """The first executor loss the log reports: a JVM out of heap first, else any loss."""
    losses = [loss for line in lines if (loss := _loss_in(line)) is not None]
    return next((loss for loss in losses if loss.heap_oom or loss.memory_kill), None) or next(
        iter(losses), None
    )


def _loss_in(line: str) -> ExecutorLoss | None:
    for pattern, field in ((_LOST_TASK, "error"), (_LOST_EXECUTOR, "reason"), (_LOST_FAILURE, "reason")):
        match = pattern.search(line)
        if match is None:
            continue
        report = (match[field] or "").strip()
        if pattern is _LOST_TASK and not (_JVM_OOM.search(report) or "ExecutorLostFailure" in report):
            return None  # a task that failed on a healthy executor: the driver's traceback says it
        host = match.groupdict().get("host")
        return _loss(match["id"], host, report)
    match = _K8S_EXIT.search(line)
    if match is not None:
        return _loss(match["id"], None, match[0])
    return None


def _loss(executor: str, host: str | None, report: str) -> ExecutorLoss:
    heap = _JVM_OOM.search(report)
    heap_oom = heap[0].strip() if heap else None
    if heap_oom is None and _OOM_EXIT.search(report):
        heap_oom = "java.lang.OutOfMemoryError (exit status 52, Spark's exit on one)"
    return ExecutorLoss(
        executor=executor,
        host=host,
        report=report[:300],
        heap_oom=heap_oom,
        memory_kill=heap_oom is None and _MEMORY_KILL.search(report) is not None,
    )
