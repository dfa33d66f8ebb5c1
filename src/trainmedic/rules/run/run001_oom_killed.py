"""RUN001 `oom-killed`: the OOM killer (the kernel's, Ray's, a Spark container's) ended the run.

Collector: the supervisor (`trainmedic run`). It samples the kernel's OOM-kill counter of the
run's cgroup (else the machine's) and sends `OomKill` when it rises, `MemoryLimit` for the
limit it set or found, `MemorySample`s of the trainer tree, the phases and log lines of the
trainer, and each attempt's `RunEnd` with its status. A distributed job's driver names the
worker it lost in its own log (read by `_helpers.workers`). Told from any other SIGKILL
(RUN008) by the counter; an attempt ended this way is not RUN009's.
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainmedic.events import Event, MemoryLimit, MemorySample, OomKill, RunEnd, RunStart
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers import spikes as _spikes
from trainmedic.rules._helpers.attempts import (
    LAST_LINES,
    AttemptView,
    attempt_suffix,
    attempts,
    cell_evidence,
    during,
    int_or_none,
    oom_explains,
    phase_at_end,
    worker_evidence,
    worker_oom,
    worker_then,
)
from trainmedic.rules._helpers.run_examples import GIB, epoch_with_eval
from trainmedic.units import human_bytes

if TYPE_CHECKING:
    from trainmedic.rules._helpers.workers import WorkerDeath


def _example() -> list[Event]:
    """RSS climbs from 3 to 6 GiB at the evaluation of epoch 3 under a 6 GiB cgroup limit; the
    cgroup's OOM-kill counter rises and the trainer ends with 137 (SIGKILL)."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        MemoryLimit(t=0.1, pid=100, limit_bytes=6 * GIB, source="memory-limit-option"),
        *epoch_with_eval(3 * GIB, 6 * GIB),
        OomKill(t=8.5, pid=100, count=1, scope="cgroup"),
        RunEnd(t=9.0, pid=100, exit_code=137),
    ]


