"""RUN001-RUN003: a run that ran out of memory, on the host or the accelerator, or came close.

RUN001 is the kernel's (or Ray's) OOM killer, told from any other SIGKILL by the OOM-kill
counters the supervisor samples; RUN002 is the framework's own out-of-memory error of the
device; RUN003 is a non-training phase (evaluation, epoch end) whose memory rises well over
the training before it, the spike that becomes RUN001 on a smaller machine.
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from trainmedic.events import (
    Event,
    LogLine,
    MemoryLimit,
    MemorySample,
    OomKill,
    PhaseEnd,
    PhaseStart,
    RunEnd,
    RunStart,
)
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import RunRecord
from trainmedic.rules import _logtext, _spikes
from trainmedic.rules.run._attempts import (
    LAST_LINES,
    AttemptView,
    attempt_suffix,
    attempts,
    cell_evidence,
    int_or_none,
    oom_explains,
    phase_at_end,
    worker_evidence,
    worker_oom,
    worker_then,
)
from trainmedic.units import human_bytes

if TYPE_CHECKING:
    from trainmedic.rules._workers import WorkerDeath

_GIB = 1 << 30


def _epoch_with_eval(train: int, evaluation: int) -> list[Event]:
    """Epoch 3 (index 2) of a run: five memory samples in training, one in evaluation."""
    events: list[Event] = [PhaseStart(t=1.0, pid=100, phase="train", epoch=2)]
    events += [MemorySample(t=2.0 + i, pid=100, rss_bytes=train) for i in range(5)]
    events += [
        PhaseEnd(t=7.0, pid=100, phase="train", epoch=2),
        PhaseStart(t=7.0, pid=100, phase="eval", epoch=2),
        MemorySample(t=8.0, pid=100, rss_bytes=evaluation),
    ]
    return events


def _oom_killed_example() -> list[Event]:
    """RSS climbs from 3 to 6 GiB at the evaluation of epoch 3 under a 6 GiB cgroup limit; the
    cgroup's OOM-kill counter rises and the trainer ends with 137 (SIGKILL)."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        MemoryLimit(t=0.1, pid=100, limit_bytes=6 * _GIB, source="memory-limit-option"),
        *_epoch_with_eval(3 * _GIB, 6 * _GIB),
        OomKill(t=8.5, pid=100, count=1, scope="cgroup"),
        RunEnd(t=9.0, pid=100, exit_code=137),
    ]


OOM_KILLED = FindingSpec(
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
    example_input=_oom_killed_example,
)


def _accelerator_oom_example() -> list[Event]:
    """PyTorch's CUDA out-of-memory error on stderr, then exit 1."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 42, in <module>',
        "    loss = model(x).sum()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 15.77 GiB of which 1.20 GiB is free.",
    ]
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        *(LogLine(t=1.0 + i / 100, pid=100, stream="stderr", text=line) for i, line in enumerate(lines)),
        RunEnd(t=2.0, pid=100, exit_code=1),
    ]


ACCELERATOR_OOM = FindingSpec(
    code="RUN002",
    slug="accelerator-oom",
    severity=Severity.ERROR,
    title="Accelerator out of memory",
    what=(
        "The framework raised an out-of-memory error of the accelerator: CUDA/ROCm/MPS "
        "'out of memory', or TensorFlow's ResourceExhaustedError."
    ),
    why="The device's memory, not the host's, ran out: the run stops at that step.",
    example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB ...",
    fix=(
        "Lower the per-device batch size and keep the effective batch with gradient "
        "accumulation, use bf16/fp16, or activation checkpointing."
    ),
    example_input=_accelerator_oom_example,
)


def _eval_memory_spike_example() -> list[Event]:
    """Training holds 2 GiB; the epoch's evaluation peaks at 4 GiB (2x); the run ends well."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        *_epoch_with_eval(2 * _GIB, 4 * _GIB),
        PhaseEnd(t=9.0, pid=100, phase="eval", epoch=2),
        RunEnd(t=10.0, pid=100, exit_code=0),
    ]


