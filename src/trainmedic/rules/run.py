"""RUN: how a supervised run ended, decided from the events of `trainmedic run`.

Each attempt (a run with `--restarts` has several) is classified on its own,
from its `RunEnd`, the supervisor's observations (OOM-kill counters, stop
requests, hang stacks, orphans, memory samples) and the trainer's log lines.
Exit statuses follow the shell: 128+N is "killed by signal N", also when a
launcher (bash, torchrun) reports its trainer's death that way.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from trainmedic.events import (
    Epoch,
    Event,
    HangDetected,
    KernelShutdown,
    LogLine,
    MemoryLimit,
    MemorySample,
    OomKill,
    OrphanEnded,
    ProcessSpawn,
    RunEnd,
    RunStart,
    StopRequest,
)
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord, cell_label, cell_running
from trainmedic.rules import _logtext, _ray, _spikes
from trainmedic.units import human_bytes

if TYPE_CHECKING:  # imported where a failed run needs it (see `dead_worker`)
    from trainmedic.rules._workers import WorkerDeath

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
)

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
)

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
)

SILENT_EARLY_EXIT = FindingSpec(
    code="RUN004",
    slug="silent-early-exit",
    severity=Severity.ERROR,
    title="Exit 0 after fewer epochs than requested",
    what=(
        "The run exited with status 0 but fewer epochs (or steps) ran than were requested, "
        "and no early-stopping callback explains it. Requested: --expect-epochs, the framework's "
        "training plan, or the N of 'Epoch k/N' log lines; completed: epoch events or the highest k."
    ),
    why="The job looks successful to the scheduler; the model is undertrained.",
    example="model.fit(ds, epochs=12, steps_per_epoch=500) returns after epoch 1, exit 0.",
    fix="Find what stopped the loop (input exhausted, a callback setting stop_training) and fix it.",
)

INPUT_EXHAUSTED = FindingSpec(
    code="RUN005",
    slug="input-exhausted",
    severity=Severity.ERROR,
    title="Input pipeline ran out of data",
    what=(
        "The input pipeline ran out of data ('Your input ran out of data', StopIteration, "
        "OutOfRangeError): fewer batches than steps_per_epoch x epochs."
    ),
    why=(
        "Legacy tf.keras stops training after the first epoch; Keras 3 silently runs fewer "
        "steps per epoch. Either way the model sees less data than planned."
    ),
    example=(
        "ds = tf.data.Dataset.from_tensor_slices(...).batch(32)  # 100 batches\n"
        "model.fit(ds, epochs=10, steps_per_epoch=500)"
    ),
    fix=(
        "Repeat the dataset (ds.repeat()), wrap the Sequence in trainmedic.keras.LoopingSequence, "
        "or set steps_per_epoch to the number of batches the input really has."
    ),
)

LAUNCHER_STUB = FindingSpec(
    code="RUN006",
    slug="launcher-stub",
    severity=Severity.INFO,
    title="Launched through a launcher stub",
    what=(
        "The launched process is a launcher (venv redirector, uv run, poetry run, conda run, "
        "a shell wrapper, the torchrun agent); the real trainer PIDs are given."
    ),
    why=(
        "The PID you hold is not the process that trains: killing or profiling it misses the "
        "trainer, which keeps running or is orphaned. A Python launcher that receives SIGINT "
        "may even kill its child without letting it save. trainmedic takes as trainers the "
        "Python processes with no other Python process below them (not counting their own "
        "workers), and signals them directly."
    ),
    example="bash -c 'python train.py' -> bash (PID 100, 3 MB) -> python (PID 101, 5 GB).",
    fix="Signal and profile the trainer PIDs given here; `trainmedic stop` does it for you.",
)

HANG = FindingSpec(
    code="RUN007",
    slug="hang",
    severity=Severity.ERROR,
    title="Hang: no progress and no CPU",
    what=(
        "No progress output and near-zero CPU in the trainer tree for the hang timeout; the "
        "Python stack of every trainer thread is attached."
    ),
    why="A deadlocked run holds its GPUs for hours while producing nothing.",
    example="Two DataLoader workers waiting on a lock the main process holds; a collective never joined.",
    fix=(
        "Read the stacks (taken with py-spy, from outside the process): the frame each thread "
        "waits in names the lock, queue or collective; `--on-hang stop` ends such runs instead "
        "of holding the machine."
    ),
)

KILLED_BY_SIGNAL = FindingSpec(
    code="RUN008",
    slug="killed-by-signal",
    severity=Severity.ERROR,
    title="Killed by an external signal",
    what=(
        "The run was ended by a signal that was not the OOM killer: preemption, `kill`, a "
        "scheduler's time limit, or a native crash (SIGSEGV, SIGABRT)."
    ),
    why="The run stopped early; whether it can resume depends on its last checkpoint.",
    example=(
        "SIGTERM from Slurm at the time limit; SIGSEGV in a native extension; a Ray Train worker "
        "that aborts ('Fatal Python error: Aborted') while the driver reports WorkerGroupError."
    ),
    fix=(
        "For preemption/time limits, checkpoint on SIGTERM and resume (`--restarts`); "
        "for a native crash, read the faulthandler stack in the log."
    ),
)

CRASHED = FindingSpec(
    code="RUN009",
    slug="crashed",
    severity=Severity.ERROR,
    title="Crashed with an exception",
    what=(
        "Non-zero exit with a traceback; the exception type, message and innermost frame in "
        "user code are extracted."
    ),
    why="The run is lost at that point; the innermost user frame is where to look first.",
    example=(
        "ValueError: Shapes (None, 10) and (None, 1) are incompatible (train.py:42); or, raised in "
        "Ray Train worker rank 1, quoted by the driver after '[Rank 1 Error Snippet]:'."
    ),
    fix="Fix the error at the user frame given; rerun with `--restarts` only once it is fixed.",
)

ORPHAN_PROCESSES = FindingSpec(
    code="RUN010",
    slug="orphan-processes",
    severity=Severity.WARNING,
    title="Processes outlived the trainer",
    what=(
        "Processes of the trainer tree (e.g. data-loader workers) outlived the trainer; "
        "trainmedic ended them and lists them."
    ),
    why="Orphans keep memory, GPU contexts and ports busy and can block the next run.",
    example="The trainer died by os._exit; its 4 DataLoader workers kept 3 GB each.",
    fix="Shut workers down on exit (context managers, persistent_workers=False at teardown).",
)

SPECS: tuple[FindingSpec, ...] = (
    OOM_KILLED,
    ACCELERATOR_OOM,
    EVAL_MEMORY_SPIKE,
    SILENT_EARLY_EXIT,
    INPUT_EXHAUSTED,
    LAUNCHER_STUB,
    HANG,
    KILLED_BY_SIGNAL,
    CRASHED,
    ORPHAN_PROCESSES,
)


SPIKE_RATIO = 1.5  # RUN003: eval/epoch-end peak over the training median
MIN_TRAIN_SAMPLES = 3
LAST_LINES = 12
_KILL_SIGNALS_BY_EXIT = range(129, 129 + 64)


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt of the run: its end, and the events that happened during it."""

    number: int
    start: RunStart | None
    end: RunEnd
    events: tuple[Event, ...]

    def of(self, kind: type[Event]) -> list[Event]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def lines(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, LogLine)]

    @property
    def error_lines(self) -> list[str]:
        """Where Python writes tracebacks and faulthandler reports: stderr. Lines of stdout may
        be stamped out of order with it (two pipes), so they would cut into a traceback.
        All lines when nothing came on stderr (a logger that writes errors to stdout)."""
        errors = [e.text for e in self.events if isinstance(e, LogLine) and e.stream == "stderr"]
        return errors or self.lines

    @property
    def signal(self) -> int | None:
        """The killing signal: from the process itself, or a launcher's 128+N exit status."""
        if self.end.signal is not None:
            return self.end.signal
        if self.end.exit_code in _KILL_SIGNALS_BY_EXIT:
            return self.end.exit_code - 128
        return None

    @property
    def stops(self) -> list[StopRequest]:
        return [e for e in self.events if isinstance(e, StopRequest)]

    @property
    def oom_kills(self) -> list[OomKill]:
        return [e for e in self.events if isinstance(e, OomKill)]


