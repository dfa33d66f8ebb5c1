"""Tee the trainer's output to the terminal and `output.log` unchanged, and read the lines that matter.

The bytes path is a straight copy: each chunk read from the pipe (up to 64 KiB) goes to
the terminal and to output.log as it is, progress bars with `\\r` included. Lines cost
only where they can matter. While the interpreter still takes every line (its budget of
ordinary lines at the start of an attempt), each line is decoded and handed over; after
that, `_logtext.lines_that_may_matter` finds the chunk's complete lines that a piece of a
log pattern hits (memchr for the pieces' rare bytes, one test per line start; of a stretch
of HF log dicts, the first), and only those are decoded and parsed. The last lines of each
stream are kept raw and handed over when the stream ends, so the rules still see how a run
ended.

The child's stdout is a pty where ours is a terminal, else a pipe (`start_child`): it
buffers its output as it would without us (no PYTHONUNBUFFERED forced), line by line on a
terminal, in blocks elsewhere, so a chatty trainer costs a write per block, not per line.

The reader lets a trickle of output gather: after a read that did not fill its buffer it
waits 10 ms before the next, so a trainer that prints a line per step costs one read per
10 ms, not one per line. The pipe is widened to 1 MiB (Linux), and a flood shortens the
wait to half the time the pipe takes to fill at its rate, so that the trainer never waits
on it meanwhile; where it cannot be widened the reader does not wait. A pty holds ~18 KiB
and gives ~4 KiB a read: what it holds is read on into one chunk, and the wait is at most
1 ms.

For parsing, a line ends at `\\n`, and of a run of `\\r` updates only the last one
counts, so a tqdm bar is one line, not thousands. A line that does not end (a bar
without `\\n`, a binary dump) is held to its last update and at most 8 KiB.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from trainmedic.evidence.logtext import lines_that_may_matter
from trainmedic.supervise import platform
from trainmedic.supervise.loginterp import LogInterpreter

_CHUNK = 65536
_PIPE_SIZE = 1 << 20
_GATHER_S = 0.010  # the longest wait for a trickle to gather (a line per step: one read per 10 ms)
_PTY_GATHER = (16384, 0.001)  # a pty holds ~18 KiB: a trickle waits at most 1 ms there
_MAX_LINE = 8192
_RECENT_LINES = 80  # raw lines kept per stream for the tail (2 x the interpreter's, for its events)


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


def line_text(raw: bytes) -> str:
    """The text of one line as the log parsing reads it: its last `\\r` update, decoded."""
    last = raw.rstrip(b"\r").rsplit(b"\r", 1)[-1]
    return last.decode("utf-8", errors="replace").rstrip()


class LineScanner:
    """Cuts one stream's bytes into lines for the interpreter, decoding only those it needs."""

    def __init__(self, stream: str, logs: LogInterpreter) -> None:
        self.stream = stream
        self._logs = logs
        self._pending = b""  # the line not ended yet
        self._recent: deque[tuple[float, bytes, int]] = deque()  # (time, raw lines, how many)
        self._recent_count = 0

    def feed(self, chunk: bytes) -> None:
        data = self._pending + chunk if self._pending else chunk
        end = data.rfind(b"\n") + 1  # data[:end] holds the complete lines
        self._pending = data[end:]
        if len(self._pending) > _MAX_LINE:  # a bar that never ends its line: keep the last update
            self._pending = self._pending.rsplit(b"\r", 1)[-1][-_MAX_LINE:]
        if not end:
            return
        if self._logs.wants_every_line:
            for raw in data[:end].split(b"\n")[:-1]:
                self._hand_over(raw)
        else:
            self._scan(data, end)

    def close(self) -> None:
        """The stream ended: its unfinished line counts as a line, its last lines go to the tail."""
        if self._pending:
            self.feed(b"\n")
        lines = [(t, raw) for t, block, _ in self._recent for raw in block.split(b"\n")[:-1]]
        recent = [(t, text) for t, raw in lines if (text := line_text(raw))]
        self._logs.end_of_stream(self.stream, recent)

    def _hand_over(self, raw: bytes) -> None:
        text = line_text(raw)
        if text:
            self._logs.on_line(self.stream, text)

    def _scan(self, data: bytes, end: int) -> None:
        """Parse only the complete lines in data[:end] that may matter; remember the last ones."""
        t = time.time()
        for start in lines_that_may_matter(data, end):
            text = line_text(data[start : data.index(b"\n", start)])
            if text:
                self._logs.on_match(self.stream, text, t)
        self._remember(t, data, end)

    def _remember(self, t: float, data: bytes, end: int) -> None:
        """Keep the last `_RECENT_LINES` lines of the stream, raw, for its tail."""
        start = end
        count = 0  # the lines in data[start:end], counted as they are found (no pass over the chunk)
        while count < _RECENT_LINES and start:
            start = data.rfind(b"\n", 0, start - 1) + 1
            count += 1
        self._recent.append((t, data[start:end], count))
        self._recent_count += count
        while self._recent_count - self._recent[0][2] >= _RECENT_LINES:
            self._recent_count -= self._recent.popleft()[2]


