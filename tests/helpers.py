"""Test helpers shared across test modules (real processes, no mocks)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trainmedic.events import read_events
from trainmedic.instrument.environment import child_env
from trainmedic.record import RunRecord


@dataclass
class InstrumentedRun:
    result: subprocess.CompletedProcess[str]
    record: RunRecord
    events_path: Path


def run_instrumented(
    argv: list[str],
    tmp_path: Path,
    *,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> InstrumentedRun:
    """Run a real command with the boot module active (as under `trainmedic run`, minus the
    supervisor) and return its output and the events its processes emitted."""
    events_path = tmp_path / "events.jsonl"
    full_env = child_env(events_path)
    full_env.update(env or {})
    if argv and argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    events = read_events(events_path).events if events_path.exists() else []
    return InstrumentedRun(result=result, record=RunRecord.of(events), events_path=events_path)