def attempts(record: RunRecord) -> list[AttemptView]:
    """Split the record into attempts (RunStart .. RunEnd of the same attempt number)."""
    views: list[AttemptView] = []
    starts = record.of_type(RunStart)
    previous_end = float("-inf")
    for end in record.of_type(RunEnd):
        start = next((s for s in reversed(starts) if s.attempt == end.attempt and s.t <= end.t), None)
        lower = start.t if start is not None else previous_end
        window = tuple(e for e in record.events if lower <= e.t <= end.t and e is not end)
        views.append(AttemptView(end.attempt, start, end, window))
        previous_end = end.t
    return views


def signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _where(view: AttemptView) -> str:
    return f" (attempt {view.number})" if view.number else ""


def _phase_at_end(record: RunRecord, view: AttemptView) -> tuple[str | None, int | None]:
    """The phase open when the attempt ended, and its epoch."""
    samples = [e for e in view.events if isinstance(e, MemorySample)]
    t = samples[-1].t if samples else view.end.t
    best = None
    for span in record.phase_spans:
        if (
            span.phase != "idle"  # a notebook kernel between cells: no phase of training
            and span.start <= t
            and (span.end is None or t <= span.end)
            and (best is None or span.start >= best.start)
        ):
            best = span
    return (best.phase, best.epoch) if best else (None, None)


