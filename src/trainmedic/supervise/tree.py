"""The process tree of a run, and which of its processes is the real trainer.

A launched command is often not the trainer: `bash -c`, `uv run`, `poetry run`,
`conda run`, a venv redirector on Windows, or the torchrun agent start the
Python process that trains as a child. The rule used here needs no list of
launcher names: the trainers are the Python processes of the tree with no
Python process below them, not counting their own workers (forks with the
parent's command line, multiprocessing children). Without any Python process,
the leaves of the tree are the trainers. Everything between the launched
process and the trainers is a launcher. Built on psutil, so it works on
Windows too.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath

import psutil

from trainmedic.evidence.ray import is_ray_process
from trainmedic.evidence.spark import is_spark_helper

ROLE_LAUNCHER = "launcher"
ROLE_TRAINER = "trainer"
ROLE_WORKER = "worker"

_MP_MARKERS = ("multiprocessing.spawn", "multiprocessing.forkserver", "--multiprocessing-fork")


@dataclass(slots=True)
class Proc:
    """What the supervisor keeps of one process: enough to classify, sample and stop it."""

    pid: int
    ppid: int
    cmdline: list[str]
    create_time: float
    handle: psutil.Process = field(repr=False)
    role: str = "unknown"

    @property
    def name(self) -> str:
        return PurePath(self.cmdline[0]).name if self.cmdline else ""


def is_python(cmdline: list[str]) -> bool:
    if not cmdline:
        return False
    name = PurePath(cmdline[0]).name.lower().removesuffix(".exe")
    return name.startswith(("python", "pypy")) or name in {"torchrun", "accelerate", "deepspeed"}


def snapshot(root_pid: int) -> dict[int, Proc]:
    """The live tree under `root_pid` (inclusive); processes that vanish mid-walk are skipped."""
    try:
        root = psutil.Process(root_pid)
        below = descendants(root_pid)
        members = [root, *(root.children(recursive=True) if below is None else _handles(below))]
    except psutil.Error:
        return {}
    tree: dict[int, Proc] = {}
    for proc in members:
        with contextlib.suppress(psutil.Error):
            tree[proc.pid] = Proc(proc.pid, proc.ppid(), proc.cmdline(), proc.create_time(), proc)
    return tree


def descendants(root_pid: int) -> list[int] | None:
    """Every process below `root_pid`, from the kernel's per-thread children lists (Linux).

    psutil's `children(recursive=True)` reads the parent of every process of the machine
    (/proc/*/stat), a cost that grows with the node's process count, at every tree
    refresh. The children files cost reads of the tree only.
    None where the kernel does not have them (CONFIG_PROC_CHILDREN) or off Linux.
    """
    if not Path(f"/proc/{root_pid}/task/{root_pid}/children").exists():
        return None
    found: list[int] = []
    seen, stack = {root_pid}, [root_pid]
    while stack:
        pid = stack.pop()
        try:
            threads = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:  # exited meanwhile
            continue
        for thread in threads:
            try:
                children = [int(c) for c in (thread / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                if child not in seen:
                    seen.add(child)
                    found.append(child)
                    stack.append(child)
    return found


def _handles(pids: Iterable[int]) -> list[psutil.Process]:
    handles = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            handles.append(psutil.Process(pid))
    return handles


def _is_framework_helper(cmdline: list[str]) -> bool:
    """A local Ray cluster's processes, Spark's helpers (pyspark.daemon, spark-submit's start-up)
    and trainmedic's own (the save checks' worker, which reloads a saved model beside the
    trainer): none of them is the trainer, whatever runs below it."""
    return is_ray_process(cmdline) or is_spark_helper(cmdline) or _is_trainmedic_helper(cmdline)


def _is_trainmedic_helper(cmdline: list[str]) -> bool:
    """`python -m trainmedic.<package>._<module> ...`: trainmedic starts its helpers from private
    modules only, which a user never runs as a training script."""
    for flag, module in itertools.pairwise(cmdline):
        if flag == "-m":
            parts = module.split(".")
            return parts[0] == "trainmedic" and any(part.startswith("_") for part in parts[1:])
    return False


def classify(tree: dict[int, Proc], root_pid: int, announced: Iterable[int] = ()) -> dict[int, str]:
    """Role of each process: launcher, trainer or worker (see the module docstring)."""
    announced_set = set(announced)
    python = {pid for pid, p in tree.items() if pid in announced_set or is_python(p.cmdline)}
    workers = {pid for pid in python if _is_worker(tree, pid, python)}
    workers |= {pid for pid, p in tree.items() if pid != root_pid and _is_framework_helper(p.cmdline)}
    children: dict[int, list[int]] = {}
    for pid, proc in tree.items():
        if pid != root_pid:
            children.setdefault(proc.ppid, []).append(pid)

    def below(pid: int) -> Iterable[int]:
        for child in children.get(pid, []):
            yield child
            yield from below(child)

    candidates = python - workers
    if candidates:
        trainers = {pid for pid in candidates if not (set(below(pid)) & candidates)}
    else:
        trainers = {pid for pid in tree if not children.get(pid) and pid not in workers}
    if not trainers and root_pid in tree:
        trainers = {root_pid}
    above: set[int] = set()
    for pid in trainers:
        parent = tree[pid].ppid
        while parent in tree and parent not in above:
            above.add(parent)
            parent = tree[parent].ppid
    roles: dict[int, str] = {}
    for pid in tree:
        if pid in trainers:
            roles[pid] = ROLE_TRAINER
        elif pid in above:
            roles[pid] = ROLE_LAUNCHER
        else:
            roles[pid] = ROLE_WORKER
    return roles


def _is_worker(tree: dict[int, Proc], pid: int, python: set[int]) -> bool:
    """A data-loader or multiprocessing worker: a child of a Python process that is a fork of
    it (same command line) or a multiprocessing spawn/forkserver child."""
    proc = tree[pid]
    parent = tree.get(proc.ppid)
    if parent is None or parent.pid not in python:
        return False
    joined = " ".join(proc.cmdline)
    return proc.cmdline == parent.cmdline or any(marker in joined for marker in _MP_MARKERS)


def resolve_trainers(pid: int) -> tuple[dict[int, Proc], list[Proc]]:
    """For any PID (a launcher stub started elsewhere, or the trainer itself): its tree and the
    trainer processes in it."""
    tree = snapshot(pid)
    roles = classify(tree, pid)
    for p in tree.values():
        p.role = roles.get(p.pid, "unknown")
    return tree, [p for p in tree.values() if p.role == ROLE_TRAINER]


def is_alive(pid: int, create_time: float | None = None) -> bool:
    """Alive, and the same process (not a reused PID) when its start time is known."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) < 0.01
    except psutil.Error:
        return False


def own_descendants() -> list[psutil.Process]:
    """Every live process below this one (with the subreaper set, orphans of the tree too);
    from the kernel's children lists where it has them (see `descendants`)."""
    below = descendants(os.getpid())
    try:
        handles = psutil.Process(os.getpid()).children(recursive=True) if below is None else _handles(below)
    except psutil.Error:
        return []
    return [p for p in handles if _not_zombie(p)]


def _not_zombie(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
