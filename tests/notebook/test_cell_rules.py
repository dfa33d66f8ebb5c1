"""The RUN rules on a notebook kernel's events: the cell a kernel died in (pure rules, built events)."""

from __future__ import annotations

import signal

from trainmedic.events import (
    CellEnd,
    CellStart,
    HangDetected,
    KernelShutdown,
    MemoryLimit,
    MemorySample,
    OomKill,
    PhaseEnd,
    PhaseStart,
    RunEnd,
    RunStart,
)
from trainmedic.record import RunRecord, cell_label, cell_running
from trainmedic.registry import run_rules

KERNEL, SUPERVISOR = 200, 100


def kernel_events(t0: float = 1000.0) -> list:
    """A kernel that ran cell [1] and is running cell [2] (`model.fit(...)`)."""
    return [
        RunStart(t=t0, pid=SUPERVISOR, command=["python", "-m", "ipykernel_launcher"]),
        PhaseStart(t=t0 + 1, pid=KERNEL, phase="idle"),
        PhaseEnd(t=t0 + 2, pid=KERNEL, phase="idle"),
        CellStart(t=t0 + 2, pid=KERNEL, execution_count=1, first_line="import numpy as np"),
        CellEnd(t=t0 + 3, pid=KERNEL, execution_count=1, first_line="import numpy as np"),
        PhaseStart(t=t0 + 3, pid=KERNEL, phase="idle"),
        PhaseEnd(t=t0 + 9, pid=KERNEL, phase="idle"),
        CellStart(t=t0 + 9, pid=KERNEL, execution_count=2, first_line="model.fit(...)", rss_bytes=1 << 30),
        MemorySample(t=t0 + 10, pid=SUPERVISOR, rss_bytes=3 << 30),
    ]


def test_the_running_cell_is_the_one_without_an_end() -> None:
    events = kernel_events()
    running = cell_running(events)
    assert running is not None
    assert cell_label(running) == "cell [2] `model.fit(...)`"
    assert cell_running(events, until=1005.0) is None  # between cells: none
    ended = [*events, CellEnd(t=1011.0, pid=KERNEL, execution_count=2, first_line="model.fit(...)")]
    assert cell_running(ended) is None


def test_oom_kill_names_the_cell_not_the_idle_phase() -> None:
    events = [
        *kernel_events(),
        MemoryLimit(t=1000.5, pid=SUPERVISOR, limit_bytes=4 << 30, source="memory-limit-option"),
        OomKill(t=1011.0, pid=SUPERVISOR, count=1, scope="cgroup"),
        RunEnd(t=1011.0, pid=SUPERVISOR, exit_code=137, signal=signal.SIGKILL),
    ]
    (oom,) = [f for f in run_rules(RunRecord.of(events)) if f.code == "RUN001"]
    assert "during cell [2] `model.fit(...)`;" in oom.message
    assert oom.evidence["cell"]["execution_count"] == 2
    assert oom.evidence["phase"] is None


def test_a_signal_names_the_cell_but_a_requested_shutdown_is_no_finding() -> None:
    killed = [*kernel_events(), RunEnd(t=1011.0, pid=SUPERVISOR, exit_code=139, signal=signal.SIGSEGV)]
    (found,) = [f for f in run_rules(RunRecord.of(killed)) if f.code == "RUN008"]
    assert found.message.endswith("; cell [2] `model.fit(...)` was running")
    asked = [
        *kernel_events()[:6],
        KernelShutdown(t=1004.0, pid=KERNEL),
        RunEnd(t=1007.0, pid=SUPERVISOR, exit_code=143, signal=signal.SIGTERM),
    ]
    assert [f.code for f in run_rules(RunRecord.of(asked)) if f.severity.value != "info"] == []


def test_hang_names_the_cell_it_happened_in() -> None:
    events = [*kernel_events(), HangDetected(t=1015.0, pid=SUPERVISOR, idle_s=5.0, cpu_percent=0.1)]
    (hang,) = [f for f in run_rules(RunRecord.of(events)) if f.code == "RUN007"]
    assert "in cell [2] `model.fit(...)`" in hang.message


def test_two_fits_in_one_kernel_are_two_trainings_not_one_curve() -> None:
    """fit(epochs=3) then fit(epochs=2) on the same model (the loss keeps falling): epochs 0, 1
    come twice from the kernel; merged by epoch they looked like a loss that stopped falling."""
    from trainmedic.events import Epoch, TrainingPlan
    from trainmedic.evidence.curves import train_loss

    first = [2.254, 2.072, 1.917]
    second = [1.754, 1.581]
    events = [TrainingPlan(t=1.0, pid=KERNEL, framework="keras", epochs=3)]
    events += [Epoch(t=2.0 + i, pid=KERNEL, epoch=i, metrics={"loss": v}) for i, v in enumerate(first)]
    events += [TrainingPlan(t=6.0, pid=KERNEL, framework="keras", epochs=2)]
    events += [Epoch(t=7.0 + i, pid=KERNEL, epoch=i, metrics={"loss": v}) for i, v in enumerate(second)]
    record = RunRecord.of(events)
    curve = train_loss(record)
    assert curve is not None
    assert curve.y.tolist() == second
    assert [f.code for f in run_rules(record) if f.code.startswith("TRN")] == []
    # the same epochs from two processes (ranks, restarted attempts) stay one curve
    other = [Epoch(t=e.t + 0.5, pid=KERNEL + 1, epoch=e.epoch, metrics=e.metrics) for e in events[1:4]]
    assert len(train_loss(RunRecord.of([*events[:4], *other]))) == 6
