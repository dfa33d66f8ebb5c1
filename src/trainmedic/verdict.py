"""The diagnosis of a run folder: every rule over its events, and its outputs written, at the end
and as the run goes.

`write_outputs` is the one place where the diagnosis is written into the run folder:
findings.json, then the report (report.html), each replaced atomically. `LiveDiagnosis` calls
it during the run whenever an error-level finding appears, so a supervisor killed without
warning (SIGKILL to the job's process group at a scheduler's time limit) leaves the diagnosis
so far, not only raw events; and once more when the run has ended.

The supervisor makes one `LiveDiagnosis` per run folder and tells it every event. The report's
renderer is handed in (`render`, by `cli/run_cmd.py`): this module imports no renderer, so the
supervisor, a collector, never reaches one (tests/test_architecture.py).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

from trainmedic import runfolder
from trainmedic.atomicfile import write_text_atomic
from trainmedic.eventlog.reader import read_events
from trainmedic.events import Epoch, Event, FindingRaised, HangDetected, LogLine, OomKill, ProcessExit, Step
from trainmedic.evidence.logtext import ACCELERATOR_OOM, FATAL_NATIVE, INPUT_EXHAUSTED, TRACEBACK_START
from trainmedic.findings import Finding, Severity, findings_to_json
from trainmedic.record import RunRecord, run_counts
from trainmedic.registry import run_rules

#: Draws the report of a run folder into it (`trainmedic.report.bounded.write_report_within`
#: under `trainmedic run`): what it returns, when a dict (seconds, peak memory), is kept.
Render = Callable[[Path], object]

# A live diagnosis re-reads the whole events file: after one that took d seconds the next waits
# at least COST_FACTOR * d, so it never takes more than 1/COST_FACTOR of one core, however long
# the run and however often it is asked for.
COST_FACTOR = 20.0
MIN_INTERVAL_S = 1.0


def diagnose_run_dir(run_dir: Path) -> tuple[RunRecord, list[Finding]]:
    """Every rule of every family over all events of the run (supervisor and trainers)."""
    path = run_dir / runfolder.EVENTS
    events = read_events(path).events if path.exists() else []
    record = RunRecord.of(events)
    return record, run_rules(record)


def write_outputs(run_dir: Path, findings: list[Finding], render: Render) -> dict[str, object]:
    """Write the diagnosis files: findings.json, then the report `render` draws. Returns what
    became of the report (`{"status": "written", ...}` with what `render` measured, or
    `{"status": "skipped", "reason": ...}`); a report that was not drawn is said in one line."""
    write_text_atomic(run_dir / runfolder.FINDINGS, findings_to_json(findings) + "\n")
    try:
        drawn = render(run_dir)
    except Exception as exc:  # a report that cannot be drawn must never change how the run ends
        reason = str(exc) or repr(exc)
        sys.stderr.write(f"trainmedic: report.html skipped: {reason} (findings.json is complete)\n")
        return {"status": "skipped", "reason": reason}
    return {"status": "written", **(drawn if isinstance(drawn, dict) else {})}


def may_raise_error(event: Event) -> bool:
    """Whether an error-level finding may follow from this event: the supervisor's own evidence
    (a hang, an OOM kill, a process ended by a signal, a log line of a failure such as a traceback
    or an out-of-memory error) and what a trainer reports (a guard's finding, a non-finite
    metric). Ordinary steps, epochs, progress lines and memory samples are not: diagnosing after
    each would cost the run CPU for nothing."""
    if isinstance(event, (HangDetected, OomKill, FindingRaised)):
        return True
    if isinstance(event, LogLine):
        text = event.text
        return bool(
            TRACEBACK_START in text
            or FATAL_NATIVE.match(text)
            or ACCELERATOR_OOM.search(text)
            or INPUT_EXHAUSTED.search(text)
        )
    if isinstance(event, ProcessExit):
        return event.signal is not None
    if isinstance(event, (Step, Epoch)):
        return any(isinstance(v, float) and not math.isfinite(v) for v in event.metrics.values())
    return False


class LiveDiagnosis:
    """Keeps findings.json and report.html current while the run goes on.

    Events that may raise an error-level finding mark the diagnosis as due (`note`, from any
    thread); the supervisor's loop then calls `refresh`, which runs every rule over the events
    so far and rewrites the files when the error-level findings differ from those last written.
    """

    def __init__(self, run_dir: Path, *, render: Render) -> None:
        self.run_dir = run_dir
        self.render = render
        self._due = False
        self._next_allowed = 0.0
        self._written: tuple[tuple[str, str], ...] = ()
        self._failed = False
        self.report: dict[str, object] = {"status": "not drawn"}
        self.counts: dict[str, float | int | None] = {}  # what the trainer ran (`record.run_counts`)

    def note(self, event: Event) -> None:
        """An event the supervisor wrote: may it make the diagnosis due? (Any thread.)"""
        if not self._due and may_raise_error(event):
            self._due = True

    def refresh(self) -> bool:
        """Diagnose now if due and allowed; True when the files were rewritten."""
        now = time.monotonic()
        if not self._due or now < self._next_allowed:
            return False
        self._due = False
        try:
            _, findings = diagnose_run_dir(self.run_dir)
            errors = tuple(sorted((f.code, f.message) for f in findings if f.severity is Severity.ERROR))
            changed = bool(errors) and errors != self._written
            if changed:
                self.report = write_outputs(self.run_dir, findings, self.render)
                self._written = errors
        except Exception as exc:  # the live diagnosis must never end the supervision
            if not self._failed:
                sys.stderr.write(f"trainmedic: diagnosis during the run failed: {exc!r}\n")
            self._failed = True
            changed = False
        took = time.monotonic() - now
        self._next_allowed = time.monotonic() + max(MIN_INTERVAL_S, COST_FACTOR * took)
        return changed

    def conclude(self) -> list[Finding]:
        """The run has ended: every rule over every event, the outputs written; the findings."""
        record, findings = diagnose_run_dir(self.run_dir)
        self.report = write_outputs(self.run_dir, findings, self.render)
        self.counts = run_counts(record)
        return findings


#: Makes the diagnosis of a run folder (the supervisor calls it once the folder exists).
DiagnosisFactory = Callable[[Path], LiveDiagnosis]
