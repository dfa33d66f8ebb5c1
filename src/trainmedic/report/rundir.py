"""Reading a run folder (events.jsonl, findings.json, manifest.json, output.log) for the report.

A run folder may come from a supervisor that was killed half-way: a cut last
event line, no findings.json, no manifest. The report still renders what is
there. What cannot be trusted (a findings.json or manifest.json that is not
valid JSON of the expected shape) is a usage error naming the file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmedic.errors import UsageError
from trainmedic.events import read_events
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.runfolder import EVENTS, FINDINGS, MANIFEST, OUTPUT
from trainmedic.unfinished import unfinished_note

LOG_TAIL_BYTES = 256 * 1024
LOG_LINES = 60
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_FAILURE = re.compile(r"Killed|out of memory|Error:|Exception:")


@dataclass(slots=True)
class RunFolder:
    """A run folder read back: its events, findings, manifest and last log lines."""

    path: Path
    record: RunRecord
    findings: list[Finding]
    manifest: dict[str, Any]
    log_tail: list[str]
    note: str | None = None  # set when the run did not end under supervision


def load_run_folder(run_dir: str | os.PathLike[str]) -> RunFolder:
    """Everything the report needs from a run folder; UsageError for what is not one."""
    path = Path(run_dir)
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory; expected a run folder holding {EVENTS}")
    events_file = path / EVENTS
    if not events_file.is_file():
        raise UsageError(f"{path}: no {EVENTS} here; expected a run folder written by `trainmedic run`")
    record = RunRecord.of(read_events(events_file).events)
    note = unfinished_note(path, record.events)
    return RunFolder(
        path=path,
        record=record,
        findings=_findings(path / FINDINGS, record, ended=note is None),
        manifest=_manifest(path / MANIFEST),
        log_tail=_log_tail(path / OUTPUT, record),
        note=note,
    )


def _load_json(path: Path, expected: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not readable as JSON ({exc}); expected {expected}") from exc


def _findings(path: Path, record: RunRecord, *, ended: bool = True) -> list[Finding]:
    """findings.json of an ended run; else what the rules find in the events (as `diagnose` would):
    a run that did not end may have events after the findings.json written during it."""
    if not ended or not path.exists():
        from trainmedic.registry import run_rules

        return run_rules(record)
    expected = '{"findings": [...]} as written by `trainmedic run`'
    data = _load_json(path, expected)
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise UsageError(f"{path}: expected {expected}")
    try:
        return [Finding.from_dict(item) for item in data["findings"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path}: a finding is malformed ({exc!r}); expected {expected}") from exc


def _manifest(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = _load_json(path, "a JSON object describing the environment")
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object describing the environment")
    return data


def _log_tail(path: Path, record: RunRecord) -> list[str]:
    if path.is_file():
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            text = f.read().decode("utf-8", errors="replace")
        lines = clean_lines(text.splitlines())
    else:
        lines = clean_lines(record.last_log_lines(LOG_TAIL_BYTES // 100))
    return lines_around_failure(lines)


def clean_lines(lines: Sequence[str]) -> list[str]:
    """Terminal output as a reader saw it: colours removed, progress bars at their last redraw."""
    cleaned = []
    for raw in lines:
        line = _ANSI.sub("", raw)
        if "\r" in line:
            line = line.rstrip("\r").rsplit("\r", 1)[-1]
        cleaned.append(line.replace("\b", ""))
    return cleaned


def lines_around_failure(lines: Sequence[str], count: int = LOG_LINES) -> list[str]:
    """The last `count` lines; when the last traceback or error began before them, its first
    lines too (a long TensorFlow traceback would otherwise hide where it started)."""
    first_tail = max(0, len(lines) - count)
    tail = list(lines[first_tail:])
    hits = [i for i, line in enumerate(lines) if _TRACEBACK.search(line)]
    hits = hits or [i for i, line in enumerate(lines) if _FAILURE.search(line)]
    if not hits or hits[-1] >= first_tail:
        return tail
    head = list(lines[max(0, hits[-1] - 3) : min(first_tail, hits[-1] + count // 3)])
    gap = first_tail - (hits[-1] + count // 3)
    return head + ([f"... ({gap} lines) ..."] if gap > 0 else []) + tail
