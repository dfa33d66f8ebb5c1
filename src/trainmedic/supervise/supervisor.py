"""`trainmedic run`: start a command, supervise it to the end, say how it ended and why.

Order of work: check the command and the options (bad input leaves nothing
behind), create the memory cgroup, create the run folder, then run attempts
(restarts) and finally diagnose the run from its events. The supervisor exits
with the command's own status.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from trainmedic import runfolder
from trainmedic._osinfo import hostname, peak_rss_bytes
from trainmedic.envinfo import EnvironmentCapture
from trainmedic.errors import TrainmedicError, UsageError
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import Event, MemoryLimit, OomKill, RunEnd, RunStart
from trainmedic.findings import Finding
from trainmedic.instrument.channel import child_env
from trainmedic.supervise import platform
from trainmedic.supervise.attempt import Attempt, AttemptConfig, AttemptResult
from trainmedic.supervise.cgroup import CgroupInfo, LimitedCgroup, effective_limit, host_oom_kills
from trainmedic.supervise.eventtail import EventTail
from trainmedic.supervise.gpu import GpuProbe, default_probe, driver_may_exist
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.logstream import OutputLog
from trainmedic.supervise.memory import TreeSampler
from trainmedic.supervise.relay import SignalRelay
from trainmedic.supervise.status import StatusLine, Terminal

if TYPE_CHECKING:
    from trainmedic.verdict import DiagnosisFactory, LiveDiagnosis

NO_RESTART_STATUSES = (0, 2, 126, 127)  # success, usage error, not executable, not found
MAX_BACKOFF_S = 30.0


class CommandNotFound(TrainmedicError):
    """The command to supervise does not exist (exit 127) or cannot be executed (exit 126):
    the CLI says so in one line, like a shell, and creates nothing."""

    def __init__(self, message: str, status: int = 127) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    """The options of `trainmedic run`, validated."""

    command: list[str]
    out: Path | None = None
    name: str | None = None
    expect_epochs: int | None = None
    memory_limit: int | None = None
    hang_timeout: float = 1800.0
    on_hang: str = "wait"
    restarts: int = 0
    backoff: float = 1.0
    sample_interval: float = 0.5
    grace: float = 10.0
    quiet: bool = False
    instrument: bool = True
    echo: bool = True
    runs_base: Path = Path("runs")
    tracker: str = "auto"  # auto | mlflow | wandb | none: where the diagnosis is attached (trackers/)


@dataclass(slots=True)
class RunOutcome:
    """How a supervised run ended: the exit status to return, the run folder, the findings."""

    exit_status: int
    run_dir: Path
    findings: list[Finding] = field(default_factory=list)
    attempts: int = 1
    counts: dict[str, float | int | None] = field(default_factory=dict)  # `record.run_counts`


def resolve_command(command: list[str]) -> list[str]:
    """The command with its program checked: missing -> CommandNotFound (exit 127)."""
    if not command:
        raise CommandNotFound("no command given: expected `trainmedic run [OPTIONS] -- CMD ARGS...`")
    program = command[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        path = Path(program)
        if not path.exists():
            raise CommandNotFound(f"command not found: {program!r} (no such file)")
        if path.is_dir() or not os.access(path, os.X_OK):
            hint = "; run it with python" if path.suffix == ".py" else ""
            raise CommandNotFound(f"cannot execute {program!r}: not an executable file{hint}", 126)
        return command
    import shutil  # only for a bare name: it also loads bz2 and lzma, ~3 ms of a run

    if shutil.which(program) is None:
        raise CommandNotFound(f"command not found: {program!r} (not on PATH)")
    return command


class Supervisor:
    """Runs the command's attempts in one run folder and diagnoses the run at the end.

    Signal handling lives in SignalRelay and each launch in Attempt: what stays here is the
    order of work around them (folder, manifest, restarts, final diagnosis)."""

    def __init__(
        self, options: RunOptions, *, diagnosis: DiagnosisFactory, gpu: GpuProbe | None = None
    ) -> None:
        self.opts = options
        self._diagnosis = diagnosis
        self.command = resolve_command(list(options.command))
        self.cgroup = LimitedCgroup(options.memory_limit) if options.memory_limit else None
        self.gpu = gpu
        self.attempt: Attempt | None = None
        self._signals = SignalRelay()
        self._logs: LogInterpreter | None = None
        self._live: LiveDiagnosis | None = None
        self._environment: EnvironmentCapture | None = None
        live = not options.quiet and os.isatty(2) and os.environ.get("TERM", "") != "dumb"
        self.terminal = Terminal(live=live) if options.echo else None

    def run(self) -> RunOutcome:
        opts = self.opts
        name = opts.name or runfolder.default_name(self.command)
        try:
            run_dir = runfolder.make_run_dir(opts.out, name, opts.runs_base)
        except OSError as exc:
            self._cleanup_cgroup()
            raise UsageError(f"--out: cannot create the run folder ({exc})") from exc
        started = time.time()
        writer = EventWriter(run_dir / runfolder.EVENTS)
        output = OutputLog(run_dir / runfolder.OUTPUT)
        registry_entry = runfolder.register(os.getpid(), run_dir)
        me = psutil.Process()
        runfolder.write_json(
            run_dir / runfolder.LIVE_STATE,
            {
                "supervisor_pid": os.getpid(),
                "supervisor_create_time": me.create_time(),
                "command": self.command,
            },
        )
        manifest_extra: dict[str, object] = {
            "supervisor_pid": os.getpid(),
            "memory_limit_bytes": opts.memory_limit,
        }
        runfolder.write_json(
            run_dir / runfolder.MANIFEST,
            runfolder.build_manifest(
                command=self.command, cwd=str(Path.cwd()), name=name, started=started, extra=manifest_extra
            ),
        )
        self._environment = environment = EnvironmentCapture(
            self.command, Path.cwd(), query_gpus=driver_may_exist()
        )
        self._live = diagnosis = self._diagnosis(run_dir)
        platform.become_subreaper()
        self._say(f"trainmedic: supervising {' '.join(self.command)}; run folder {run_dir}")
        gpu = self.gpu or default_probe()
        with self._signals.finishing():
            try:
                with self._signals.installed():
                    result, attempt_no = self._attempts(run_dir, name, writer, output, gpu)
            finally:
                gpu.close()
                writer.close()
                output.close()
                self._cleanup_cgroup()
                runfolder.unregister(registry_entry)
                with contextlib.suppress(OSError):
                    (run_dir / runfolder.STOP_REQUEST).unlink()
            status = platform.exit_status(result.returncode)
            ended = time.time()
            from trainmedic.trackers.attach import curves_from_trackers, to_trackers  # MLflow / W&B runs

            curves_from_trackers(run_dir, choice=opts.tracker, say=self._say)
            manifest_extra.update(attempts=attempt_no + 1, trainer_pids=result.trainer_pids)
            manifest, findings = self._finish(
                run_dir,
                environment,
                diagnosis,
                runfolder.build_manifest(
                    command=self.command,
                    cwd=str(Path.cwd()),
                    name=name,
                    started=started,
                    ended=ended,
                    exit_code=status,
                    signal=platform.signal_of(result.returncode),
                    extra=manifest_extra,
                ),
            )
            stopped = result.stopped_by is not None
            to_trackers(
                run_dir, findings, exit_status=status, stopped=stopped, choice=opts.tracker, say=self._say
            )
            runfolder.write_json(
                run_dir / runfolder.MANIFEST,
                {**manifest, "supervisor": own_costs(result.exited_at, diagnosis.report)},
            )
        return RunOutcome(status, run_dir, findings, attempt_no + 1, dict(getattr(diagnosis, "counts", {})))

    def _attempts(
        self, run_dir: Path, name: str, writer: EventWriter, output: OutputLog, gpu: GpuProbe
    ) -> tuple[AttemptResult, int]:
        """Launch the command, and again while `--restarts` allows: the last result, its number."""
        opts = self.opts
        for attempt_no in range(opts.restarts + 1):
            result = self._one_attempt(
                number=attempt_no, run_dir=run_dir, name=name, writer=writer, output=output, gpu=gpu
            )
            status = platform.exit_status(result.returncode)
            if not self._should_restart(status, result, attempt_no):
                break
            delay = min(opts.backoff * 2**attempt_no, MAX_BACKOFF_S)
            self._say(f"trainmedic: exit status {status}; restart {attempt_no + 1} in {delay:.0f} s")
            self._signals.wake.wait(delay)
            if self._signals.stop_signals:
                break
        return result, attempt_no

    @staticmethod
    def _finish(
        run_dir: Path, environment: EnvironmentCapture, diagnosis: LiveDiagnosis, manifest: dict[str, object]
    ) -> tuple[dict[str, object], list[Finding]]:
        """Join the environment capture, write the manifest, diagnose, write the outputs; the
        manifest written and the findings."""
        captured, environment_events = environment.result()
        with EventWriter(run_dir / runfolder.EVENTS) as late_writer:
            for event in environment_events:
                late_writer.emit(event)
        if captured is not None:
            manifest = {**captured, **{k: v for k, v in manifest.items() if k != "host"}}
        runfolder.write_json(run_dir / runfolder.MANIFEST, manifest)
        return manifest, diagnosis.conclude()

    def _one_attempt(
        self, *, number: int, run_dir: Path, name: str, writer: EventWriter, output: OutputLog, gpu: GpuProbe
    ) -> AttemptResult:
        opts = self.opts
        events_path = run_dir / runfolder.EVENTS
        env = child_env(events_path, instrument=opts.instrument)
        # No PYTHONUNBUFFERED: the trainer buffers its output as it would without us (logstream)
        env.update(PYTHONFAULTHANDLER="1")
        env[runfolder.RUN_DIR_ENV] = str(run_dir.resolve())
        env["TRAINMEDIC_RESTART"] = str(number)
        if self._logs is not None and self._logs.checkpoint:
            env["TRAINMEDIC_RESUME_FROM"] = self._logs.checkpoint
        node = os.environ.get("TRAINMEDIC_NODE") or hostname()
        live, environment = self._live, self._environment
        # both made in run(), before the first attempt
        assert live is not None
        assert environment is not None

        def emit(event: Event) -> None:
            """The supervisor's events carry its node, like the trainers' (several nodes may
            write one run folder)."""
            if event.node is None:
                event.node = node
            writer.emit(event)
            live.note(event)

        emit(
            RunStart(
                command=self.command,
                cwd=str(Path.cwd()),
                name=name,
                expect_epochs=opts.expect_epochs,
                attempt=number,
            )
        )
        limit = self.cgroup.info if self.cgroup is not None else effective_limit("self")
        if limit is not None:
            source = "memory-limit-option" if self.cgroup else "cgroup"
            emit(
                MemoryLimit(
                    limit_bytes=limit.limit_bytes or 0,
                    source=source,
                    cgroup=str(limit.path),
                    cgroup_version=limit.version,
                )
            )
        oom_before = (limit.oom_kills() if limit else None, host_oom_kills())
        if self._logs is None:
            self._logs = LogInterpreter(emit)
        else:
            self._logs.new_attempt()
        sampler = TreeSampler(
            base_interval=opts.sample_interval, gpu=gpu, cgroup=self.cgroup.info if self.cgroup else None
        )
        status = None if opts.quiet or self.terminal is None else StatusLine(self.terminal)
        config = AttemptConfig(
            command=self.command,
            env=env,
            run_dir=run_dir,
            grace=opts.grace,
            hang_timeout=opts.hang_timeout,
            on_hang=opts.on_hang,
            cgroup=self.cgroup,
            terminal=self.terminal,
            status=status,
            own_helpers_done=environment.wait,
        )
        t0 = time.time()
        self.attempt = Attempt(
            config,
            emit=emit,
            sampler=sampler,
            logs=self._logs,
            output=output,
            tail=EventTail(events_path, on_event=live.note),
            diagnosis=live,
        )
        self._signals.attach(self.attempt)
        try:
            result = self.attempt.run()
        except OSError as exc:  # exec failed after the checks (e.g. a bad #! interpreter line)
            message = f"trainmedic: cannot start {self.command[0]}: {exc}\n"
            output.write(message.encode())
            if self.terminal is not None:
                self.terminal.line(message.rstrip())
            result = AttemptResult(126)
        _emit_oom(emit, limit, oom_before)
        emit(
            RunEnd(
                exit_code=platform.exit_status(result.returncode),
                signal=platform.signal_of(result.returncode),
                duration_s=round(time.time() - t0, 3),
                attempt=number,
            )
        )
        return result

    def _should_restart(self, status: int, result: AttemptResult, number: int) -> bool:
        if number >= self.opts.restarts or status in NO_RESTART_STATUSES:
            return False
        return result.stopped_by is None and not self._signals.stop_signals

    def _cleanup_cgroup(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()

    def _say(self, text: str) -> None:
        if not self.opts.quiet and self.terminal is not None:
            self.terminal.line(text)


def own_costs(exited: float, report: dict[str, object]) -> dict[str, object]:
    """What the supervisor itself cost, for the manifest: its peak resident memory over the
    whole run, the seconds from the launched process's exit to its diagnosis, report and
    tracker attachments done (orphaned workers ended on the way), and what became of the
    report (drawn in a process of its own, within its budget)."""
    return {
        "peak_rss_bytes": peak_rss_bytes(),
        "after_exit_seconds": round(time.monotonic() - exited, 3),
        "report": report,
    }


def _emit_oom(
    emit: Callable[[Event], None], limit: CgroupInfo | None, before: tuple[int | None, int | None]
) -> None:
    """Whether the kernel OOM-killed something during the attempt: the run's cgroup counter
    is decisive; the machine-wide counter is the fallback without a cgroup."""
    cgroup_now = limit.oom_kills() if limit else None
    if cgroup_now is not None and before[0] is not None and cgroup_now > before[0]:
        emit(OomKill(count=cgroup_now - before[0], scope="cgroup", cgroup=str(limit.path if limit else "")))
        return
    host_now = host_oom_kills()
    if host_now is not None and before[1] is not None and host_now > before[1]:
        emit(OomKill(count=host_now - before[1], scope="host"))