EVAL_MEMORY_SPIKE = FindingSpec(
    code="RUN003",
    slug="eval-memory-spike",
    severity=Severity.WARNING,
    title="Memory spike at evaluation / epoch end",
    what=(
        "Memory during a non-training phase (evaluation, prediction, the epoch end and its "
        "callbacks, a checkpoint) rose well above the training steady state before it (1.5x "
        "or more); an OOM kill inside such a phase counts as reaching the limit."
    ),
    why=(
        "The spike repeats every epoch and decides the memory the run needs: on a smaller "
        "card or a busier machine it becomes an OOM kill at an epoch boundary."
    ),
    example="Training holds 2.1 GiB; each epoch-end mAP callback peaks at 4.0 GiB (1.9x).",
    fix=(
        "Evaluate once after training (or every k epochs; Keras: "
        "callbacks=[trainmedic.keras.Deferred(heavy_callback, every=k)]) and keep a light "
        "per-epoch validation loss (fit's validation_data); stream the metric in small "
        "batches instead of one big predict."
    ),
    example_input=_eval_memory_spike_example,
)


SPIKE_RATIO = 1.5  # RUN003: eval/epoch-end peak over the training median
MIN_TRAIN_SAMPLES = 3


# -- RUN001 ---------------------------------------------------------------------------------
def oom_killed(record: RunRecord) -> list[Finding]:
    """SIGKILL + a rise of the kernel's OOM-kill counter (the run's cgroup, else the host);
    the worker it took when a distributed job's driver reported one."""
    found = []
    for view in attempts(record):
        worker = worker_oom(record, view)
        if oom_explains(view) or worker is not None:
            found.append(_oom_finding(record, view, worker))
    return found


def _oom_finding(record: RunRecord, view: AttemptView, worker: WorkerDeath | None) -> Finding:
    """One attempt's RUN001: who was killed, at which limit, in which phase, and what to change."""
    kill = view.oom_kills[-1] if view.oom_kills else None
    limits = [e for e in view.events if isinstance(e, MemoryLimit)]
    limit = limits[-1] if limits else None
    peak_rss, peak_cgroup = _memory_peaks(view)
    phase, epoch_index = phase_at_end(record, view)
    epoch = epoch_number(epoch_index)
    ray_monitor = worker.ray_memory_monitor if worker is not None else None
    which = _killer(kill, limit, ray_monitor)
    in_cell, cell = cell_evidence(view)
    evidence: dict[str, object] = {
        "cell": cell,
        "limit": which,
        "limit_bytes": limit.limit_bytes if limit else None,
        "limit_source": limit.source if limit else None,
        "oom_kill_count": kill.count if kill is not None else None,
        "oom_kill_scope": "ray-memory-monitor" if ray_monitor else (kill.scope if kill else None),
        "peak_rss_bytes": peak_rss,
        "peak_cgroup_bytes": peak_cgroup,
        "phase": phase,
        "epoch": epoch,
        "exit_code": view.end.exit_code,
        "last_log_lines": view.lines[-LAST_LINES:],
    }
    fix = _oom_fix(phase, cell)
    victim, then = _victim(view)
    if worker is not None:
        facts = worker_evidence(view, worker)
        evidence["worker"] = facts
        victim = f"{worker.label} was killed"
        then = _worker_own_numbers(worker, facts) + worker_then(view)
        fix = _worker_oom_fix(worker, fix)
    killer = which if ray_monitor else f"the OOM killer at {which}"
    if worker is not None and worker.spark_memory_kill:
        killer = f"its container's memory limit ({worker.spark_report})"
    return OOM_KILLED.finding(
        f"{victim} by {killer}{_during(phase, epoch, in_cell)}{attempt_suffix(view)}{then}; "
        f"peak RSS of the trainer tree {human_bytes(peak_rss)}",
        evidence=evidence,
        fix=fix,
        epoch=epoch,
    )


