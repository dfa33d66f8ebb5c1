"""Turns the trainer's output lines into events: log lines, and phases when the log shows them.

Every "significant" line (progress, errors, tracebacks, checkpoints: see
`evidence.logtext.is_significant`) becomes a `LogLine` event; ordinary lines do
too up to a budget per attempt, and the last 40 of each stream are always kept, so a
chatty trainer cannot flood the event log while the rules still see the end.
"Epoch 3/12", "Evaluating ...", "Saving checkpoint to ..." lines open phases
(train / eval / checkpoint) on the supervisor's PID, which lets memory be
attributed to phases for trainers without in-process instrumentation. A printed epoch
summary ("epoch:  3, train_loss: 0.4100, ...", `metriclines`) becomes an `Epoch` event with
its metrics: the curve of a trainer that only prints it (a JAX loop). A printed step line ("step
100, loss: 0.53", as optax's README loop prints it) becomes a `Step` event of the printed stream
(`metriclines.PRINTED`), beside the guard's own steps, which carry gradients but no loss there.

Once the budget is spent, the output stream (`logstream.LineScanner`) hands over only
the lines its byte pattern picks out (`on_match`), and each stream's last lines when it
ends (`end_of_stream`), so a flood of ordinary lines costs no Python work per line.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from trainmedic.events import Epoch, Event, LogLine, PhaseEnd, PhaseStart
from trainmedic.evidence import logtext as _logtext
from trainmedic.logged import logged_step
from trainmedic.supervise.metriclines import PRINTED, epoch_metrics, step_metrics

_BUDGET = 2000
_TAIL = 40


class LogInterpreter:
    def __init__(self, emit: Callable[[Event], None]) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._budget = _BUDGET
        # per stream: a chatty stdout cannot push the end of a traceback on stderr out
        self._tails: dict[str, deque[LogLine]] = {}
        self.phase: str | None = None
        self.epoch: int | None = None
        self.epochs_total: int | None = None
        self.checkpoint: str | None = None
        self.phases_started = 0  # the supervisor samples at once when this moves
        self.on_phase: Callable[[], None] | None = None  # called (from a tee thread) when it does
        self._first_printed_epoch: int | None = None  # 1: the trainer counts epochs from 1

    @property
    def wants_every_line(self) -> bool:
        """While the budget lasts every line is an event, so the stream hands over every line."""
        return self._budget > 0

    def on_line(self, stream: str, text: str) -> None:
        with self._lock:
            line = LogLine(stream=stream, text=text)
            if _logtext.is_significant(text) or self._budget > 0:
                if not _logtext.is_significant(text):
                    self._budget -= 1
                self._emit(line)
            else:
                self._tail(stream).append(line)
            self._track(text, line.t)
            self._metrics(text, line.t)

    def on_match(self, stream: str, text: str, t: float) -> None:
        """A line the stream's byte pattern picked out once the budget was spent: an event when
        significant, a phase when it opens one (the ordinary ones reach the tail at the end)."""
        with self._lock:
            if _logtext.is_significant(text):
                self._emit(LogLine(t=t, stream=stream, text=text))
            self._track(text, t)
            self._metrics(text, t)

    def end_of_stream(self, stream: str, recent: Sequence[tuple[float, str]]) -> None:
        """The last lines of a stream read after the budget was spent: the ordinary ones join
        the stream's tail."""
        ordinary = [
            LogLine(t=t, stream=stream, text=text) for t, text in recent if not _logtext.is_significant(text)
        ]
        with self._lock:
            self._tail(stream).extend(ordinary)  # keeps the last _TAIL

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

    def _metrics(self, text: str, t: float) -> None:
        """An epoch summary line: its metrics as an `Epoch` event (0-based, as events count); a step
        line: a `Step` of the printed stream, at the step it printed."""
        found = epoch_metrics(text)
        if found is None:
            printed = step_metrics(text)
            step = logged_step(PRINTED, printed[1], step=printed[0], epoch=None) if printed else None
            if step is not None:
                step.t = t  # the line's time, as its `LogLine`'s
                self._emit(step)
            return
        number, metrics = found
        if self._first_printed_epoch is None:
            self._first_printed_epoch = number
        base = 1 if self._first_printed_epoch >= 1 else 0
        self._emit(Epoch(t=t, pid=os.getpid(), epoch=max(number - base, 0), metrics=metrics))

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

    def _tail(self, stream: str) -> deque[LogLine]:
        return self._tails.setdefault(stream, deque(maxlen=_TAIL))

    def _flush_tail(self) -> None:
        held = sorted((line for tail in self._tails.values() for line in tail), key=lambda line: line.t)
        self._tails.clear()
        for line in held:
            self._emit(line)
