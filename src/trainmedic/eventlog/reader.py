"""The event log's reader: a JSONL event file back as events, whatever a kill left of it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from trainmedic.events import Event, decode


@dataclass(slots=True)
class ReadResult:
    """Events read from a file, and what had to be skipped (e.g. a line cut by a kill)."""

    events: list[Event]
    skipped_lines: list[int] = field(default_factory=list)
    truncated_tail: bool = False


def read_events(path: str | os.PathLike[str]) -> ReadResult:
    """Read a JSONL event file, tolerating a truncated last line and unknown event types."""
    raw = Path(path).read_bytes()
    lines = raw.split(b"\n")
    truncated_tail = bool(lines and lines[-1].strip())
    result = ReadResult(events=[], truncated_tail=False)
    for number, chunk in enumerate(lines, start=1):
        if not chunk.strip():
            continue
        try:
            result.events.append(decode(chunk.decode("utf-8", errors="replace")))
        except (ValueError, json.JSONDecodeError):
            if number == len(lines) and truncated_tail:
                result.truncated_tail = True
            else:
                result.skipped_lines.append(number)
    return result
