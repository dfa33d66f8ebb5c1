"""RUN006, RUN007, RUN010: the processes of a supervised run.

A launcher stub in front of the real trainer (RUN006), a trainer tree that stopped making
progress and using CPU (RUN007, with the py-spy stacks the supervisor took), and processes
that outlived the trainer (RUN010).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

from trainmedic.events import Event, HangDetected, OrphanEnded, ProcessSpawn, RunEnd, RunStart
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import RunRecord, cell_label, cell_running
from trainmedic.rules import _ray, _spark
from trainmedic.units import human_bytes, signal_name


def _launcher_stub_example() -> list[Event]:
    """bash -c 'python train.py': the shell is PID 100, the trainer PID 101."""
    return [
        RunStart(t=0.0, pid=100, command=["bash", "-c", "python train.py"]),
        ProcessSpawn(t=0.1, pid=100, cmdline=["bash", "-c", "python train.py"], role="launcher"),
        ProcessSpawn(t=0.2, pid=101, ppid=100, cmdline=["python", "train.py"], role="trainer"),
        RunEnd(t=10.0, pid=100, exit_code=0),
    ]


LAUNCHER_STUB = FindingSpec(
    code="RUN006",
    slug="launcher-stub",
    severity=Severity.INFO,
    title="Launched through a launcher stub",
    what=(
        "The launched process is a launcher (venv redirector, uv run, poetry run, conda run, "
        "a shell wrapper, the torchrun agent); the real trainer PIDs are given."
    ),
    why=(
        "The PID you hold is not the process that trains: killing or profiling it misses the "
        "trainer, which keeps running or is orphaned. A Python launcher that receives SIGINT "
        "may even kill its child without letting it save. trainmedic takes as trainers the "
        "Python processes with no other Python process below them (not counting their own "
        "workers), and signals them directly."
    ),
    example="bash -c 'python train.py' -> bash (PID 100, 3 MB) -> python (PID 101, 5 GB).",
    fix="Signal and profile the trainer PIDs given here; `trainmedic stop` does it for you.",
    example_input=_launcher_stub_example,
)


def _hang_example() -> list[Event]:
    """No output and 0 % CPU for 10 minutes; py-spy finds the main thread waiting on a lock."""
    dump = (
        "Process 101: python train.py\n"
        'Thread 101 (idle): "MainThread"\n'
        "    acquire (threading.py:320)\n"
        "    train_step (train.py:23)\n"
    )
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        HangDetected(t=600.0, pid=100, idle_s=600.0, cpu_percent=0.0, stacks={"101": dump}),
    ]


HANG = FindingSpec(
    code="RUN007",
    slug="hang",
    severity=Severity.ERROR,
    title="Hang: no progress and no CPU",
    what=(
        "No progress output and near-zero CPU in the trainer tree for the hang timeout; the "
        "Python stack of every trainer thread is attached."
    ),
    why="A deadlocked run holds its GPUs for hours while producing nothing.",
    example="Two DataLoader workers waiting on a lock the main process holds; a collective never joined.",
    fix=(
        "Read the stacks (taken with py-spy, from outside the process): the frame each thread "
        "waits in names the lock, queue or collective; `--on-hang stop` ends such runs instead "
        "of holding the machine."
    ),
    example_input=_hang_example,
)


def _orphan_processes_example() -> list[Event]:
    """The trainer (PID 101) ended by os._exit; its DataLoader worker PID 102 kept 3 GB."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        RunEnd(t=10.0, pid=100, exit_code=0),
        OrphanEnded(
            t=10.5,
            pid=102,
            ppid=101,
            cmdline=["python", "train.py"],
            rss_bytes=3_000_000_000,
            signal=15,
        ),
    ]


ORPHAN_PROCESSES = FindingSpec(
    code="RUN010",
    slug="orphan-processes",
    severity=Severity.WARNING,
    title="Processes outlived the trainer",
    what=(
        "Processes of the trainer tree (e.g. data-loader workers) outlived the trainer; "
        "trainmedic ended them and lists them."
    ),
    why="Orphans keep memory, GPU contexts and ports busy and can block the next run.",
    example="The trainer died by os._exit; its 4 DataLoader workers kept 3 GB each.",
    fix="Shut workers down on exit (context managers, persistent_workers=False at teardown).",
    example_input=_orphan_processes_example,
)


# -- RUN006 ---------------------------------------------------------------------------------
_LAUNCHER_NAMES = {
    "bash": "shell wrapper",
    "sh": "shell wrapper",
    "dash": "shell wrapper",
    "zsh": "shell wrapper",
    "uv": "uv run",
    "poetry": "poetry run",
    "conda": "conda run",
    "mamba": "mamba run",
    "pixi": "pixi run",
    "torchrun": "torchrun agent",
    "accelerate": "accelerate launch",
    "deepspeed": "deepspeed launcher",
    "srun": "srun",
    "mpirun": "mpirun",
}


def launcher_kind(cmdline: Sequence[str]) -> str:
    """A human name for a launcher process from its command line."""
    for arg in cmdline[:3]:
        base = PurePath(arg).name.lower().removesuffix(".exe")
        if base in _LAUNCHER_NAMES:
            return _LAUNCHER_NAMES[base]
    if "torch.distributed.run" in cmdline:
        return "torchrun agent"
    if _spark.is_spark_jvm(cmdline):
        return "spark-submit (the Spark JVM)"
    if _is_python(cmdline):
        return "python launcher stub (a wrapper script or venv redirector)"
    return "launcher"


