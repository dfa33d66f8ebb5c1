"""Small event streams of a supervised run, from which the RUN findings' examples are built.

`trainmedic run` starts `python train.py` (PID 100 here), relays its log lines, samples its
memory, and closes the attempt with a `RunEnd` holding the exit status.
"""

from __future__ import annotations

from trainmedic.events import Event, LogLine, MemorySample, PhaseEnd, PhaseStart, RunEnd, RunStart

GIB = 1 << 30


def supervised_run(*events: Event, exit_code: int) -> list[Event]:
    """A run of `python train.py` (PID 100) around `events`, ending with `exit_code`."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        *events,
        RunEnd(t=10.0, pid=100, exit_code=exit_code),
    ]


def log_lines(*lines: str, stream: str = "stdout") -> list[LogLine]:
    """The trainer's output lines, 10 ms apart from t=1 s."""
    return [LogLine(t=1.0 + i / 100, pid=100, stream=stream, text=line) for i, line in enumerate(lines)]


def epoch_with_eval(train: int, evaluation: int) -> list[Event]:
    """Epoch 3 (index 2) of a run: five memory samples in training, one in evaluation."""
    events: list[Event] = [PhaseStart(t=1.0, pid=100, phase="train", epoch=2)]
    events += [MemorySample(t=2.0 + i, pid=100, rss_bytes=train) for i in range(5)]
    events += [
        PhaseEnd(t=7.0, pid=100, phase="train", epoch=2),
        PhaseStart(t=7.0, pid=100, phase="eval", epoch=2),
        MemorySample(t=8.0, pid=100, rss_bytes=evaluation),
    ]
    return events
