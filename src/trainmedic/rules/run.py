"""RUN: how a supervised run ended. Catalogue entries (rules join them as they land)."""

from __future__ import annotations

from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule

OOM_KILLED = FindingSpec(
    code="RUN001",
    slug="oom-killed",
    severity=Severity.ERROR,
    title="Killed by the OOM killer",
    what="The trainer was killed by the kernel or cgroup out-of-memory killer (SIGKILL, exit 137).",
    why=(
        "The process vanishes without a traceback, often at epoch end or during evaluation, "
        "and launchers report only 'exitcode -9'. Every step since the last checkpoint is lost."
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
        "Memory during evaluation or at epoch end rose well above the training steady "
        "state (by default 1.5x or more)."
    ),
    why=(
        "The spike repeats every epoch and decides the memory the run needs: on a smaller "
        "card or a busier machine it becomes an OOM kill at an epoch boundary."
    ),
    example="Training holds 2.1 GiB; each epoch-end mAP callback peaks at 4.0 GiB (1.9x).",
    fix=(
        "Evaluate once after training (or every k epochs) and keep a light per-epoch "
        "validation loss; use a smaller evaluation batch."
    ),
)

SILENT_EARLY_EXIT = FindingSpec(
    code="RUN004",
    slug="silent-early-exit",
    severity=Severity.ERROR,
    title="Exit 0 after fewer epochs than requested",
    what=(
        "The run exited with status 0 but fewer epochs (or steps) ran than were requested, "
        "and no early-stopping callback explains it."
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
        "trainer, which keeps running or is orphaned."
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
    fix="Read the stacks: the frame each thread waits in names the lock, queue or collective.",
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
    example="SIGTERM from Slurm at the time limit; SIGSEGV in a native extension.",
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
    example="ValueError: Shapes (None, 10) and (None, 1) are incompatible (train.py:42)",
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

RULES: tuple[Rule, ...] = ()