def _is_python(cmdline: Sequence[str]) -> bool:
    return bool(cmdline) and PurePath(cmdline[0]).name.lower().startswith("python")


def launcher_stub(record: RunRecord) -> list[Finding]:
    latest: dict[int, ProcessSpawn] = {}
    ranks: dict[int, int | None] = {}
    first_pid: int | None = None
    for spawn in record.processes:
        if spawn.source != "supervisor":
            ranks[spawn.pid] = spawn.rank  # announced by the process itself, with its rank
            continue
        first_pid = spawn.pid if first_pid is None else first_pid
        latest[spawn.pid] = spawn
    launchers = [p for p in latest.values() if p.role == "launcher"]
    trainers = [p for p in latest.values() if p.role == "trainer"]
    # A process other than Python is a trainer only while the tree has no Python process (the
    # supervisor's rule): a launcher's start-up steps (spark-submit's subshell and launcher JVM)
    # seen before the Python trainer started are not trainers once it runs.
    trainers = [p for p in trainers if _is_python(p.cmdline)] or trainers
    if not launchers or not trainers:
        return []
    root = latest.get(first_pid) if first_pid is not None else None
    launcher = root if root is not None and root.role == "launcher" else launchers[0]
    kind = launcher_kind(launcher.cmdline)
    pids = ", ".join(str(p.pid) for p in trainers)
    return [
        LAUNCHER_STUB.finding(
            f"PID {launcher.pid} is a launcher ({kind}); the real trainer is PID {pids}",
            evidence={
                "launcher_pid": launcher.pid,
                "launcher": kind,
                "launcher_cmdline": launcher.cmdline,
                "launchers": [p.pid for p in launchers],
                "trainer_pids": [p.pid for p in trainers],
                "trainer_cmdlines": [p.cmdline for p in trainers],
                "trainer_ranks": [ranks.get(p.pid) for p in trainers],
            },
            pid=trainers[0].pid,
        )
    ]


# -- RUN007 ---------------------------------------------------------------------------------
_SPY_THREAD = re.compile(r'^Thread (?P<tid>\S+) \((?P<state>[^)]*)\): "(?P<name>[^"]*)"')
_SPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<where>[^()]+:\d+)\)\s*$")


def innermost_frames(stack_text: str) -> list[str]:
    """'thread: function (file:line)' of the top frame of each thread in a py-spy dump."""
    tops: list[str] = []
    thread: str | None = None
    for line in stack_text.splitlines():
        head = _SPY_THREAD.match(line)
        if head:
            thread = head["name"]
            continue
        frame = _SPY_FRAME.match(line)
        if frame and thread is not None:
            tops.append(f"{thread}: {frame['func']} ({frame['where']})")
            thread = None
    return tops


def hang(record: RunRecord) -> list[Finding]:
    found = []
    for event in record.of_type(HangDetected):
        tops = {pid: innermost_frames(text) for pid, text in event.stacks.items()}
        waiting = "; ".join(f"pid {pid}: " + ", ".join(t) for pid, t in tops.items() if t)
        cell = cell_running(record.events, until=event.t)
        found.append(
            HANG.finding(
                f"No progress and {event.cpu_percent:.1f} % CPU for {event.idle_s:.0f} s"
                + (f" in {cell_label(cell)}" if cell else "")
                + (f"; threads wait in {waiting}" if waiting else ""),
                evidence={
                    "cell": {"execution_count": cell.execution_count, "first_line": cell.first_line}
                    if cell
                    else None,
                    "idle_s": event.idle_s,
                    "cpu_percent": event.cpu_percent,
                    "action": event.action,
                    "waiting_in": tops,
                    "stacks": event.stacks,
                },
            )
        )
    return found[:1] + [f for f in found[1:] if f.message != found[0].message]


# -- RUN010 ---------------------------------------------------------------------------------
def orphan_processes(record: RunRecord) -> list[Finding]:
    # Ray's own processes (a detached `ray::PlacementGroupCleaner`, idle workers) may outlive a
    # driver that died, and Spark's JVM and Python daemon end a moment after their driver:
    # trainmedic ends them too, but they are Ray's and Spark's, not the user's leak.
    orphans = [
        o
        for o in record.of_type(OrphanEnded)
        if not (_ray.is_ray_process(o.cmdline) or _spark.is_spark_process(o.cmdline))
    ]
    if not orphans:
        return []
    total = sum(o.rss_bytes or 0 for o in orphans)
    return [
        ORPHAN_PROCESSES.finding(
            f"{len(orphans)} process(es) of the trainer tree outlived the trainer "
            f"({human_bytes(total)} RSS); trainmedic ended them",
            evidence={
                "processes": [
                    {
                        "pid": o.pid,
                        "ppid": o.ppid,
                        "cmdline": o.cmdline,
                        "rss_bytes": o.rss_bytes,
                        "signal": signal_name(o.signal) if o.signal else None,
                    }
                    for o in orphans
                ]
            },
        )
    ]