def _cell_evidence(view: AttemptView) -> tuple[str, dict[str, object] | None]:
    """' in cell [12] `model.fit(...)`' and its evidence, when a notebook kernel died mid-cell."""
    cell = cell_running(view.events)
    if cell is None:
        return "", None
    return f" in {cell_label(cell)}", {
        "execution_count": cell.execution_count,
        "first_line": cell.first_line,
        "rss_at_start_bytes": cell.rss_bytes,
        "running_s": round(view.end.t - cell.t, 3),
    }


# -- a worker of a distributed job that died (Ray Train, torchrun) ----------------------------
def dead_worker(record: RunRecord, view: AttemptView) -> WorkerDeath | None:
    """The worker whose death the driver / launcher reported in this attempt, if any."""
    if view.end.exit_code == 0 or view.stops:
        return None
    from trainmedic.rules import _workers  # only a failed run needs its patterns compiled

    ranks = {p.pid: p.rank for p in record.processes if p.source == "announce" and p.rank is not None}
    return _workers.dead_worker(view.lines, ranks)


def _worker_evidence(view: AttemptView, death: WorkerDeath) -> dict[str, object]:
    """The worker's own numbers: its peak RSS and the last epoch it reported."""
    key = str(death.pid)
    rss = [s.processes[key] for s in view.events if isinstance(s, MemorySample) and key in s.processes]
    epochs = [
        e.epoch
        for e in view.events
        if isinstance(e, Epoch) and death.rank is not None and e.rank == death.rank
    ]
    return {
        **death.evidence(),
        "peak_rss_bytes": max(rss, default=None),
        "last_epoch": epoch_number(max(epochs)) if epochs else None,
    }


def _worker_driver_exception(view: AttemptView) -> str | None:
    from trainmedic.rules import _workers

    return _workers.driver_exception(view.error_lines)


def _worker_then(view: AttemptView) -> str:
    """'; the run then exited with status 1 (ray.train.WorkerGroupError)'."""
    raised = _worker_driver_exception(view)
    return f"; the run then exited with status {view.end.exit_code}" + (f" ({raised})" if raised else "")


def _worker_oom(record: RunRecord, view: AttemptView) -> WorkerDeath | None:
    """The worker the OOM killer took: it died without an error of its own (SIGKILL leaves none)
    while an OOM-kill counter rose (the run's cgroup, or the host's when the run has none)."""
    if view.end.exit_code == 0 or view.stops:
        return None
    death = dead_worker(record, view)
    if death is not None and death.ray_memory_monitor is not None:
        return death  # Ray's own OOM killer: it says so, and no kernel counter rises
    if not view.oom_kills or death is None or death.python_exception or death.native:
        return None
    if death.signal not in (None, "SIGKILL"):
        return None
    return death


