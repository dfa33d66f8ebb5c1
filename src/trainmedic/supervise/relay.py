"""Signals sent to `trainmedic run` itself, passed on to the attempt that runs now.

Apart from the supervisor because it is its own small state machine: the handler only
records (a signal handler must not act), the supervisor's restart loop only needs to
know whether a stop signal arrived and to be woken from its back-off, and the attempt
acts on each signal in its own loop. A signal that arrives before the first attempt
exists waits here and reaches that attempt when it starts.
"""

from __future__ import annotations

import contextlib
import signal as signal_module
import threading
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Protocol

from trainmedic.supervise import platform


class SignalTarget(Protocol):
    """What receives the forwarded signals: the running attempt."""

    def request_signal(self, signum: int) -> None: ...


class SignalRelay:
    """Signals to the supervisor go to the trainers (graceful escalation), not to us."""

    def __init__(self) -> None:
        self.stop_signals: list[int] = []  # INT/TERM/HUP received: no further attempt
        self.wake = threading.Event()  # cuts the back-off between attempts short
        self._early: list[int] = []  # received before the first attempt started
        self._target: SignalTarget | None = None

    def attach(self, target: SignalTarget) -> None:
        """From now on signals go to `target`; those that came before it go there now."""
        self._target = target
        for signum in self._early:
            target.request_signal(signum)
        self._early.clear()

    @contextlib.contextmanager
    def installed(self, signums: Iterable[int] | None = None) -> Iterator[None]:
        """Handle these signals (by default every forwardable one) while the block runs; the
        old handlers after it. Off the main thread (an embedding program) Python allows no
        handler: nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {}
        for signum in platform.forwardable_signals() if signums is None else signums:
            with contextlib.suppress(OSError, ValueError):
                previous[signum] = signal_module.signal(signum, self.on_signal)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                with contextlib.suppress(OSError, ValueError):
                    signal_module.signal(signum, handler)

    def finishing(self) -> contextlib.AbstractContextManager[None]:
        """SIGTERM and SIGHUP are only recorded while the run ends and its diagnosis is written.
        A scheduler's time limit, a Jupyter kernel's shutdown and a closed terminal send one of
        them and SIGKILL seconds later: what is left to do fits in those seconds, where the
        default action would lose findings.json. SIGINT (Ctrl-C) still interrupts. Wrapped
        around `installed()`, which takes over inside, so no moment is left uncovered."""
        return self.installed(platform.STOP_SIGNALS - {signal_module.SIGINT})

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum in platform.STOP_SIGNALS:
            self.stop_signals.append(signum)
        self.wake.set()
        if self._target is not None:
            self._target.request_signal(signum)
        else:
            self._early.append(signum)
