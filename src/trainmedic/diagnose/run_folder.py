"""A trainmedic run folder: replay `events.jsonl`, and attach `manifest.json` when present.

A folder whose supervisor recorded a start but no end did not end under
supervision (the supervisor is still going, or was killed, e.g. by the SIGKILL a
scheduler sends at a time limit): `unfinished_note` says which, so `diagnose` and
`report` never present such a folder as a finished run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from trainmedic.diagnose.source import LogRead
from trainmedic.events import (
    EnvironmentManifest,
    Epoch,
    Event,
    MetricSeries,
    RunEnd,
    RunStart,
    Step,
    read_events,
)

EVENTS = "events.jsonl"
MANIFEST = "manifest.json"
LIVE_STATE = "supervisor.json"


def is_run_folder(path: Path) -> bool:
    return path.is_dir() and (path / EVENTS).is_file()


def read_run_folder(path: Path) -> LogRead:
    events_path = path / EVENTS if path.is_dir() else path
    folder = events_path.parent
    result = read_events(events_path)
    read = LogRead(path=folder, format="trainmedic-run", framework="trainmedic", events=list(result.events))
    if result.skipped_lines:
        shown = ", ".join(map(str, result.skipped_lines[:5]))
        read.skipped.append(f"{EVENTS}: {len(result.skipped_lines)} unreadable line(s) ({shown})")
    if result.truncated_tail:
        read.skipped.append(f"{EVENTS}: the last line was cut mid-write")
    manifest = load_manifest(folder / MANIFEST)
    if manifest is not None:
        start = min((e.t for e in read.events), default=0.0)
        read.events.append(EnvironmentManifest(manifest=manifest, t=start, pid=0))
    note = unfinished_note(folder, read.events)
    if note is not None:
        read.notes.append(note)
    starts = [e for e in read.events if isinstance(e, RunStart)]
    if starts and starts[-1].expect_epochs:
        read.epochs = starts[-1].expect_epochs
    read.points = sum(
        len(e.metrics)
        if isinstance(e, (Step, Epoch))
        else len(e.values)
        if isinstance(e, MetricSeries)
        else 0
        for e in read.events
    )
    return read


def load_manifest(path: Path) -> dict[str, object] | None:
    """A manifest.json as a dict; None when absent or unreadable (a run folder may predate it)."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def unfinished_note(folder: Path, events: Sequence[Event]) -> str | None:
    """None when every start the supervisor recorded has its end; else one sentence saying the run
    did not end under supervision, and whether its supervisor is still running (supervisor.json)."""
    ended = {(e.pid, e.attempt) for e in events if isinstance(e, RunEnd)}
    open_starts = [e for e in events if isinstance(e, RunStart) and (e.pid, e.attempt) not in ended]
    if not open_starts:
        return None
    last = max((e.t for e in events), default=open_starts[-1].t)
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last))
    pid = open_starts[-1].pid
    if _supervisor_alive(folder / LIVE_STATE, pid):
        return (
            f"{folder}: the run is still going (supervisor PID {pid}); "
            f"the findings cover its events up to {until}"
        )
    return (
        f"{folder}: the run did not end under supervision: its supervisor (PID {pid}) stopped without "
        f"recording how the run ended (killed, e.g. by a scheduler's SIGKILL at a time limit); "
        f"the findings cover its events up to {until}"
    )


def _supervisor_alive(state_path: Path, pid: int) -> bool:
    """The supervisor that wrote supervisor.json runs on this machine now (same PID, same start)."""
    import psutil

    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        if int(state["supervisor_pid"]) != pid:
            return False
        return abs(psutil.Process(pid).create_time() - float(state["supervisor_create_time"])) < 1.0
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return False