# -- RUN001 ---------------------------------------------------------------------------------
def _oom_explains(view: AttemptView) -> bool:
    """The OOM killer ended this attempt: its trainer died of SIGKILL while an OOM-kill counter
    rose, or the run's own cgroup counted a kill (of a worker, say) and the run then failed.
    The machine-wide counter alone does not blame a failed run: other jobs' kills count too."""
    if not view.oom_kills or view.stops or view.end.exit_code == 0:
        return False
    if view.signal == _signal.SIGKILL:
        return True
    return any(k.scope == "cgroup" for k in view.oom_kills)


def oom_killed(record: RunRecord) -> list[Finding]:
    """SIGKILL + a rise of the kernel's OOM-kill counter (the run's cgroup, else the host);
    the worker it took when a distributed job's driver reported one."""
    found = []
    for view in attempts(record):
        worker = _worker_oom(record, view)
        if not _oom_explains(view) and worker is None:
            continue
        kill = view.oom_kills[-1] if view.oom_kills else None
        limits = [e for e in view.events if isinstance(e, MemoryLimit)]
        limit = limits[-1] if limits else None
        samples = [e for e in view.events if isinstance(e, MemorySample)]
        peak_rss = max((s.rss_bytes for s in samples), default=None)
        peak_cgroup = max((s.cgroup_bytes or 0 for s in samples), default=0) or None
        phase, epoch_index = _phase_at_end(record, view)
        epoch = epoch_number(epoch_index)
        ray_monitor = worker.ray_memory_monitor if worker is not None else None
        if ray_monitor is not None:
            which = f"Ray's memory monitor ({ray_monitor})"
        elif kill is not None and kill.scope == "cgroup" and limit is not None:
            which = f"the cgroup memory limit of {human_bytes(limit.limit_bytes)}"
        else:
            which = "the machine's memory (host OOM killer)"
        during = f" during {phase}" + (f" of epoch {epoch}" if epoch is not None else "") if phase else ""
        in_cell, cell = _cell_evidence(view)
        during = (during + in_cell) if during else in_cell.replace(" in ", " during ", 1)
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
        fix = OOM_KILLED.fix
        if phase is not None and phase not in _spikes.TRAINING_PHASES:
            fix = (
                "The memory ran out while evaluating: evaluate once after training (or every k "
                "epochs; Keras: trainmedic.keras.Deferred(heavy_callback, every=k)), use a smaller "
                "evaluation batch, and free training-only buffers before it."
            )
        elif phase == "train":
            fix = "Lower the batch size or the data kept in memory, or raise the limit."
        elif cell is not None:
            fix = (
                f"The kernel ran out of memory in cell [{cell['execution_count']}]: free what earlier "
                "cells keep (`del` large arrays and models, then gc.collect()), process the data in "
                "chunks, or give the kernel more memory (`trainmedic kernel install --memory-limit`)."
            )
        victim = "Killed" if view.signal == _signal.SIGKILL else "A process of the trainer tree was killed"
        then = (
            ""
            if view.signal == _signal.SIGKILL
            else f"; the run then exited with status {view.end.exit_code}"
        )
        if worker is not None:
            facts = _worker_evidence(view, worker)
            evidence["worker"] = facts
            own = (
                [f"its peak RSS {human_bytes(_int_or_none(facts['peak_rss_bytes']))}"]
                if facts["peak_rss_bytes"]
                else []
            )
            if worker.ray_worker_memory:
                own.insert(0, f"Ray measured it at {worker.ray_worker_memory}")
            if facts["last_epoch"] is not None:
                own.append(f"last epoch reported {facts['last_epoch']}")
            victim = f"{worker.label} was killed"
            then = (f" ({', '.join(own)})" if own else "") + _worker_then(view)
            fix = (
                f"Rank {worker.rank} ran out of memory: lower its batch size or the data it keeps in memory "
                "(caches, lists of tensors), or raise the limit; ranks that hold more than the others "
                "(rank 0's evaluation or logging) are the usual suspects."
                if worker.rank is not None
                else fix
            )
            if ray_monitor:
                fix += (
                    " Ray's memory monitor kills workers when the node's memory use passes "
                    "RAY_memory_usage_threshold (default 0.95); raising it only hands the kill to the kernel."
                )
        found.append(
            OOM_KILLED.finding(
                f"{victim} by {'' if ray_monitor else 'the OOM killer at '}{which}{during}{_where(view)}"
                f"{then}; peak RSS of the "
                f"trainer tree {human_bytes(peak_rss)}",
                evidence=evidence,
                fix=fix,
                epoch=epoch,
            )
        )
    return found


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) else None


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
        phase, epoch_index = _phase_at_end(record, view)
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
                f"The accelerator ran out of memory{during}{_where(view)}{held}: {line.strip()[:200]}",
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
    if not views or not _oom_explains(views[-1]):
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


