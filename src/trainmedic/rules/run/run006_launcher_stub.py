"""RUN006 `launcher-stub`: the launched process is a launcher in front of the real trainer.

Collector: the supervisor (`trainmedic run`) walks the process tree (`supervise/tree.py`) and
sends a `ProcessSpawn` for each process with its role: the launchers (shells, `uv run`, the
torchrun agent, Python redirectors) and the trainers (Python processes with no other Python
process below them). A trainer that announces itself in-process adds its rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from trainmedic.events import Event, ProcessSpawn, RunEnd, RunStart
from trainmedic.evidence import spark as _spark
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord


def _example() -> list[Event]:
    """bash -c 'python train.py': the shell is PID 100, the trainer PID 101."""
    return [
        RunStart(t=0.0, pid=100, command=["bash", "-c", "python train.py"]),
        ProcessSpawn(t=0.1, pid=100, cmdline=["bash", "-c", "python train.py"], role="launcher"),
        ProcessSpawn(t=0.2, pid=101, ppid=100, cmdline=["python", "train.py"], role="trainer"),
        RunEnd(t=10.0, pid=100, exit_code=0),
    ]


SPEC = FindingSpec(
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
    decided_in=("run events",),
    example_input=_example,
)


# -- the decision ---------------------------------------------------------------------------
def launcher_stub(record: RunRecord) -> list[Finding]:
    """The supervisor saw a launcher and, below it, trainers: name the launcher the run started
    (the first process) and the trainers' PIDs."""
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
    evidence = {
        "launcher_pid": launcher.pid,
        "launcher": launcher_kind(launcher.cmdline),
        "launcher_cmdline": launcher.cmdline,
        "launchers": [p.pid for p in launchers],
        "trainer_pids": [p.pid for p in trainers],
        "trainer_cmdlines": [p.cmdline for p in trainers],
        "trainer_ranks": [ranks.get(p.pid) for p in trainers],
    }
    return [SPEC.finding(message(evidence), evidence=evidence, pid=trainers[0].pid)]


def _is_python(cmdline: Sequence[str]) -> bool:
    return bool(cmdline) and PurePath(cmdline[0]).name.lower().startswith("python")


RULES: tuple[Rule, ...] = (launcher_stub,)


# -- the wording ----------------------------------------------------------------------------
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


def message(evidence: Mapping[str, Any]) -> str:
    pids = ", ".join(str(pid) for pid in evidence["trainer_pids"])
    return f"PID {evidence['launcher_pid']} is a launcher ({evidence['launcher']}); the real trainer is PID {pids}"
