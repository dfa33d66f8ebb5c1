"""What a log reader returns: the events of one log file, and what it had to skip.

Logs rarely say when each value was written: readers that have no wall time give
their events synthetic times that keep the file's own order and end at the
file's modification time, so several files (ranks, restarts) still merge in a
sensible time order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trainmedic.events import Event

#: Events read from logs carry this pid: no process of ours wrote them.
LOG_PID = 0
_SPACING_S = 1e-3


@dataclass(slots=True)
class LogRead:
    """The events of one log, its format, the framework that wrote it, and notes on what was skipped."""

    path: Path
    format: str
    framework: str
    events: list[Event] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    points: int = 0
    epochs: int | None = None  # epochs requested, when the log states it
    finished: bool = False  # the log itself records that the training loop returned
    notes: list[str] = field(default_factory=list)  # what a reader must know (a run that did not end)
    label: str = ""  # how to name a source that is no file (mlflow://RUN_ID); default: the path

    @property
    def name(self) -> str:
        return self.label or str(self.path)

    def summary(self) -> dict[str, object]:
        return {
            "path": self.name,
            "format": self.format,
            "framework": self.framework,
            "events": len(self.events),
            "points": self.points,
            "skipped": list(self.skipped),
            "notes": list(self.notes),
        }


def synthetic_times(path: Path, count: int) -> list[float]:
    """`count` increasing times ending at the file's mtime, 1 ms apart (logs without wall times)."""
    end = path.stat().st_mtime
    return [end - (count - i) * _SPACING_S for i in range(count)]