# -- RUN004 ---------------------------------------------------------------------------------
def silent_early_exit(record: RunRecord) -> list[Finding]:
    views = attempts(record)
    if not views or views[-1].end.exit_code != 0 or views[-1].stops:
        return []
    lines = [e.text for e in record.log_lines]
    from_log = _logtext.epoch_progress(lines)
    requested = record.epochs_requested or (from_log[1] if from_log else None)
    completed = record.epochs_completed or (from_log[0] if from_log else 0)
    source = "epoch events" if record.epochs_completed else "log lines ('Epoch k/N')"
    if requested is None or completed >= requested:
        return []
    if any(p.early_stopping for p in record.plans) or _logtext.first_match(_logtext.EARLY_STOPPING, lines):
        return []
    return [
        SILENT_EARLY_EXIT.finding(
            f"Exited with status 0 after {completed} of {requested} requested epochs",
            evidence={
                "epochs_requested": requested,
                "epochs_completed": completed,
                "completed_from": source,
                "expect_epochs_option": record.start.expect_epochs if record.start else None,
                "last_log_lines": lines[-LAST_LINES:],
            },
            epoch=completed,
        )
    ]


# -- RUN005 ---------------------------------------------------------------------------------
def input_exhausted(record: RunRecord) -> list[Finding]:
    lines = [e.text for e in record.log_lines]
    line = _logtext.first_match(_logtext.INPUT_EXHAUSTED, lines)
    planned = next((p.steps_per_epoch for p in reversed(record.plans) if p.steps_per_epoch), None)
    short = [
        (e.epoch, e.steps)
        for e in record.of_type(Epoch)
        if planned is not None and e.steps is not None and e.steps < planned
    ]
    if line is None and not short:
        return []
    evidence: dict[str, object] = {"log_line": line.strip() if line else None, "steps_per_epoch": planned}
    if short:
        evidence["short_epochs"] = [{"epoch": epoch_number(ep), "steps": st} for ep, st in short]
        message = (
            f"The input ran out of data: {len(short)} epoch(s) ran fewer than the {planned} planned "
            f"steps (epoch {epoch_number(short[0][0])}: {short[0][1]} steps)"
        )
        if line is not None:
            message += f"; the log says: {line.strip()[:160]}"
    else:
        assert line is not None
        message = f"The input ran out of data: {line.strip()[:160]}"
    return [
        INPUT_EXHAUSTED.finding(
            message, evidence=evidence, epoch=epoch_number(short[0][0]) if short else None
        )
    ]


# -- RUN006 ---------------------------------------------------------------------------------
_LAUNCHER_NAMES = {
    "bash": "shell wrapper",
    "sh": "shell wrapper",
    "dash": "shell wrapper",
    "zsh": "shell wrapper",
    "uv": "uv run",
    "poetry": "poetry run",
    "conda": "conda run",
    "mamba": "mamba run",
    "pixi": "pixi run",
    "torchrun": "torchrun agent",
    "accelerate": "accelerate launch",
    "deepspeed": "deepspeed launcher",
    "srun": "srun",
    "mpirun": "mpirun",
}


def launcher_kind(cmdline: Sequence[str]) -> str:
    """A human name for a launcher process from its command line."""
    for arg in cmdline[:3]:
        base = PurePath(arg).name.lower().removesuffix(".exe")
        if base in _LAUNCHER_NAMES:
            return _LAUNCHER_NAMES[base]
    if "torch.distributed.run" in cmdline:
        return "torchrun agent"
    if cmdline and PurePath(cmdline[0]).name.lower().startswith("python"):
        return "python launcher stub (a wrapper script or venv redirector)"
    return "launcher"


