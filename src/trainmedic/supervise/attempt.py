"""One attempt: start the command, follow its tree until it and its trainers are gone.

The supervisor thread loop (one tick per sample interval): re-walk the tree
when due and classify launcher / trainer / worker, sample memory, watch for a
hang, act on stop requests and forwarded signals, print the live status. The
child's exit wakes the loop at once (a waiter thread), so supervision adds no
latency to the end of a run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

import psutil

from trainmedic import runfolder
from trainmedic.events import (
    Event,
    HangDetected,
    MemorySample,
    ProcessExit,
    StopRequest,
)
from trainmedic.supervise import platform, tree
from trainmedic.supervise.cgroup import LimitedCgroup
from trainmedic.supervise.eventtail import EventTail
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.logstream import OutputLog, StreamTee, start_child
from trainmedic.supervise.memory import HangWatch, TreeSampler
from trainmedic.supervise.proctable import ProcessTable
from trainmedic.supervise.signals import stop_processes
from trainmedic.supervise.stacks import dump_stacks
from trainmedic.supervise.status import StatusLine, Terminal
from trainmedic.units import signal_name

if TYPE_CHECKING:
    from trainmedic.verdict import LiveDiagnosis

# Walking the tree reads every process of the machine (~5-15 ms): often while launchers start
# their trainers, then less and less while the tree stays the same. A Python process that
# announces itself through the events file triggers a walk at once.
_TREE_REFRESH_MIN = 0.5
_TREE_REFRESH_MAX = 15.0


@dataclass(slots=True)
class AttemptConfig:
    """Everything one attempt (one launch of the command) needs."""

    command: list[str]
    env: dict[str, str]
    run_dir: Path
    grace: float
    hang_timeout: float
    on_hang: str
    cgroup: LimitedCgroup | None
    terminal: Terminal | None
    status: StatusLine | None
    # Waits for the processes the supervisor runs for itself (the environment capture's git):
    # they are its descendants too, and must not be ended and reported as the run's orphans.
    own_helpers_done: Callable[[], None] | None = None


@dataclass(slots=True)
class AttemptResult:
    """How one attempt ended: the exit status, who stopped it, the trainers it had."""

    returncode: int
    stopped_by: str | None = None
    trainer_pids: list[int] = field(default_factory=list)
    exited_at: float = field(default_factory=time.monotonic)  # when the launched process exited


class Attempt:
    """One launch of the command, supervised until it and its trainers are gone.

    The tree's bookkeeping lives in ProcessTable; what stays here is the loop and the
    decisions taken in it (when to walk and sample, hangs, signals, stop requests)."""

    def __init__(
        self,
        config: AttemptConfig,
        *,
        emit: Callable[[Event], None],
        sampler: TreeSampler,
        logs: LogInterpreter,
        output: OutputLog,
        tail: EventTail,
        diagnosis: LiveDiagnosis | None = None,
    ) -> None:
        self.cfg = config
        self.diagnosis = diagnosis
        self.emit = emit
        self.sampler = sampler
        self.logs = logs
        self.output = output
        self.tail = tail
        self.wake = threading.Event()
        self.table = ProcessTable(emit, config.run_dir)
        self.stopping: threading.Thread | None = None
        self.stop_reason: str | None = None
        self._pending_signals: list[int] = []
        self._hang = HangWatch(config.hang_timeout)
        self._seen_bytes = 0
        self._announced_seen = 0
        self._stop_request = os.fspath(config.run_dir / runfolder.STOP_REQUEST)
        # the phase last sampled at once: in-process (events file) and told by the log
        self._phase_seen: tuple[str | None, int] = (None, 0)
        logs.on_phase = self.wake.set  # a phase the log tells wakes the loop to sample it
        self.popen: subprocess.Popen[bytes] | None = None

    # -- start -------------------------------------------------------------------------
    def start(self) -> None:
        cgroup = self.cfg.cgroup
        preexec = cgroup.join_self if cgroup is not None else None
        # preexec runs before our threads start; in the child it only joins the memory cgroup.
        terminal = self.cfg.terminal
        self.popen, stdout = start_child(
            self.cfg.command,
            terminal_fd=terminal.out_fd if terminal is not None else None,
            env=self.cfg.env,
            **platform.child_start_kwargs(preexec),
        )
        self.started = time.monotonic()
        self.table.root = self.popen.pid
        self.tees = _tees(self.popen, stdout, terminal, self.output, self.logs)
        for tee in self.tees:
            tee.start()
        threading.Thread(target=self._wait_root, name="trainmedic-wait", daemon=True).start()
        self._refresh_tree()

    def _wait_root(self) -> None:
        assert self.popen is not None
        self.popen.wait()
        self.wake.set()

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> AttemptResult:
        self.start()
        assert self.popen is not None
        last_refresh = time.monotonic()
        refresh_every = _TREE_REFRESH_MIN
        next_sample = 0.0
        progressed = False
        while self.popen.poll() is None:
            progressed = self.tail.poll() or progressed
            now = time.monotonic()
            announced = len(self.tail.progress.announced)
            if now - last_refresh >= refresh_every or announced != self._announced_seen:
                self._announced_seen = announced
                changed = self._refresh_tree()
                if changed:  # a new process: sample densely again
                    self.sampler.densely()
                    next_sample = now
                refresh_every = _TREE_REFRESH_MIN if changed else min(refresh_every * 2, _TREE_REFRESH_MAX)
                last_refresh = now
            phase = (self.tail.progress.phase, self.logs.phases_started)
            if phase != self._phase_seen:
                # A new phase is sampled at once and densely: a short train phase between two
                # epoch ends is the steady state RUN003 compares the spike with.
                self._phase_seen = phase
                self.sampler.densely()
                next_sample = now
            self._handle_signals()  # signals and stop requests at once, not at the next sample
            self._check_stop_request()
            if now >= next_sample:
                self._tick(progressed)
                progressed = False
                next_sample = now + self.sampler.interval
            # The events file is read at least every base interval, so a phase change is seen
            # within it even while flat memory has stretched the sampling interval.
            self.wake.wait(min(self.sampler.base_interval, max(0.0, next_sample - time.monotonic())))
            self.wake.clear()
        returncode, exited_at = self.popen.returncode, time.monotonic()
        self.emit(
            ProcessExit(
                pid=self.popen.pid,
                exit_code=platform.exit_status(returncode),
                signal=platform.signal_of(returncode),
            )
        )
        self._follow_reparented_trainers()
        if self.stopping is not None:
            self.stopping.join(timeout=60)
        if self.cfg.own_helpers_done is not None:
            self.cfg.own_helpers_done()
        self.table.end_orphans(grace=min(self.cfg.grace, 3.0))
        for tee in self.tees:
            tee.join(timeout=5.0)
        self.logs.flush_tail()
        if self.cfg.terminal is not None:
            self.cfg.terminal.clear()
        trainers = [pid for pid, role in self.table.roles.items() if role == tree.ROLE_TRAINER]
        return AttemptResult(returncode, self.stop_reason, trainers, exited_at)

    def _tick(self, progressed: bool | None = None) -> None:
        progressed = self.tail.poll() if progressed is None else progressed
        self._handle_signals()
        self._check_stop_request()
        if not self.table.procs:
            return
        sample = self.sampler.sample(self.table.procs)
        self.emit(sample)
        output_bytes = sum(t.bytes_seen for t in self.tees)
        progressed = progressed or output_bytes != self._seen_bytes
        # a notebook kernel between cells waits for its user, not on a lock: never a hang
        progressed = progressed or self.tail.progress.phase == "idle"
        self._seen_bytes = output_bytes
        idle = self._hang.update(
            progressed=progressed, cpu_percent=sample.cpu_percent, gpu_percent=self.sampler.gpu_percent
        )
        if idle is not None:
            self._on_hang(idle, sample)
        if self.diagnosis is not None:  # findings.json as soon as an error-level finding appears
            self.diagnosis.refresh()
        if self.cfg.status is not None:
            self.cfg.status.maybe_print(sample, self.logs, self.tail.progress, self.table.trainers())

    # -- the tree -------------------------------------------------------------------------
    def _refresh_tree(self) -> bool:
        """Re-walk the tree and classify it; True when its processes or roles changed."""
        assert self.popen is not None
        return self.table.refresh(self.tail.progress.announced)

    # -- stopping -------------------------------------------------------------------------
    def request_signal(self, signum: int) -> None:
        """Called from the signal handler: act on it in the loop, not in the handler."""
        self._pending_signals.append(signum)
        self.wake.set()

    def _handle_signals(self) -> None:
        while self._pending_signals:
            signum = self._pending_signals.pop(0)
            name = signal_name(signum)
            if signum in platform.STOP_SIGNALS:
                if self.stopping is not None:  # a second Ctrl-C: no more waiting
                    self._kill_now(f"second {name} to the supervisor")
                else:
                    first = platform.SIGTERM if signum != platform.SIGINT else platform.SIGINT
                    self.stop(first, f"{name} sent to the supervisor")
            else:  # SIGUSR1/2, SIGQUIT: pass on as they are
                targets = [p.pid for p in self.table.trainers()]
                for pid in targets:
                    platform.send_signal(pid, signum)
                self.emit(StopRequest(signal=signum, reason=f"{name} forwarded", targets=targets))

    def _check_stop_request(self) -> None:
        if self.stopping is not None or not os.path.exists(self._stop_request):  # noqa: PTH110  # twice a second
            return
        request = Path(self._stop_request)
        data = runfolder.read_json(request) or {}
        with contextlib.suppress(OSError):
            request.unlink()
        self.stop(platform.SIGINT, str(data.get("reason", "trainmedic stop")), float(data.get("grace", 0)))

    def stop(self, first: int, reason: str, grace: float = 0) -> None:
        """Stop the trainers gracefully in the background; the loop keeps sampling meanwhile."""
        self._refresh_tree()
        self.stop_reason = reason
        trainers = [p.handle for p in self.table.trainers()]
        root = self.popen.pid if self.popen else None

        def note(signum: int, pids: list[int]) -> None:
            self.emit(StopRequest(signal=signum, reason=reason, targets=pids))

        def rest() -> list[psutil.Process]:
            handles = [p.handle for p in self.table.procs.values() if p.pid != root]
            return handles + tree.own_descendants()

        self.stopping = threading.Thread(
            target=stop_processes,
            args=(trainers,),
            kwargs={"first": first, "grace": grace or self.cfg.grace, "rest": rest, "on_signal": note},
            name="trainmedic-stop",
            daemon=True,
        )
        self.stopping.start()

    def _kill_now(self, reason: str) -> None:
        pids = [p.pid for p in self.table.procs.values()]
        for pid in pids:
            platform.send_signal(pid, platform.SIGKILL)
        self.emit(StopRequest(signal=platform.SIGKILL, reason=reason, targets=pids))

    def _on_hang(self, idle: float, sample: MemorySample) -> None:
        trainers = self.table.trainers()
        stacks = dump_stacks([p.pid for p in trainers])
        action = self.cfg.on_hang
        self.emit(
            HangDetected(
                idle_s=round(idle, 1), cpu_percent=sample.cpu_percent or 0.0, stacks=stacks, action=action
            )
        )
        if self.cfg.terminal is not None:
            self.cfg.terminal.line(
                f"trainmedic: no progress for {idle:.0f} s; stacks saved to events ({action})"
            )
        if action == "stop" and self.stopping is None:
            self.stop(platform.SIGINT, f"hang: no progress for {idle:.0f} s (--on-hang stop)")

    # -- after the launched process exited --------------------------------------------------
    def _follow_reparented_trainers(self) -> None:
        """A launcher may exit before its trainer (`cmd &`, a daemonizing wrapper): keep
        supervising trainers that are still alive (now our children, as subreaper)."""
        while True:
            alive = [p for p in self.table.trainers() if p.pid != self.table.root and tree.is_alive(p.pid)]
            if not alive:
                return
            self.table.procs = {p.pid: p for p in alive}
            self._tick()
            self.wake.wait(self.sampler.interval)
            self.wake.clear()
            for p in alive:
                platform.reap_zombie(p.pid)


def _tees(
    popen: subprocess.Popen[bytes],
    stdout: IO[bytes],
    terminal: Terminal | None,
    output: OutputLog,
    logs: LogInterpreter,
) -> list[StreamTee]:
    """The readers of the child's stdout and stderr: each copies its stream to output.log and
    the log interpreter, and echoes it to our own stream of the same name when there is a terminal."""
    assert popen.stderr is not None
    echo_out = echo_err = None
    if terminal is not None:
        echo_out = functools.partial(terminal.echo, terminal.out_fd)
        echo_err = functools.partial(terminal.echo, terminal.err_fd)
    return [
        StreamTee("stdout", stdout, echo_out, output, logs),
        StreamTee("stderr", popen.stderr, echo_err, output, logs),
    ]
