"""RUN: how a supervised run ended, decided from the events of `trainmedic run`.

Each attempt (a run with `--restarts` has several) is classified on its own,
from its `RunEnd`, the supervisor's observations (OOM-kill counters, stop
requests, hang stacks, orphans, memory samples) and the trainer's log lines.
Exit statuses follow the shell: 128+N is "killed by signal N", also when a
launcher (bash, torchrun) reports its trainer's death that way.

One module per family: `memory` (RUN001-003), `exits` (RUN004, 005, 008, 009),
`processes` (RUN006, 007, 010); `_attempts` holds what they share. The registry
collects this package's `SPECS` and `RULES`, in catalogue order.
"""

from __future__ import annotations

from trainmedic.findings import FindingSpec
from trainmedic.record import Rule
from trainmedic.rules.run._attempts import LAST_LINES, AttemptView, attempts, dead_worker
from trainmedic.rules.run.exits import (
    CRASHED,
    INPUT_EXHAUSTED,
    KILLED_BY_SIGNAL,
    NUMERIC_CRASH,
    SILENT_EARLY_EXIT,
    crashed,
    input_exhausted,
    killed_by_signal,
    silent_early_exit,
)
from trainmedic.rules.run.memory import (
    ACCELERATOR_OOM,
    EVAL_MEMORY_SPIKE,
    MIN_TRAIN_SAMPLES,
    OOM_KILLED,
    PHASE_LABELS,
    SPIKE_RATIO,
    accelerator_oom,
    eval_memory_spike,
    oom_killed,
)
from trainmedic.rules.run.processes import (
    HANG,
    LAUNCHER_STUB,
    ORPHAN_PROCESSES,
    hang,
    innermost_frames,
    launcher_kind,
    launcher_stub,
    orphan_processes,
)
from trainmedic.units import signal_name

__all__ = [
    "ACCELERATOR_OOM",
    "CRASHED",
    "EVAL_MEMORY_SPIKE",
    "HANG",
    "INPUT_EXHAUSTED",
    "KILLED_BY_SIGNAL",
    "LAST_LINES",
    "LAUNCHER_STUB",
    "MIN_TRAIN_SAMPLES",
    "NUMERIC_CRASH",
    "OOM_KILLED",
    "ORPHAN_PROCESSES",
    "PHASE_LABELS",
    "RULES",
    "SILENT_EARLY_EXIT",
    "SPECS",
    "SPIKE_RATIO",
    "AttemptView",
    "accelerator_oom",
    "attempts",
    "crashed",
    "dead_worker",
    "eval_memory_spike",
    "hang",
    "innermost_frames",
    "input_exhausted",
    "killed_by_signal",
    "launcher_kind",
    "launcher_stub",
    "oom_killed",
    "orphan_processes",
    "signal_name",
    "silent_early_exit",
]

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