def launcher_stub(record: RunRecord) -> list[Finding]:
    latest: dict[int, ProcessSpawn] = {}
    ranks: dict[int, int | None] = {}
    first_pid: int | None = None
    for spawn in record.processes:
        if spawn.source != "supervisor":
            ranks[spawn.pid] = spawn.rank  # announced by the process itself, with its rank
            continue
        first_pid = spawn.pid if first_pid is None else first_pid
        latest[spawn.pid] = spawn
    launchers = [p for p in latest.values() if p.role == "launcher"]
    trainers = [p for p in latest.values() if p.role == "trainer"]
    if not launchers or not trainers:
        return []
    root = latest.get(first_pid) if first_pid is not None else None
    launcher = root if root is not None and root.role == "launcher" else launchers[0]
    kind = launcher_kind(launcher.cmdline)
    pids = ", ".join(str(p.pid) for p in trainers)
    return [
        LAUNCHER_STUB.finding(
            f"PID {launcher.pid} is a launcher ({kind}); the real trainer is PID {pids}",
            evidence={
                "launcher_pid": launcher.pid,
                "launcher": kind,
                "launcher_cmdline": launcher.cmdline,
                "launchers": [p.pid for p in launchers],
                "trainer_pids": [p.pid for p in trainers],
                "trainer_cmdlines": [p.cmdline for p in trainers],
                "trainer_ranks": [ranks.get(p.pid) for p in trainers],
            },
            pid=trainers[0].pid,
        )
    ]


# -- RUN007 ---------------------------------------------------------------------------------
_SPY_THREAD = re.compile(r'^Thread (?P<tid>\S+) \((?P<state>[^)]*)\): "(?P<name>[^"]*)"')
_SPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<where>[^()]+:\d+)\)\s*$")


def innermost_frames(stack_text: str) -> list[str]:
    """'thread: function (file:line)' of the top frame of each thread in a py-spy dump."""
    tops: list[str] = []
    thread: str | None = None
    for line in stack_text.splitlines():
        head = _SPY_THREAD.match(line)
        if head:
            thread = head["name"]
            continue
        frame = _SPY_FRAME.match(line)
        if frame and thread is not None:
            tops.append(f"{thread}: {frame['func']} ({frame['where']})")
            thread = None
    return tops


def hang(record: RunRecord) -> list[Finding]:
    found = []
    for event in record.of_type(HangDetected):
        tops = {pid: innermost_frames(text) for pid, text in event.stacks.items()}
        waiting = "; ".join(f"pid {pid}: " + ", ".join(t) for pid, t in tops.items() if t)
        cell = cell_running(record.events, until=event.t)
        found.append(
            HANG.finding(
                f"No progress and {event.cpu_percent:.1f} % CPU for {event.idle_s:.0f} s"
                + (f" in {cell_label(cell)}" if cell else "")
                + (f"; threads wait in {waiting}" if waiting else ""),
                evidence={
                    "cell": {"execution_count": cell.execution_count, "first_line": cell.first_line}
                    if cell
                    else None,
                    "idle_s": event.idle_s,
                    "cpu_percent": event.cpu_percent,
                    "action": event.action,
                    "waiting_in": tops,
                    "stacks": event.stacks,
                },
            )
        )
    return found[:1] + [f for f in found[1:] if f.message != found[0].message]