class StreamTee(threading.Thread):
    """Reads one pipe of the child until EOF: echo, log, and hand its lines to the interpreter."""

    def __init__(
        self,
        name: str,
        pipe: IO[bytes],
        echo: Callable[[bytes], None] | None,
        log: OutputLog,
        logs: LogInterpreter,
    ) -> None:
        super().__init__(name=f"trainmedic-tee-{name}", daemon=True)
        self.stream = name
        self._fd = pipe.fileno()
        self._pipe = pipe
        self._echo = echo
        self._log = log
        self._lines = LineScanner(name, logs)
        self._pty = platform.IS_POSIX and os.isatty(self._fd)
        # (how much the stream holds, the longest wait for a trickle) where the reader may wait
        self._gather = _PTY_GATHER if self._pty else (_PIPE_SIZE, _GATHER_S) if _widen(self._fd) else None
        self._unfinished = b""  # the end of the last chunk after its last newline, not logged yet
        self.last_output = time.monotonic()
        self.bytes_seen = 0

    def run(self) -> None:
        cycle_start, got = time.monotonic(), 0  # the bytes read since the last wait began
        try:
            while chunk := _read(self._fd):
                if self._pty:
                    chunk = _read_on(self._fd, chunk)
                self.last_output = time.monotonic()
                self.bytes_seen += len(chunk)
                got += len(chunk)
                if self._echo is not None:
                    self._echo(chunk)
                self._write_lines(chunk)
                try:
                    self._lines.feed(chunk)
                except Exception as exc:  # parsing must never stop the tee
                    _parsing_failed(exc)
                if self._gather and len(chunk) < _CHUNK:  # the pipe is empty: let output gather
                    now = time.monotonic()
                    time.sleep(_gather_time(got, now - cycle_start, *self._gather))
                    cycle_start, got = now, 0
            if self._unfinished:
                self._log.write(self._unfinished)
            try:
                self._lines.close()
            except Exception as exc:
                _parsing_failed(exc)
        finally:
            with contextlib.suppress(OSError):
                self._pipe.close()

    def _write_lines(self, chunk: bytes) -> None:
        """Log whole lines only: stdout and stderr share output.log, and a chunk that ends
        inside a line would let the other stream's output land in the middle of it. A line
        held back longer than _MAX_LINE (a progress bar redrawn with `\r`) is logged as it is."""
        data = self._unfinished + chunk
        cut = data.rfind(b"\n") + 1
        if len(data) - cut > _MAX_LINE:
            cut = len(data)
        if cut:
            self._log.write(data[:cut])
        self._unfinished = data[cut:]


def start_child(
    command: list[str], *, terminal_fd: int | None, **start: Any
) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """Start `command` with its stdout and stderr coming to us, and return its stdout.

    Its stdout is buffered as it would be without us: a pty where `terminal_fd` (the stream
    we echo it to) is a terminal, so it line-buffers and sizes its output to that terminal,
    else a pipe, so it block-buffers (the inherited PYTHONUNBUFFERED decides, as it would).
    Its stderr is a pipe: Python line-buffers stderr anyway, and C's stdio never buffers it."""
    pair = platform.terminal_for_child(terminal_fd) if terminal_fd is not None else None
    if pair is None:
        popen = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **start)
        assert popen.stdout is not None
        return popen, popen.stdout
    ours, child = pair
    try:
        popen = subprocess.Popen(command, stdout=child, stderr=subprocess.PIPE, **start)
    except BaseException:
        os.close(ours)
        raise
    finally:
        os.close(child)  # the child has its copy: the pty ends (EIO) when the last one closes
    return popen, os.fdopen(ours, "rb", buffering=0)  # closed by its StreamTee


def _read(fd: int) -> bytes:
    """The next chunk of a pipe or a pty; b"" at the end (a pty says EIO when no writer is left)."""
    try:
        return os.read(fd, _CHUNK)
    except OSError as exc:
        if exc.errno == errno.EIO:
            return b""
        raise


def _read_on(fd: int, chunk: bytes) -> bytes:
    """A pty gives at most ~4 KiB a read: what it holds after `chunk` joins it, up to
    `_CHUNK`, so that a flood is echoed, logged and scanned in large chunks."""
    import select  # POSIX: a pty is

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    parts, size = [chunk], len(chunk)
    while size < _CHUNK and poller.poll(0):
        more = _read(fd)
        if not more:  # the end: the next read says so again
            break
        parts.append(more)
        size += len(more)
    return b"".join(parts) if len(parts) > 1 else chunk


def _gather_time(got: int, elapsed: float, holds: int = _PIPE_SIZE, longest: float = _GATHER_S) -> float:
    """How long to let output gather once the pipe (or pty) is empty, after `got` bytes in
    `elapsed` seconds: `longest` for a trickle; for a flood, the time it takes to fill half
    of what the stream `holds` at that rate, so the trainer does not wait on a full pipe (a
    rate held down by a full pipe halves the wait each time, until it no longer fills)."""
    half_full = elapsed * (holds // 2) / got if got else longest
    return min(longest, half_full)


def _widen(fd: int) -> bool:
    """Make the pipe 1 MiB (Linux only); False where it stays as it is."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, AttributeError, OSError):  # not Linux, or over the user's pipe quota
        return False
    return True


def _parsing_failed(exc: Exception) -> None:
    os.write(2, f"trainmedic: log parsing failed: {exc!r}\n".encode())
