"""The live status: elapsed time, epoch/step, loss, memory, phase, trainer PIDs.

On a terminal it is one line kept below the trainer's output, redrawn each
sample: output from the trainer first clears it, and it is drawn again only
when the cursor is back at the start of a line, so a progress bar that is
still being updated (`\\r`) is never overwritten. Elsewhere (logs, CI) it is a
plain line on stderr every 60 s.
"""

from __future__ import annotations

import os
import threading
import time

from trainmedic.events import MemorySample
from trainmedic.findings import epoch_number
from trainmedic.supervise.eventtail import TrainerProgress
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.tree import Proc
from trainmedic.units import human_bytes

PLAIN_INTERVAL_S = 60.0
_CLEAR = b"\r\x1b[K"


def format_status(
    elapsed: float,
    sample: MemorySample,
    logs: LogInterpreter,
    progress: TrainerProgress,
    trainers: list[Proc],
) -> str:
    minutes, seconds = divmod(int(elapsed), 60)
    parts = [f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}"]
    epoch = progress.epoch if progress.epoch is not None else logs.epoch
    total = progress.epochs_total or logs.epochs_total
    if epoch is not None:
        parts.append(f"epoch {epoch_number(epoch)}" + (f"/{total}" if total else ""))
    if progress.step is not None:
        parts.append(f"step {progress.step}")
    if progress.loss is not None:
        parts.append(f"loss {progress.loss:.4g}")
    parts.append(f"rss {_bytes(sample.rss_bytes)}")
    if sample.limit_bytes:
        parts.append(f"limit {_bytes(sample.limit_bytes)}")
    if sample.gpu_bytes is not None:
        parts.append(f"gpu {_bytes(sample.gpu_bytes)}")
    phase = progress.phase or logs.phase
    if phase:
        parts.append(f"phase {phase}")
    if trainers:
        parts.append("trainer pid " + ",".join(str(p.pid) for p in trainers))
    return "[trainmedic] " + " | ".join(parts)


class Terminal:
    """The supervisor's view of the user's terminal: the trainer's output and the status line
    are written here, under one lock, so they never interleave mid-line."""

    def __init__(self, *, live: bool, out_fd: int = 1, err_fd: int = 2) -> None:
        self.live = live
        self.out_fd = out_fd
        self.err_fd = err_fd
        self._lock = threading.Lock()
        self._status = b""
        self._shown = False
        self._at_line_start = True

    def echo(self, fd: int, chunk: bytes) -> None:
        """Write the trainer's bytes unchanged (clearing the status line around them)."""
        with self._lock:
            self._hide()
            _write_all(fd, chunk)
            self._at_line_start = chunk.endswith(b"\n")
            self._draw()

    def show(self, text: str) -> None:
        with self._lock:
            import shutil  # a terminal only: shutil also loads bz2 and lzma (~3 ms of every run)

            width = max(20, shutil.get_terminal_size().columns - 1)
            self._status = text[:width].encode()
            self._hide()
            self._draw()

    def line(self, text: str) -> None:
        """A plain line on stderr (non-terminal status, supervisor messages)."""
        with self._lock:
            self._hide()
            prefix = b"" if self._at_line_start else b"\n"
            _write_all(self.err_fd, prefix + text.encode() + b"\n")
            self._at_line_start = True
            self._draw()

    def clear(self) -> None:
        with self._lock:
            self._hide()
            self._status = b""

    def _hide(self) -> None:
        if self._shown:
            _write_all(self.err_fd, _CLEAR)
            self._shown = False

    def _draw(self) -> None:
        if self.live and self._status and self._at_line_start:
            _write_all(self.err_fd, self._status)
            self._shown = True


def _write_all(fd: int, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        pass  # the terminal went away; output.log still has everything


class StatusLine:
    """Feeds the terminal: every sample when live, every `interval` seconds as a plain line."""

    def __init__(self, terminal: Terminal, interval: float = PLAIN_INTERVAL_S) -> None:
        self.terminal = terminal
        self.interval = interval
        self.started = time.monotonic()
        self._last = self.started

    def maybe_print(
        self, sample: MemorySample, logs: LogInterpreter, progress: TrainerProgress, trainers: list[Proc]
    ) -> None:
        now = time.monotonic()
        text = format_status(now - self.started, sample, logs, progress, trainers)
        if self.terminal.live:
            self.terminal.show(text)
        elif now - self._last >= self.interval:
            self._last = now
            self.terminal.line(text)


def _bytes(n: float | None) -> str:
    return human_bytes(n, missing="-")