# -- RUN008 ---------------------------------------------------------------------------------
def killed_by_signal(record: RunRecord) -> list[Finding]:
    found = []
    for view in attempts(record):
        sig = view.signal
        stops = [s for s in view.stops if s.reason and "forwarded" not in s.reason]
        if sig is None and not stops:
            worker = _worker_killed(record, view)
            if worker is not None:
                found.append(_worker_signal_finding(view, worker))
            continue
        if sig == _signal.SIGKILL and view.oom_kills and not stops:
            continue  # RUN001
        if view.of(KernelShutdown):
            continue  # a notebook kernel asked to shut down, then hurried by Jupyter's SIGTERM
        evidence: dict[str, object] = {
            "exit_code": view.end.exit_code,
            "signal": signal_name(sig) if sig else None,
            "last_log_lines": view.lines[-LAST_LINES:],
        }
        if stops:
            evidence["stop_requests"] = [
                {"signal": signal_name(s.signal), "reason": s.reason, "pids": s.targets} for s in stops
            ]
            how = f"by signal {signal_name(sig)}" if sig else f"with status {view.end.exit_code}"
            message = f"Stopped on request ({stops[0].reason}): the trainer ended {how}{_where(view)}"
            severity = Severity.WARNING
            fix = (
                "If the stop was planned (preemption, time limit), make the trainer save on SIGTERM "
                "and resume from TRAINMEDIC_RESUME_FROM with --restarts; if it was a hang stop, read "
                "the hang finding's stacks."
            )
        else:
            message = f"Killed by {signal_name(sig or 0)} from outside the run{_where(view)}"
            severity = None
            fix = None
            if sig == _signal.SIGKILL:
                message += " (not the OOM killer: the OOM-kill counters did not rise)"
        native = _logtext.native_crash(view.error_lines)
        if native is not None:
            evidence.update(native_error=native[0], python_stack=native[1])
            message = f"Native crash ({native[0]}){_where(view)}" + (
                f" in {native[1][0]}" if native[1] else ""
            )
            severity = None
        in_cell, cell = _cell_evidence(view)
        if cell is not None:
            evidence["cell"] = cell
            message += f"; {in_cell.removeprefix(' in ')} was running"
        found.append(KILLED_BY_SIGNAL.finding(message, evidence=evidence, severity=severity, fix=fix))
    return found


def _worker_killed(record: RunRecord, view: AttemptView) -> WorkerDeath | None:
    """A worker that died of a signal (a native crash, a kill) that the OOM killer does not explain."""
    death = dead_worker(record, view)
    if death is None or death.python_exception or _worker_oom(record, view) is not None:
        return None
    return death if (death.native or death.signal is not None) else None


def _worker_signal_finding(view: AttemptView, worker: WorkerDeath) -> Finding:
    facts = _worker_evidence(view, worker)
    how = worker.error or f"killed by {worker.signal}"
    if worker.signal == "SIGKILL" and not view.oom_kills:
        how += " (not the OOM killer: the OOM-kill counters did not rise)"
    at = f" in {worker.frame}" if worker.frame else ""
    native = worker.native
    message = (
        f"{'Native crash' if native else 'Signal death'} of {worker.label}: {how}{at}{_where(view)}"
        + _worker_then(view)
    )
    evidence: dict[str, object] = {
        "worker": facts,
        "exit_code": view.end.exit_code,
        "last_log_lines": view.lines[-LAST_LINES:],
    }
    fix = (
        "Read the worker's faulthandler stack: the native call at the top of the user frame "
        "given (a C extension, a CUDA/NCCL call, a data loader library) crashed; run that rank's "
        "step alone to reproduce it."
        if native
        else None
    )
    return KILLED_BY_SIGNAL.finding(message, evidence=evidence, fix=fix, file=worker.file)


# -- RUN009 ---------------------------------------------------------------------------------
def crashed(record: RunRecord) -> list[Finding]:
    found = []
    for view in attempts(record):
        code = view.end.exit_code
        if code == 0 or view.signal is not None or view.stops or _oom_explains(view):
            continue
        if _worker_oom(record, view) is not None or _worker_killed(record, view) is not None:
            continue  # RUN001 / RUN008 name the worker; the driver's traceback is its consequence
        worker = dead_worker(record, view)
        if worker is not None:
            found.append(_worker_crash_finding(view, worker))
            continue
        tb = _logtext.parse_traceback(view.error_lines) or _logtext.parse_traceback(view.lines)
        if tb is not None and _logtext.ACCELERATOR_OOM.search(f"{tb.exc_type}: {tb.message}"):
            continue  # RUN002
        evidence: dict[str, object] = {"exit_code": code, "last_log_lines": view.lines[-LAST_LINES:]}
        fix = None
        if tb is None:
            message = f"Exited with status {code} without a Python traceback{_where(view)}"
            fix = (
                "Read the last log lines: the program chose this status (sys.exit, os._exit) or a "
                "native part failed; run it once without the launcher to see its own error."
            )
        else:
            frame = tb.user_frame
            evidence.update(
                exception=tb.exc_type,
                exception_message=tb.message,
                user_frame=str(frame) if frame else None,
                frames=[str(f) for f in tb.frames[-6:]],
            )
            at = f" at {PurePath(frame.file).name}:{frame.line} in {frame.function}" if frame else ""
            message = f"Crashed with {tb.exc_type}: {tb.message[:160]}{at}{_where(view)}"
            cause = _numeric_cause(record, f"{tb.exc_type}: {tb.message}")
            if cause is not None:
                evidence["likely_cause"] = {"code": cause.code, "slug": cause.slug, "message": cause.message}
                message += f"; likely cause: the loss blew up before it ({cause.code} {cause.slug})"
                fix = (
                    "The crash is a consequence: the number that overflowed comes from a loss "
                    f"that had already blown up ({cause.message}). {cause.fix}"
                )
        file = tb.user_frame.file if tb and tb.user_frame else None
        found.append(CRASHED.finding(message, evidence=evidence, fix=fix, file=file))
    return found


