"""The event log's writer: events appended to a JSONL file as they happen.

One `os.write` per line, so a killed writer leaves every complete line readable and several
processes can append to the same file (O_APPEND keeps each line whole). What a fast loop sends
again and again is bounded on the way (`steps.CurveLog`, `samples.SampleLog`). Standard library
only: it runs inside the user's interpreter.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

from trainmedic.eventlog.steps import CurveLog
from trainmedic.events import Event, encode


class EventWriter:
    """Appends events to a JSONL file, one `os.write` per line, so each line lands whole.

    Safe to share between threads, and between processes appending to the same file. Each
    write goes straight to the kernel: a SIGKILL after `emit` returns loses nothing but the
    open bucket of step events, which `steps.CurveLog` merges (bounding a fast loop's file).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._curve = CurveLog()
        # A fork while another thread holds the lock would deadlock the child's first emit.
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _reset_lock(ref))

    def emit(self, event: Event) -> None:
        with self._lock:
            self._write(self._curve.feed(event))

    def flush(self) -> None:
        """Write the open buckets of step events, and merge no more: the process is ending."""
        with self._lock:
            self._write(self._curve.flush(end=True))

    def _write(self, events: list[Event]) -> None:
        if self._fd is not None:
            for event in events:
                os.write(self._fd, (encode(event) + "\n").encode("utf-8"))

    def close(self) -> None:
        self.flush()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reset_lock(ref: weakref.ref[EventWriter]) -> None:
    writer = ref()
    if writer is not None:
        writer._lock = threading.Lock()
        writer._curve = type(writer._curve)()  # the parent's open buckets are the parent's to write
