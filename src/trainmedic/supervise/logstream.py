"""Tee the trainer's output to the terminal and `output.log` unchanged, and read it as lines.

Bytes pass through exactly as written (progress bars with `\\r` included);
for parsing, a line ends at `\\n`, and of a run of `\\r` updates only the last
one counts, so a tqdm bar is one line, not thousands.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

LineCallback = Callable[[str, str], None]  # (stream, text)
_CHUNK = 65536
_MAX_LINE = 8192


class OutputLog:
    """The run's output.log, shared by the stdout and stderr readers."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file = Path(path).open("ab")  # noqa: SIM115 - closed by close(), lives for the run
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._file.write(data)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class StreamTee(threading.Thread):
    """Reads one pipe of the child until EOF: echo, log, and hand complete lines to `on_line`."""

    def __init__(
        self,
        name: str,
        pipe: IO[bytes],
        echo: Callable[[bytes], None] | None,
        log: OutputLog,
        on_line: LineCallback,
    ) -> None:
        super().__init__(name=f"trainmedic-tee-{name}", daemon=True)
        self.stream = name
        self._fd = pipe.fileno()
        self._pipe = pipe
        self._echo = echo
        self._log = log
        self._on_line = on_line
        self._pending = b""
        self.last_output = time.monotonic()
        self.bytes_seen = 0

    def run(self) -> None:
        try:
            while True:
                chunk = os.read(self._fd, _CHUNK)
                if not chunk:
                    break
                self.last_output = time.monotonic()
                self.bytes_seen += len(chunk)
                if self._echo is not None:
                    self._echo(chunk)
                self._log.write(chunk)
                self._split(chunk)
            if self._pending:
                self._emit(self._pending)
        finally:
            with contextlib.suppress(OSError):
                self._pipe.close()

    def _split(self, chunk: bytes) -> None:
        data = self._pending + chunk
        *lines, self._pending = data.split(b"\n")
        for line in lines:
            self._emit(line)
        if len(self._pending) > _MAX_LINE:  # a bar that never ends its line: keep the last update
            self._pending = self._pending.rsplit(b"\r", 1)[-1][-_MAX_LINE:]

    def _emit(self, raw: bytes) -> None:
        last = raw.rstrip(b"\r").rsplit(b"\r", 1)[-1]
        text = last.decode("utf-8", errors="replace").rstrip()
        if text:
            try:
                self._on_line(self.stream, text)
            except Exception as exc:  # parsing must never stop the tee
                os.write(2, f"trainmedic: log parsing failed: {exc!r}\n".encode())
