"""Graceful stop with escalation: SIGINT, then SIGTERM after a grace period, then SIGKILL.

Used by the supervisor (forwarding a Ctrl-C or a scheduler's SIGTERM, or on a
hang with `--on-hang stop`) and by `trainmedic stop`. Signals go to the real
trainers first, so a launcher stub cannot swallow them; what is left of the
tree once the trainers are gone is ended too, so nothing is orphaned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import psutil

from trainmedic.supervise import platform


@dataclass(slots=True)
class StopOutcome:
    """Which signals were sent, and which processes were still alive at the end (none, normally)."""

    sent: list[tuple[int, list[int]]] = field(default_factory=list)  # (signal, pids)
    survivors: list[int] = field(default_factory=list)

    @property
    def last_signal(self) -> int | None:
        return self.sent[-1][0] if self.sent else None


def escalation_from(first: int) -> list[int]:
    """The escalation starting at `first` (a SIGTERM from a scheduler skips SIGINT)."""
    steps = list(platform.ESCALATION)
    return steps[steps.index(first) :] if first in steps else [first, *steps[1:]]


def stop_processes(
    targets: Sequence[psutil.Process],
    *,
    first: int = platform.SIGINT,
    grace: float = 10.0,
    rest: Callable[[], Sequence[psutil.Process]] | None = None,
    on_signal: Callable[[int, list[int]], None] | None = None,
) -> StopOutcome:
    """Stop `targets` gracefully, then end whatever `rest()` still returns (launchers, workers).

    Each step waits up to `grace` seconds for the targets to exit before the
    next, harder signal. `on_signal(sig, pids)` is told each step (for events).
    """
    outcome = StopOutcome()
    alive = [p for p in targets if _alive(p)]
    for signum in escalation_from(first):
        if not alive:
            break
        pids = [p.pid for p in alive if platform.send_signal(p.pid, signum)]
        outcome.sent.append((signum, pids))
        if on_signal is not None:
            on_signal(signum, pids)
        alive = _wait_gone(alive, grace if signum != platform.SIGKILL else 5.0)
    if rest is not None:
        leftover = [p for p in rest() if _alive(p)]
        # Launchers exit on their own once their child is gone: give them a moment.
        leftover = _wait_gone(leftover, min(grace, 2.0))
        for signum in (platform.SIGTERM, platform.SIGKILL):
            if not leftover:
                break
            for p in leftover:
                platform.send_signal(p.pid, signum)
            leftover = _wait_gone(leftover, min(grace, 3.0))
        alive.extend(leftover)
    outcome.survivors = [p.pid for p in alive if _alive(p)]
    return outcome


def _alive(proc: psutil.Process) -> bool:
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            platform.reap_zombie(proc.pid)
            return False
        return proc.is_running()
    except psutil.Error:
        return False


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if _alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    return alive
