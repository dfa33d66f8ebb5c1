"""A trainmedic run folder: replay `events.jsonl`, and attach `manifest.json` when present.

A folder that did not end under supervision is said to be so (`trainmedic.unfinished`).
"""

from __future__ import annotations

from pathlib import Path

from trainmedic.diagnose.source import LogRead
from trainmedic.events import (
    EnvironmentManifest,
    Epoch,
    MetricSeries,
    RunStart,
    Step,
    read_events,
)
from trainmedic.runfolder import EVENTS, MANIFEST, read_json
from trainmedic.unfinished import unfinished_note


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
    manifest = read_json(folder / MANIFEST)
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
