"""`trainmedic stop` and `trainmedic ps`: act on supervised runs from another terminal.

A stop goes through the run's supervisor when it is alive (it then records the
stop, escalates SIGINT -> SIGTERM -> SIGKILL on the trainers, ends what is left,
and writes the diagnosis). Without a live supervisor (a PID started elsewhere, or
a supervisor that was killed), the PID is resolved to its trainers here and
they are stopped with the same escalation.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from trainmedic import runfolder
from trainmedic.errors import UsageError
from trainmedic.supervise import platform, tree
from trainmedic.supervise.signals import stop_processes
from trainmedic.units import signal_name


@dataclass(slots=True)
class StopReport:
    """What `trainmedic stop` did: which processes it signalled, how, and which survived."""

    target: str
    trainer_pids: list[int] = field(default_factory=list)
    launcher_pids: list[int] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)
    via_supervisor: int | None = None
    run_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class LiveRun:
    """A supervised run in progress, as its supervisor announces it for `stop` and `status`."""

    supervisor_pid: int
    run_dir: Path
    command: list[str]
    root_pid: int | None
    trainer_pids: list[int]
    started: float

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["run_dir"] = str(self.run_dir)
        return data


def live_runs() -> list[LiveRun]:
    """Supervised runs whose supervisor is alive; stale registry entries are dropped."""
    runs = []
    for entry, run_dir in runfolder.registered():
        state = runfolder.read_json(run_dir / runfolder.LIVE_STATE) or {}
        pid = int(state.get("supervisor_pid", -1))
        if not tree.is_alive(pid, state.get("supervisor_create_time")):
            runfolder.unregister(entry)
            continue
        runs.append(
            LiveRun(
                supervisor_pid=pid,
                run_dir=run_dir,
                command=list(state.get("command", [])),
                root_pid=state.get("root_pid"),
                trainer_pids=[p for p in state.get("trainer_pids", []) if tree.is_alive(p)],
                started=float(state.get("supervisor_create_time", 0.0)),
            )
        )
    return runs


def stop(target: str, grace: float = 10.0) -> StopReport:
    """Stop a run folder's trainer, or the trainer behind any PID."""
    path = Path(target)
    if path.is_dir():
        return _stop_run_dir(path, grace)
    if not target.isdigit():
        raise UsageError(f"stop: {target!r} is neither a run folder nor a PID")
    pid = int(target)
    if not tree.is_alive(pid):
        raise UsageError(f"stop: no running process with PID {pid}")
    for run in live_runs():
        if pid in (run.supervisor_pid, run.root_pid, *run.trainer_pids):
            return _stop_run_dir(run.run_dir, grace)
    return _stop_pid(pid, grace, StopReport(target=target))


def _stop_run_dir(run_dir: Path, grace: float) -> StopReport:
    state = runfolder.read_json(run_dir / runfolder.LIVE_STATE)
    if state is None:
        raise UsageError(f"stop: {run_dir} is not a trainmedic run folder (no {runfolder.LIVE_STATE})")
    report = StopReport(target=str(run_dir), run_dir=str(run_dir))
    supervisor = int(state.get("supervisor_pid", -1))
    if tree.is_alive(supervisor, state.get("supervisor_create_time")):
        report.via_supervisor = supervisor
        report.trainer_pids = [p for p in state.get("trainer_pids", []) if tree.is_alive(p)]
        runfolder.write_json(
            run_dir / runfolder.STOP_REQUEST, {"reason": "trainmedic stop", "grace": grace, "at": time.time()}
        )
        deadline = time.monotonic() + 3 * grace + 30
        while tree.is_alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.1)
        if tree.is_alive(supervisor):
            report.survivors = [supervisor]
        return report
    root = state.get("root_pid")
    if root is None or not tree.is_alive(int(root)):
        report.signals.append("nothing to stop: the run is not running")
        return report
    return _stop_pid(int(root), grace, report)


def _stop_pid(pid: int, grace: float, report: StopReport) -> StopReport:
    procs, trainers = tree.resolve_trainers(pid)
    report.trainer_pids = [p.pid for p in trainers]
    report.launcher_pids = [p.pid for p in procs.values() if p.role == tree.ROLE_LAUNCHER]
    handles = [p.handle for p in trainers]
    others = [p.handle for p in procs.values() if p.role != tree.ROLE_TRAINER]

    def rest() -> list[psutil.Process]:
        return others

    outcome = stop_processes(handles, first=platform.SIGINT, grace=grace, rest=rest)
    report.signals = [f"{signal_name(sig)} -> {pids}" for sig, pids in outcome.sent]
    report.survivors = outcome.survivors
    return report
