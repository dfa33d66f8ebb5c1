"""RUN008 `killed-by-signal`: a signal that was not the OOM killer ended the run, or a native crash.

Collector: the supervisor (`trainmedic run`) sends each attempt's `RunEnd` (the signal, or a
launcher's 128+N status), the stops it was asked for or made itself (`StopRequest`: Ctrl-C,
`trainmedic stop`, `--on-hang stop`, a forwarded SIGTERM), the OOM-kill counters (`OomKill`,
whose rise makes a SIGKILL RUN001's) and the trainer's log lines, where a faulthandler report
or a distributed job's driver names a worker that died of a signal (`_helpers.workers`).
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainmedic.events import Event, KernelShutdown, StopRequest
from trainmedic.evidence import logtext as _logtext
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.attempts import (
    LAST_LINES,
    AttemptView,
    attempt_suffix,
    attempts,
    cell_evidence,
    worker_evidence,
    worker_killed,
    worker_then,
)
from trainmedic.rules._helpers.run_examples import log_lines, supervised_run
from trainmedic.units import signal_name

if TYPE_CHECKING:
    from trainmedic.rules._helpers.workers import WorkerDeath


def _example() -> list[Event]:
    """Slurm's SIGTERM at the time limit, reported by the launching shell as 143 (128 + 15)."""
    return supervised_run(*log_lines("Epoch 4/20"), exit_code=143)


SPEC = FindingSpec(
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
    decided_in=("run events",),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class Signalled:
    """One attempt ended by a signal or a stop request: which, who asked, what crashed natively."""

    view: AttemptView
    signal: int | None
    stops: list[StopRequest]  # stops requested of the run (not the ones it forwarded)
    native: tuple[str, list[str]] | None  # a faulthandler report: the error and its Python stack
    in_cell: str  # ' in cell [4] `model.fit(...)`' when a notebook kernel died mid-cell
    cell: dict[str, object] | None

    def evidence(self) -> dict[str, object]:
        view, stops = self.view, self.stops
        evidence: dict[str, object] = {
            "exit_code": view.end.exit_code,
            "signal": signal_name(self.signal) if self.signal else None,
            "last_log_lines": view.lines[-LAST_LINES:],
        }
        if stops:
            evidence["stop_requests"] = [
                {"signal": signal_name(s.signal), "reason": s.reason, "pids": s.targets} for s in stops
            ]
        if self.native is not None:
            evidence.update(native_error=self.native[0], python_stack=self.native[1])
        if self.cell is not None:
            evidence["cell"] = self.cell
        return evidence


# -- the decision ---------------------------------------------------------------------------
def killed_by_signal(record: RunRecord) -> list[Finding]:
    """Each attempt that a signal or a stop request ended, unless the OOM killer's counters rose
    (RUN001) or a notebook kernel was asked to shut down; else a worker that died of a signal."""
    found = []
    for view in attempts(record):
        sig = view.signal
        stops = [s for s in view.stops if s.reason and "forwarded" not in s.reason]
        if sig is None and not stops:
            worker = worker_killed(record, view)
            if worker is not None:
                found.append(
                    SPEC.finding(
                        worker_message(view, worker),
                        evidence=_worker_evidence(view, worker),
                        fix=worker_fix(worker),
                        file=worker.file,
                    )
                )
            continue
        if sig == _signal.SIGKILL and view.oom_kills and not stops:
            continue  # RUN001
        if view.of(KernelShutdown):
            continue  # a notebook kernel asked to shut down, then hurried by Jupyter's SIGTERM
        in_cell, cell = cell_evidence(view)
        ending = Signalled(view, sig, stops, _logtext.native_crash(view.error_lines), in_cell, cell)
        found.append(
            SPEC.finding(
                message(ending), evidence=ending.evidence(), severity=severity(ending), fix=fix(ending)
            )
        )
    return found


def severity(ending: Signalled) -> Severity | None:
    """A stop that was asked for is a warning, unless a native crash came first."""
    return Severity.WARNING if ending.stops and ending.native is None else None


def _worker_evidence(view: AttemptView, worker: WorkerDeath) -> dict[str, object]:
    return {
        "worker": worker_evidence(view, worker),
        "exit_code": view.end.exit_code,
        "last_log_lines": view.lines[-LAST_LINES:],
    }


RULES: tuple[Rule, ...] = (killed_by_signal,)


# -- the wording ----------------------------------------------------------------------------
def message(ending: Signalled) -> str:
    view, sig, stops = ending.view, ending.signal, ending.stops
    if stops:
        how = f"by signal {signal_name(sig)}" if sig else f"with status {view.end.exit_code}"
        message = f"Stopped on request ({stops[0].reason}): the trainer ended {how}{attempt_suffix(view)}"
    else:
        message = f"Killed by {signal_name(sig or 0)} from outside the run{attempt_suffix(view)}"
        if sig == _signal.SIGKILL:
            message += " (not the OOM killer: the OOM-kill counters did not rise)"
    if ending.native is not None:
        error, stack = ending.native
        message = f"Native crash ({error}){attempt_suffix(view)}" + (f" in {stack[0]}" if stack else "")
    if ending.cell is not None:
        message += f"; {ending.in_cell.removeprefix(' in ')} was running"
    return message


def fix(ending: Signalled) -> str:
    """A requested stop: save on SIGTERM and resume. Otherwise the spec's fix."""
    if ending.stops:
        return (
            "If the stop was planned (preemption, time limit), make the trainer save on SIGTERM "
            "and resume from TRAINMEDIC_RESUME_FROM with --restarts; if it was a hang stop, read "
            "the hang finding's stacks."
        )
    return SPEC.fix


def worker_message(view: AttemptView, worker: WorkerDeath) -> str:
    """'Native crash of Ray Train worker rank 1 (pid 20446, ...): Fatal Python error: Aborted in
    step (train.py:12); the run then exited with status 1 (ray.train.WorkerGroupError)'."""
    how = worker.error or f"killed by {worker.signal}"
    if worker.signal == "SIGKILL" and not view.oom_kills:
        how += " (not the OOM killer: the OOM-kill counters did not rise)"
    at = f" in {worker.frame}" if worker.frame else ""
    return (
        f"{'Native crash' if worker.native else 'Signal death'} of {worker.label}: {how}{at}"
        f"{attempt_suffix(view)}{worker_then(view)}"
    )


def worker_fix(worker: WorkerDeath) -> str:
    """A worker's native crash: read its faulthandler stack. Otherwise the spec's fix."""
    if not worker.native:
        return SPEC.fix
    return (
        "Read the worker's faulthandler stack: the native call at the top of the user frame "
        "given (a C extension, a CUDA/NCCL call, a data loader library) crashed; run that rank's "
        "step alone to reproduce it."
    )
