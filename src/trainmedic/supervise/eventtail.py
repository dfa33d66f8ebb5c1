"""Reads what the trainer's processes append to events.jsonl, as it arrives.

The instrumented processes write to the same file as the supervisor; reading
only the new bytes each tick tells the supervisor which processes announced
themselves (the real Python trainers, for certain), whether the trainer made
progress (steps, epochs: used by hang detection), and what to show in the live
status.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainmedic.events import Epoch, Event, PhaseEnd, PhaseStart, ProcessSpawn, Step, TrainingPlan, decode


@dataclass(slots=True)
class TrainerProgress:
    """What the live status shows, from the trainer's own events."""

    announced: set[int] = field(default_factory=set)
    epoch: int | None = None
    epochs_total: int | None = None
    step: int | None = None
    loss: float | None = None
    phase: str | None = None


class EventTail:
    def __init__(
        self, path: Path, own_pid: int | None = None, on_event: Callable[[Event], None] | None = None
    ) -> None:
        self.path = path
        self.on_event = on_event  # every event of the trainers, as read (the live diagnosis)
        self.own_pid = os.getpid() if own_pid is None else own_pid
        # How the supervisor's own lines begin (events.encode: `t`, then `pid`, compact JSON):
        # they are most of the file while a quiet trainer runs, and are skipped undecoded.
        self._own_mark = b',"pid":%d,' % self.own_pid
        self._path = os.fspath(path)
        self.progress = TrainerProgress()
        self._offset = 0
        self._partial = b""

    def poll(self) -> bool:
        """Read new lines; True when a process other than the supervisor wrote an event."""
        try:
            size = os.stat(self._path).st_size  # noqa: PTH116  # twice a second: no Path objects
        except OSError:
            return False
        if size <= self._offset:
            return False
        with open(self._path, "rb") as f:  # noqa: PTH123
            f.seek(self._offset)
            data = f.read(size - self._offset)
        self._offset = size
        *lines, self._partial = (self._partial + data).split(b"\n")
        foreign = False
        for raw in lines:
            if raw.find(self._own_mark, 0, 48) != -1:
                continue
            try:
                event = decode(raw.decode("utf-8", errors="replace"))
            except ValueError:
                continue
            if event.pid != self.own_pid:
                foreign = True
                self._note(event)
                if self.on_event is not None:
                    self.on_event(event)
        return foreign

    def _note(self, event: Event) -> None:
        p = self.progress
        if isinstance(event, ProcessSpawn) and event.source == "announce":
            p.announced.add(event.pid)
        elif isinstance(event, TrainingPlan):
            p.epochs_total = event.epochs or p.epochs_total
        elif isinstance(event, Epoch):
            p.epoch = event.epoch
        elif isinstance(event, Step):
            p.step = event.step
            p.epoch = event.epoch if event.epoch is not None else p.epoch
            loss = event.metrics.get("loss")
            p.loss = float(loss) if isinstance(loss, (int, float)) else p.loss
        elif isinstance(event, PhaseStart):
            p.phase = event.phase
        elif isinstance(event, PhaseEnd) and event.phase == p.phase == "idle":
            p.phase = None  # a notebook kernel began a cell