def _memory_peaks(view: AttemptView) -> tuple[int | None, int | None]:
    """The trainer tree's peak RSS and the cgroup's peak charge in the attempt (None: not sampled)."""
    samples = [e for e in view.events if isinstance(e, MemorySample)]
    peak_rss = max((s.rss_bytes for s in samples), default=None)
    peak_cgroup = max((s.cgroup_bytes or 0 for s in samples), default=0) or None
    return peak_rss, peak_cgroup


def _killer(kill: OomKill | None, limit: MemoryLimit | None, ray_monitor: str | None) -> str:
    """Which limit was reached: Ray's monitor says so itself; a cgroup's kill names its limit."""
    if ray_monitor is not None:
        return f"Ray's memory monitor ({ray_monitor})"
    if kill is not None and kill.scope == "cgroup" and limit is not None:
        return f"the cgroup memory limit of {human_bytes(limit.limit_bytes)}"
    return "the machine's memory (host OOM killer)"


def _during(phase: str | None, epoch: int | None, in_cell: str) -> str:
    """' during eval of epoch 3', ' during eval of epoch 3 in cell [4] ...', ' during cell [4] ...'."""
    if not phase:
        return in_cell.replace(" in ", " during ", 1)
    return f" during {phase}" + (f" of epoch {epoch}" if epoch is not None else "") + in_cell


def _oom_fix(phase: str | None, cell: dict[str, object] | None) -> str:
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
    return OOM_KILLED.fix


def _victim(view: AttemptView) -> tuple[str, str]:
    """Who was killed and what followed: the trainer itself (SIGKILL), or a process of its tree
    after which the run exited with a status of its own."""
    if view.signal == _signal.SIGKILL:
        return "Killed", ""
    return (
        "A process of the trainer tree was killed",
        f"; the run then exited with status {view.end.exit_code}",
    )


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


def _worker_oom_fix(worker: WorkerDeath, fix: str) -> str:
    """A worker's rank decides the fix; Ray's memory monitor adds why raising its threshold is no cure."""
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


# -- RUN002 ---------------------------------------------------------------------------------
def accelerator_oom(record: RunRecord) -> list[Finding]:
    """The framework's out-of-memory error of the device, with the phase it came in and the
    trainer tree's peak GPU memory (NVML samples) beside the device's capacity."""
    found = []
    for view in attempts(record):
        line = _logtext.first_match(_logtext.ACCELERATOR_OOM, view.lines)
        if line is None:
            continue
        tb = _logtext.parse_traceback(view.error_lines) or _logtext.parse_traceback(view.lines)
        phase, epoch_index = phase_at_end(record, view)
        epoch = epoch_number(epoch_index)
        sizes = _logtext.accelerator_oom_sizes(line)
        peak_gpu = max((s.gpu_bytes or 0 for s in view.events if isinstance(s, MemorySample)), default=0)
        evidence: dict[str, object] = {
            "log_line": line.strip(),
            "phase": phase,
            "epoch": epoch,
            "peak_gpu_bytes": peak_gpu or None,
            "tried_to_allocate_bytes": sizes.requested,
            "device_total_bytes": sizes.capacity,
            "device_free_bytes": sizes.free,
        }
        if tb is not None:
            evidence.update(exception=tb.exc_type, user_frame=str(tb.user_frame) if tb.user_frame else None)
        during = f" during {phase}" + (f" of epoch {epoch}" if epoch is not None else "") if phase else ""
        held = ""
        if peak_gpu:
            of = f" of {human_bytes(sizes.capacity)}" if sizes.capacity else ""
            held = f"; peak GPU memory of the trainer tree {human_bytes(peak_gpu)}{of}"
        fix = ACCELERATOR_OOM.fix
        if phase is not None and phase not in _spikes.TRAINING_PHASES:
            fix = (
                "The device ran out while evaluating: move outputs to the CPU (or reduce them to "
                "metrics) batch by batch instead of keeping them on the GPU, evaluate under "
                "torch.no_grad()/inference_mode with a smaller batch, and free training-only "
                "buffers before it."
            )
        found.append(
            ACCELERATOR_OOM.finding(
                f"The accelerator ran out of memory{during}{attempt_suffix(view)}{held}: {line.strip()[:200]}",
                evidence=evidence,
                fix=fix,
                epoch=epoch,
            )
        )
    return found