SPEC = FindingSpec(
    code="RUN001",
    slug="oom-killed",
    severity=Severity.ERROR,
    title="Killed by the OOM killer",
    what="The trainer was killed by the kernel or cgroup out-of-memory killer (SIGKILL, exit 137).",
    why=(
        "The process vanishes without a traceback, often at epoch end or during evaluation, "
        "and launchers report only 'exitcode -9' (torchrun) or status 137 (bash). Every step "
        "since the last checkpoint is lost. trainmedic tells it from an external SIGKILL by the "
        "kernel's OOM-kill counter of the run's cgroup (memory.oom_control / memory.events), "
        "or the machine's (/proc/vmstat) when the run has no cgroup of its own. In a Ray Train "
        "or torchrun job the killed process is a worker and the driver (or agent) then ends with "
        "a traceback of its own (ray.train.WorkerGroupError, ChildFailedError) that lists the OOM "
        "killer only as one possible cause: the finding names the worker, its rank, pid and Ray actor."
    ),
    example=(
        "A Keras callback that builds a second model at every epoch end to compute mAP, "
        "run under a 6 GB limit: RSS climbs from 3 GB to 6 GB at epoch 3 and the process "
        "is killed."
    ),
    fix=(
        "Look at the phase it died in: for evaluation/epoch end, evaluate once after training "
        "or with a smaller batch; for training, lower the batch size or the data kept in memory."
    ),
    decided_in=("run events",),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class Kill:
    """What one attempt's OOM kill measured: who died, at which limit, in which phase."""

    view: AttemptView
    worker: WorkerDeath | None  # the worker a distributed job's driver reported lost
    kill: OomKill | None  # the last rise of an OOM-kill counter (None: Ray's or Spark's own kill)
    limit: MemoryLimit | None
    peak_rss: int | None  # of the trainer tree (None: not sampled)
    peak_cgroup: int | None  # the cgroup's peak charge
    phase: str | None
    epoch: int | None  # numbered from 1
    in_cell: str  # ' in cell [4] `model.fit(...)`' when a notebook kernel died mid-cell
    cell: dict[str, object] | None

    @property
    def killer(self) -> str:
        """Which limit was reached: Ray's monitor says so itself; a cgroup's kill names its limit."""
        ray_monitor = self.worker.ray_memory_monitor if self.worker is not None else None
        if ray_monitor is not None:
            return f"Ray's memory monitor ({ray_monitor})"
        if self.kill is not None and self.kill.scope == "cgroup" and self.limit is not None:
            return f"the cgroup memory limit of {human_bytes(self.limit.limit_bytes)}"
        return "the machine's memory (host OOM killer)"

    def evidence(self) -> dict[str, object]:
        view, kill, limit, worker = self.view, self.kill, self.limit, self.worker
        ray_monitor = worker.ray_memory_monitor if worker is not None else None
        evidence: dict[str, object] = {
            "cell": self.cell,
            "limit": self.killer,
            "limit_bytes": limit.limit_bytes if limit else None,
            "limit_source": limit.source if limit else None,
            "oom_kill_count": kill.count if kill is not None else None,
            "oom_kill_scope": "ray-memory-monitor" if ray_monitor else (kill.scope if kill else None),
            "peak_rss_bytes": self.peak_rss,
            "peak_cgroup_bytes": self.peak_cgroup,
            "phase": self.phase,
            "epoch": self.epoch,
            "exit_code": view.end.exit_code,
            "last_log_lines": view.lines[-LAST_LINES:],
        }
        if worker is not None:
            evidence["worker"] = worker_evidence(view, worker)
        return evidence


# -- the decision ---------------------------------------------------------------------------
def oom_killed(record: RunRecord) -> list[Finding]:
    """SIGKILL + a rise of the kernel's OOM-kill counter (the run's cgroup, else the host);
    the worker it took when a distributed job's driver reported one."""
    found = []
    for view in attempts(record):
        worker = worker_oom(record, view)
        if oom_explains(view) or worker is not None:
            kill = _measure(record, view, worker)
            found.append(
                SPEC.finding(message(kill), evidence=kill.evidence(), fix=fix(kill), epoch=kill.epoch)
            )
    return found


def _measure(record: RunRecord, view: AttemptView, worker: WorkerDeath | None) -> Kill:
    samples = [e for e in view.events if isinstance(e, MemorySample)]
    limits = [e for e in view.events if isinstance(e, MemoryLimit)]
    phase, epoch_index = phase_at_end(record, view)
    in_cell, cell = cell_evidence(view)
    return Kill(
        view=view,
        worker=worker,
        kill=view.oom_kills[-1] if view.oom_kills else None,
        limit=limits[-1] if limits else None,
        peak_rss=max((s.rss_bytes for s in samples), default=None),
        peak_cgroup=max((s.cgroup_bytes or 0 for s in samples), default=0) or None,
        phase=phase,
        epoch=epoch_number(epoch_index),
        in_cell=in_cell,
        cell=cell,
    )


RULES: tuple[Rule, ...] = (oom_killed,)


# -- the wording ----------------------------------------------------------------------------
def message(kill: Kill) -> str:
    """'Killed by the OOM killer at the cgroup memory limit of 6.0 GiB during eval of epoch 3;
    peak RSS of the trainer tree 6.0 GiB', or what a worker's death says of it."""
    view, worker = kill.view, kill.worker
    if view.signal == _signal.SIGKILL:
        victim, then = "Killed", ""
    else:  # a process of its tree was killed, and the run exited with a status of its own
        victim, then = (
            "A process of the trainer tree was killed",
            f"; the run then exited with status {view.end.exit_code}",
        )
    killer = f"the OOM killer at {kill.killer}"
    if worker is not None:
        victim = f"{worker.label} was killed"
        then = _worker_own_numbers(worker, worker_evidence(view, worker)) + worker_then(view)
        if worker.ray_memory_monitor:
            killer = kill.killer
        if worker.spark_memory_kill:
            killer = f"its container's memory limit ({worker.spark_report})"
    return (
        f"{victim} by {killer}{_during(kill)}{attempt_suffix(view)}{then}; "
        f"peak RSS of the trainer tree {human_bytes(kill.peak_rss)}"
    )


def _during(kill: Kill) -> str:
    """' during eval of epoch 3', ' during eval of epoch 3 in cell [4] ...', ' during cell [4] ...'."""
    if not kill.phase:
        return kill.in_cell.replace(" in ", " during ", 1)
    return during(kill.phase, kill.epoch) + kill.in_cell


def _worker_own_numbers(worker: WorkerDeath, facts: dict[str, object]) -> str:
    """' (Ray measured it at 7.1GB, its peak RSS 6.8 GiB, last epoch reported 3)', or ''."""
    own = (
        [f"its peak RSS {human_bytes(int_or_none(facts['peak_rss_bytes']))}"]
        if facts["peak_rss_bytes"]
        else []
    )
    if worker.ray_worker_memory:
        own.insert(0, f"Ray measured it at {worker.ray_worker_memory}")
    if facts["last_epoch"] is not None:
        own.append(f"last epoch reported {facts['last_epoch']}")
    return f" ({', '.join(own)})" if own else ""


def fix(kill: Kill) -> str:
    """Where the memory ran out decides the fix; a worker's rank, Spark or Ray refine it."""
    fix = _phase_fix(kill.phase, kill.cell)
    worker = kill.worker
    if worker is None:
        return fix
    if worker.rank is not None:
        fix = (
            f"Rank {worker.rank} ran out of memory: lower its batch size or the data it keeps in memory "
            "(caches, lists of tensors), or raise the limit; ranks that hold more than the others "
            "(rank 0's evaluation or logging) are the usual suspects."
        )
    if worker.spark_memory_kill:
        fix = (
            "The executor's container outgrew its memory: raise spark.executor.memoryOverhead (memory "
            "outside the JVM heap: Python workers, Arrow batches, native buffers) or spark.executor.memory, "
            "or use more, smaller partitions so each task holds less."
        )
    if worker.ray_memory_monitor:
        fix += (
            " Ray's memory monitor kills workers when the node's memory use passes "
            "RAY_memory_usage_threshold (default 0.95); raising it only hands the kill to the kernel."
        )
    return fix


def _phase_fix(phase: str | None, cell: dict[str, object] | None) -> str:
    """The fix for where the memory ran out: evaluation, training, a notebook cell, or unknown."""
    if phase is not None and phase not in _spikes.TRAINING_PHASES:
        return (
            "The memory ran out while evaluating: evaluate once after training (or every k "
            "epochs; Keras: trainmedic.keras.Deferred(heavy_callback, every=k)), use a smaller "
            "evaluation batch, and free training-only buffers before it."
        )
    if phase == "train":
        return "Lower the batch size or the data kept in memory, or raise the limit."
    if cell is not None:
        return (
            f"The kernel ran out of memory in cell [{cell['execution_count']}]: free what earlier "
            "cells keep (`del` large arrays and models, then gc.collect()), process the data in "
            "chunks, or give the kernel more memory (`trainmedic kernel install --memory-limit`)."
        )
    return SPEC.fix
