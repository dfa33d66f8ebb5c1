"""The live status: one line with elapsed time, epoch/step, loss, memory, phase, trainer PIDs.

On a terminal it is printed every 10 s, otherwise (logs, CI) every 60 s, to
stderr, as plain lines between the trainer's own output: repainting a line
would fight the trainer's progress bars for the cursor.
"""

from __future__ import annotations

import os
import time
from typing import TextIO

from trainmedic.events import MemorySample
from trainmedic.supervise.eventtail import TrainerProgress
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.tree import Proc

TTY_INTERVAL_S = 10.0
PLAIN_INTERVAL_S = 60.0


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit in ("B", "KiB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


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
        parts.append(f"epoch {epoch}" + (f"/{total}" if total else ""))
    if progress.step is not None:
        parts.append(f"step {progress.step}")
    if progress.loss is not None:
        parts.append(f"loss {progress.loss:.4g}")
    parts.append(f"rss {human_bytes(sample.rss_bytes)}")
    if sample.limit_bytes:
        parts.append(f"limit {human_bytes(sample.limit_bytes)}")
    if sample.gpu_bytes is not None:
        parts.append(f"gpu {human_bytes(sample.gpu_bytes)}")
    phase = progress.phase or logs.phase
    if phase:
        parts.append(f"phase {phase}")
    if trainers:
        parts.append("trainer pid " + ",".join(str(p.pid) for p in trainers))
    return "[trainmedic] " + " | ".join(parts)


class StatusLine:
    def __init__(self, out: TextIO, interval: float | None = None) -> None:
        self.out = out
        tty = out.isatty()
        self.interval = interval if interval is not None else (TTY_INTERVAL_S if tty else PLAIN_INTERVAL_S)
        self.started = time.monotonic()
        self._last = self.started

    def maybe_print(
        self, sample: MemorySample, logs: LogInterpreter, progress: TrainerProgress, trainers: list[Proc]
    ) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        line = format_status(now - self.started, sample, logs, progress, trainers)
        os.write(self.out.fileno(), (line + "\n").encode())