# -- RUN003 ---------------------------------------------------------------------------------
def eval_memory_spike(record: RunRecord) -> list[Finding]:
    """Host memory (RSS) and, where NVML sampled it, GPU memory: each spike is its own finding.

    Every non-training phase counts, each against the training before it (see `_spikes`).
    When the OOM killer ended the run inside such a phase, the phase needed at least the
    limit: that is its peak, even where the kill came before a sample could see it.
    """
    limit = _killed_by_limit(record)
    return [
        finding
        for kind in ("host", "gpu")
        if (finding := _memory_spike(record, kind, limit if kind == "host" else None)) is not None
    ]


def _killed_by_limit(record: RunRecord) -> int | None:
    """The memory limit of the last attempt, when the OOM killer ended it."""
    views = attempts(record)
    if not views or not oom_explains(views[-1]):
        return None
    limits = [e for e in views[-1].events if isinstance(e, MemoryLimit)]
    return limits[-1].limit_bytes if limits else None


PHASE_LABELS = {"eval": "evaluation", "predict": "prediction", "epoch_end": "epoch end"}
_MEASURES: dict[str, Callable[[MemorySample], int | None]] = {
    "host": lambda s: s.rss_bytes,
    "gpu": lambda s: s.gpu_bytes,
    "cgroup": lambda s: s.cgroup_bytes,
}


def _memory_spike(record: RunRecord, kind: str, killed_at: int | None) -> Finding | None:
    # A cgroup limit caps the cgroup's charge, which leaves out the mapped libraries RSS counts:
    # against the limit, compare the charge.
    charged = killed_at is not None and any(s.cgroup_bytes for s in record.memory_samples)
    measure = _MEASURES["cgroup" if charged else kind]
    found = _spikes.episodes(record, measure, min_baseline=MIN_TRAIN_SAMPLES)
    if not found:
        return None
    last = found[-1]
    if killed_at is not None and killed_at > last.peak and _spikes.open_at_end(record, last):
        last.peak, last.killed = killed_at, True
    worst = max(found, key=lambda e: e.ratio)
    if worst.ratio < SPIKE_RATIO:
        return None
    label = PHASE_LABELS.get(worst.phase, worst.phase.replace("_", " "))
    memory = "GPU memory" if kind == "gpu" else ("Memory (the cgroup's charge)" if charged else "Memory")
    steady = worst.steady
    if worst.killed:
        message = (
            f"{memory} at {label} reached the limit of {human_bytes(worst.peak)}, where the OOM killer "
            f"ended the run: at least {worst.ratio:.1f}x the training steady state of {human_bytes(steady)}"
        )
    else:
        message = (
            f"{memory} at {label} peaked at {human_bytes(worst.peak)}, {worst.ratio:.1f}x the training "
            f"steady state of {human_bytes(steady)}"
        )
    return EVAL_MEMORY_SPIKE.finding(
        message,
        evidence={
            "memory": "cgroup" if charged else kind,
            "phase": worst.phase,
            "train_median_bytes": int(steady),
            "peak_bytes": worst.peak,
            "ratio": round(worst.ratio, 2),
            "train_samples": len(worst.baseline),
            "spike_samples": worst.samples,
            "killed_at_limit": worst.killed,
            "spikes": len([e for e in found if e.ratio >= SPIKE_RATIO]),
            "baseline": "training memory sampled before the spike (since the previous one)",
        },
    )
