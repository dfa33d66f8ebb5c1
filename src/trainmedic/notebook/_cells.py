"""Cells as phases: each cell a notebook kernel executes becomes a CellStart/CellEnd pair.

Registered on IPython's own `pre_run_cell` / `post_run_cell` events, so it sees exactly what
the user ran (silent executions from frontends, such as variable inspectors, do not fire
them). Between cells the kernel is in the "idle" phase: it waits for its user, which the
supervisor never calls a hang, and memory sampled then belongs to no training phase. A kernel
that dies mid-cell leaves a CellStart without its CellEnd: the rules name that cell.

The cost is what a cell pays: two /proc reads and two events at each end (docs/notebooks.md,
Cost, gives it as `benchmarks/notebook_cells.py` measures it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from trainmedic.events import CellEnd, CellStart, Event, KernelShutdown, PhaseEnd, PhaseStart
from trainmedic.instrument import channel

FIRST_LINE_CHARS = 80
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def first_line(source: str) -> str:
    """The first non-blank line of a cell, shortened to what a message can quote."""
    for line in source.splitlines():
        text = line.strip()
        if text:
            return text if len(text) <= FIRST_LINE_CHARS else text[: FIRST_LINE_CHARS - 1] + "…"
    return ""


def rss_bytes() -> int | None:
    """This process's resident memory now (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as f:  # noqa: PTH123  # twice per cell: no Path objects
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def reset_peak() -> bool:
    """Reset the kernel's peak RSS (VmHWM) so the next read is this cell's peak (Linux >= 4.0:
    writing 5 to clear_refs). It also lowers what getrusage reports as this process's max RSS."""
    try:
        with open("/proc/self/clear_refs", "wb", buffering=0) as f:  # noqa: PTH123
            f.write(b"5")
        return True
    except OSError:
        return False


def peak_bytes() -> int | None:
    """VmHWM of this process: its peak RSS since the last `reset_peak`."""
    try:
        with open("/proc/self/status", "rb") as f:  # noqa: PTH123
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class CellRecorder:
    """Emits the cell events of one IPython shell; `listeners` are told of each cell's end."""

    def __init__(self, shell: Any, emit: Callable[[Event], None] = channel.emit) -> None:
        self.shell = shell
        self.emit = emit
        self.current: CellStart | None = None
        self._started = 0.0
        self._peak_reset = False
        self._count_at_start: int | None = None
        # IPython 9 counts the cell before `pre_run_cell`, IPython 8 after it; the first cell's
        # result tells which (`_count_ahead` is corrected then).
        self._count_ahead = 1 if _ipython_major() >= 9 else 0
        self.listeners: list[Callable[[CellEnd], None]] = []

    def register(self) -> None:
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        self._watch_shutdown(getattr(self.shell, "kernel", None))
        self.emit(PhaseStart(phase="idle"))

    def _watch_shutdown(self, kernel: Any) -> None:
        """Tell the supervisor when the frontend asks the kernel to end: Jupyter's SIGTERM a few
        seconds later (a slow teardown) is then the normal end, not a kill."""
        original = getattr(kernel, "do_shutdown", None)
        if original is None:
            return
        emit = self.emit

        def do_shutdown(restart: bool, *args: Any, **kwargs: Any) -> Any:
            emit(KernelShutdown(restart=bool(restart)))
            return original(restart, *args, **kwargs)

        kernel.do_shutdown = do_shutdown

    def pre_run_cell(self, info: Any) -> None:
        self.emit(PhaseEnd(phase="idle"))
        self._peak_reset = reset_peak()
        count = getattr(self.shell, "execution_count", None)
        self._count_at_start = count if isinstance(count, int) else None
        self.current = CellStart(
            execution_count=count - self._count_ahead if isinstance(count, int) else None,
            first_line=first_line(getattr(info, "raw_cell", "") or ""),
            rss_bytes=rss_bytes(),
        )
        self._started = time.perf_counter()
        self.emit(self.current)

    def post_run_cell(self, result: Any) -> None:
        begun = self.current
        if begun is None:
            return
        self.current = None
        counted = getattr(result, "execution_count", None)
        if isinstance(counted, int) and self._count_at_start is not None:
            self._count_ahead = self._count_at_start - counted
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        end = CellEnd(
            execution_count=counted if isinstance(counted, int) else begun.execution_count,
            first_line=begun.first_line,
            duration_s=round(time.perf_counter() - self._started, 6),
            rss_start_bytes=begun.rss_bytes,
            rss_end_bytes=rss_bytes(),
            peak_rss_bytes=peak_bytes() if self._peak_reset else None,
            error=type(error).__name__ if error is not None else None,
        )
        self.emit(end)
        self.emit(PhaseStart(phase="idle"))
        for listener in list(self.listeners):
            listener(end)


def _ipython_major() -> int:
    try:
        import IPython

        return int(IPython.version_info[0])
    except (ImportError, AttributeError, ValueError, IndexError):
        return 0


_recorder: CellRecorder | None = None


def attach(shell: Any) -> CellRecorder:
    """Record the cells of this shell (once per process)."""
    global _recorder
    if _recorder is None or _recorder.shell is not shell:
        _recorder = CellRecorder(shell)
        _recorder.register()
    return _recorder


def recorder() -> CellRecorder | None:
    """The recorder of this kernel, when the boot instrumentation armed one."""
    return _recorder
