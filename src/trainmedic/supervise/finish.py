"""After the run: read its events, apply every rule, write the outputs.

`write_outputs` is the one post-run place where renderers write files into the
run folder: findings.json, then report.html.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trainmedic.events import read_events
from trainmedic.findings import Finding, findings_to_json
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.report.html import write_report
from trainmedic.supervise import rundir


def diagnose_run_dir(run_dir: Path) -> tuple[RunRecord, list[Finding]]:
    """Every rule of every family over all events of the run (supervisor and trainers)."""
    path = run_dir / rundir.EVENTS
    events = read_events(path).events if path.exists() else []
    record = RunRecord.of(events)
    return record, run_rules(record)


def write_outputs(run_dir: Path, record: RunRecord, findings: list[Finding]) -> None:
    """Write the post-run files. Renderers of new formats (the HTML report) are called here."""
    (run_dir / rundir.FINDINGS).write_text(findings_to_json(findings) + "\n")
    try:
        write_report(run_dir)
    except Exception as exc:  # a report that cannot be drawn must never change how the run ends
        sys.stderr.write(f"trainmedic: report.html not written: {exc!r}\n")