#: Exceptions that a too large or non-finite number raises (math.exp of a loss of 1e3,
#: int(nan), numpy/sklearn input checks, autograd's anomaly check).
NUMERIC_CRASH = re.compile(
    r"OverflowError|FloatingPointError|math range error|math domain error|out of range float"
    r"|non-?finite|\b(?:nan|inf|infinity)\b",
    re.IGNORECASE,
)


def _numeric_cause(record: RunRecord, exception: str) -> Finding | None:
    """The loss finding (TRN002, else TRN001) that explains an overflow / NaN crash, if any."""
    if not NUMERIC_CRASH.search(exception):
        return None
    from trainmedic.rules import dynamics  # numpy and the curves only for a crash that needs them

    found = dynamics.loss_divergence(record) or dynamics.nonfinite_loss(record)
    return found[0] if found else None


def _worker_crash_finding(view: AttemptView, worker: WorkerDeath) -> Finding:
    facts = _worker_evidence(view, worker)
    if worker.error:
        at = f" at {worker.frame}" if worker.frame else ""
        message = f"{worker.label} crashed with {worker.error}{at}"
        fix = None
    else:
        message = (
            f"{worker.label} died without an error of its own "
            "(no traceback, no fatal-signal report in its output)"
        )
        fix = (
            "Read that worker's own log (Ray: the log_file_path in the error; "
            "/tmp/ray/session_latest/logs) and the kernel log (dmesg) for a kill; rerun under "
            "`trainmedic run --memory-limit` to tell an OOM kill from a crash."
        )
    evidence: dict[str, object] = {
        "worker": facts,
        "exit_code": view.end.exit_code,
        "driver_exception": _worker_driver_exception(view),
        "last_log_lines": view.lines[-LAST_LINES:],
    }
    return CRASHED.finding(
        f"{message}{_where(view)}{_worker_then(view)}", evidence=evidence, fix=fix, file=worker.file
    )


# -- RUN010 ---------------------------------------------------------------------------------
def orphan_processes(record: RunRecord) -> list[Finding]:
    # Ray's own processes (a detached `ray::PlacementGroupCleaner`, idle workers) may outlive a
    # driver that died: trainmedic ends them too, but they are Ray's, not the user's leak.
    orphans = [o for o in record.of_type(OrphanEnded) if not _ray.is_ray_process(o.cmdline)]
    if not orphans:
        return []
    total = sum(o.rss_bytes or 0 for o in orphans)
    return [
        ORPHAN_PROCESSES.finding(
            f"{len(orphans)} process(es) of the trainer tree outlived the trainer "
            f"({human_bytes(total)} RSS); trainmedic ended them",
            evidence={
                "processes": [
                    {
                        "pid": o.pid,
                        "ppid": o.ppid,
                        "cmdline": o.cmdline,
                        "rss_bytes": o.rss_bytes,
                        "signal": signal_name(o.signal) if o.signal else None,
                    }
                    for o in orphans
                ]
            },
        )
    ]


RULES: tuple[Rule, ...] = (
    oom_killed,
    accelerator_oom,
    eval_memory_spike,
    silent_early_exit,
    input_exhausted,
    launcher_stub,
    hang,
    killed_by_signal,
    crashed,
    orphan_processes,
)
