"""Executor losses and JVM out-of-memory errors that Spark reports in the driver's log, named
by the RUN rules. `data/spark_local_heap_oom.log` holds the lines a real local-mode run logged
(pyspark 4.3.0, spark.driver.memory=512m, a collect_list over 60M strings) under
`trainmedic run`; the cluster lines are Spark's scheduler messages (YARN, Kubernetes)."""

from __future__ import annotations

from pathlib import Path

from trainmedic.events import Event, LogLine, RunEnd, RunStart
from trainmedic.evidence.logtext import ACCELERATOR_OOM
from trainmedic.evidence.spark import executor_loss
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

DATA = Path(__file__).with_name("data")
DRIVER_FAILS = [
    "Traceback (most recent call last):",
    '  File "/jobs/train.py", line 12, in <module>',
    "    model = pipeline.fit(train)",
    "py4j.protocol.Py4JJavaError: An error occurred while calling o88.fit.",
]


def findings(lines: list[str], exit_code: int = 1) -> dict[str, Finding]:
    events: list[Event] = [RunStart(t=0.0, command=["python", "train.py"])]
    events += [LogLine(t=1.0 + i * 0.001, stream="stderr", text=text) for i, text in enumerate(lines)]
    events.append(RunEnd(t=100.0, exit_code=exit_code))
    return {f.code: f for f in run_rules(RunRecord.of(events)) if f.code.startswith("RUN")}


def test_a_local_executor_out_of_heap_is_run009_naming_the_jvm_heap_not_run002() -> None:
    found = findings((DATA / "spark_local_heap_oom.log").read_text().splitlines())
    assert "RUN002" not in found
    crash = found["RUN009"]
    assert crash.message.startswith("Spark's local executor (in the driver's JVM) ran out of JVM heap")
    assert "java.lang.OutOfMemoryError: Java heap space" in crash.message
    assert "spark.driver.memory" in crash.fix
    assert crash.evidence["worker"]["spark_executor"] == "driver"


def test_a_container_killed_for_memory_is_run001_with_spark_words() -> None:
    lost = (
        "26/12/02 10:01:02 ERROR YarnScheduler: Lost executor 3 on node-7.example: Container killed by "
        "YARN for exceeding physical memory limits. 9.1 GB of 9 GB physical memory used. Consider "
        "boosting spark.executor.memoryOverhead."
    )
    found = findings([lost, *DRIVER_FAILS])
    assert "RUN009" not in found
    oom = found["RUN001"]
    assert oom.message.startswith(
        "Spark executor 3 was killed by its container's memory limit (Container killed"
    )
    assert "spark.executor.memoryOverhead" in oom.fix


def test_an_executor_lost_for_another_reason_is_named_in_run009() -> None:
    lost = (
        "WARN TaskSetManager: Lost task 4.0 in stage 7.0 (TID 31) (10.0.0.7 executor 2): ExecutorLostFailure "
        "(executor 2 exited caused by one of the running tasks) Reason: Remote RPC client disassociated."
    )
    crash = findings([lost, *DRIVER_FAILS])["RUN009"]
    assert crash.message.startswith("Spark executor 2 was lost: ExecutorLostFailure")
    assert "executor's own log" in crash.fix


def test_kubernetes_reports_its_oom_kill_itself() -> None:
    loss = executor_loss(
        ["The executor with id 5 exited with exit code 137(SIGKILL, possible container OOM)."]
    )
    assert loss is not None
    assert (loss.executor, loss.memory_kill, loss.heap_oom) == ("5", True, None)


def test_a_task_failing_on_a_healthy_executor_is_no_executor_loss() -> None:
    failed = "Lost task 1.0 in stage 2.0 (TID 5) (10.0.0.7 executor 1): java.lang.ArithmeticException"
    assert executor_loss([failed]) is None


def test_jvm_out_of_memory_is_not_an_accelerator_oom() -> None:
    assert not ACCELERATOR_OOM.search("java.lang.OutOfMemoryError: Java heap space")
    assert ACCELERATOR_OOM.search("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")


def test_exit_status_52_is_spark_s_own_exit_on_a_jvm_out_of_memory() -> None:
    yarn = "Lost executor 4 on node-2: Container marked as failed. Exit status: 52. Diagnostics: ..."
    loss = executor_loss([yarn])
    assert loss is not None
    assert loss.heap_oom is not None
    assert not loss.memory_kill
