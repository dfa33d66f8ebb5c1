"""Turns the trainer's output lines into events: log lines, and phases when the log shows them.

Every "significant" line (progress, errors, tracebacks, checkpoints: see
`rules._logtext.is_significant`) becomes a `LogLine` event; ordinary lines do
too up to a budget per attempt, and the last ones are always kept, so a
chatty trainer cannot flood the event log while the rules still see the end.
"Epoch 3/12", "Evaluating ...", "Saving checkpoint to ..." lines open phases
(train / eval / checkpoint) on the supervisor's PID, which lets memory be
attributed to phases for trainers without in-process instrumentation.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable

from trainmedic.events import Event, LogLine, PhaseEnd, PhaseStart
from trainmedic.rules import _logtext

_BUDGET = 2000
_TAIL = 40


class LogInterpreter:
    def __init__(self, emit: Callable[[Event], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._budget = _BUDGET
        self._tail: deque[LogLine] = deque(maxlen=_TAIL)
        self.phase: str | None = None
        self.epoch: int | None = None
        self.epochs_total: int | None = None
        self.checkpoint: str | None = None
        self.lines = 0
        self.phases_started = 0  # the supervisor samples at once when this moves
        self.on_phase: Callable[[], None] | None = None  # called (from a tee thread) when it does

    def on_line(self, stream: str, text: str) -> None:
        with self._lock:
            self.lines += 1
            line = LogLine(stream=stream, text=text)
            if _logtext.is_significant(text) or self._budget > 0:
                if not _logtext.is_significant(text):
                    self._budget -= 1
                self._emit(line)
            else:
                self._tail.append(line)
            self._track(text, line.t)

    def _track(self, text: str, t: float) -> None:
        found = _logtext.phase_of_line(text)
        if found is None:
            return
        phase, epoch = found
        if phase == "train":
            total = _logtext.epoch_progress([text])
            self.epochs_total = total[1] if total else self.epochs_total
        if phase == "checkpoint":
            match = _logtext.CHECKPOINT.search(text)
            self.checkpoint = match.group(1).strip("'\".,") if match else self.checkpoint
        if phase == self.phase and (epoch is None or epoch == self.epoch):
            return
        self._close(t)
        self.phase = phase
        self.epoch = epoch if epoch is not None else self.epoch
        self._emit(PhaseStart(t=t, pid=os.getpid(), phase=phase, epoch=self.epoch))
        self.phases_started += 1
        if self.on_phase is not None:
            self.on_phase()

    def _close(self, t: float) -> None:
        if self.phase is not None:
            self._emit(PhaseEnd(t=t, pid=os.getpid(), phase=self.phase, epoch=self.epoch))
            self.phase = None

    def new_attempt(self) -> None:
        """Close the previous attempt's phase and renew the line budget."""
        with self._lock:
            self._close(time.time())
            self._budget = _BUDGET
            self._flush_tail()

    def flush_tail(self) -> None:
        """Emit the last lines that the budget held back (they carry their original times)."""
        with self._lock:
            self._flush_tail()

    def _flush_tail(self) -> None:
        while self._tail:
            self._emit(self._tail.popleft())
