"""The process tree of one attempt as last walked: its processes and their roles.

Apart from Attempt because it is the bookkeeping of the tree alone: walk and classify it,
announce each change as an event, mirror it into the live state file (what `trainmedic
stop` and `status` read), and end what is left of it at the end. The attempt decides when
to walk and what to do with the trainers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

from trainmedic import runfolder
from trainmedic.events import Event, OrphanEnded, ProcessExit, ProcessSpawn
from trainmedic.supervise import platform, tree
from trainmedic.supervise.signals import stop_processes


class ProcessTable:
    """The processes of the launched command's tree, by PID, with the role each has had."""

    def __init__(self, emit: Callable[[Event], None], run_dir: Path) -> None:
        self.emit = emit
        self.run_dir = run_dir
        self.root = -1  # the launched command's PID, once it started
        self.procs: dict[int, tree.Proc] = {}
        self.roles: dict[int, str] = {}

    def refresh(self, announced: Iterable[int]) -> bool:
        """Re-walk the tree and classify it; True when its processes or roles changed.
        `announced`: the PIDs that told the events file they are Python trainers."""
        fresh = tree.snapshot(self.root)
        if not fresh:
            return False
        for pid, proc in fresh.items():  # a dying process (a zombie) reads an empty command line:
            known = self.procs.get(pid)  # keep the one it had, so it keeps its role
            if not proc.cmdline and known is not None:
                proc.cmdline = known.cmdline
        # one still without a command line is ending and was missed by the last walk (its read
        # failed as it exited, so it was recorded as gone): with nothing to classify it by, it
        # would pass for a trainer below a launcher (RUN006 on a Ray worker killed at shutdown)
        fresh = {pid: proc for pid, proc in fresh.items() if proc.cmdline or pid == self.root}
        changed = set(fresh) != set(self.procs)
        for pid in set(self.procs) - set(fresh):
            self.emit(ProcessExit(pid=pid))  # its status belongs to its parent; only the root's is ours
        roles = tree.classify(fresh, self.root, announced)
        for pid, role in self.roles.items():  # a launcher stays one after its children end,
            known = self.procs.get(pid)  # unless it has since exec'd another program
            if role == tree.ROLE_LAUNCHER and pid in roles and not _execed(known, fresh[pid]):
                roles[pid] = role
        for pid, proc in fresh.items():
            known = self.procs.get(pid)
            proc.handle = known.handle if known is not None else proc.handle
            role = roles.get(pid, "unknown")
            # a fork seen before its exec (a shell's child about to become `python train.py`)
            # is announced again once it runs the real program, under the same PID
            if known is None or self.roles.get(pid) != role or _execed(known, proc):
                changed = True
                self.emit(ProcessSpawn(pid=pid, ppid=proc.ppid, cmdline=proc.cmdline, role=role))
            proc.role = role
        self.procs = fresh
        self.roles.update(roles)
        if changed:
            self._write_live_state()
        return changed

    def trainers(self) -> list[tree.Proc]:
        return [p for p in self.procs.values() if p.role == tree.ROLE_TRAINER]

    def _write_live_state(self) -> None:
        state = runfolder.read_json(self.run_dir / runfolder.LIVE_STATE) or {}
        state.update(
            root_pid=self.root,
            trainer_pids=[p.pid for p in self.trainers()],
            processes={str(p.pid): {"role": p.role, "cmdline": p.cmdline} for p in self.procs.values()},
        )
        runfolder.write_json(self.run_dir / runfolder.LIVE_STATE, state)

    def end_orphans(self, grace: float) -> None:
        """Processes of the tree alive after the trainer ended: end them and record each. Those
        that ended since the last walk (workers joined just before the end) are recorded as
        ended, as a walk would have."""
        candidates: dict[int, psutil.Process] = {}
        for p in self.procs.values():
            if p.pid == self.root:
                continue
            if tree.is_alive(p.pid, p.create_time):
                candidates[p.pid] = p.handle
            else:
                self.emit(ProcessExit(pid=p.pid))
        for handle in tree.own_descendants():
            candidates.setdefault(handle.pid, handle)
        if not candidates:
            return
        info: dict[int, tuple[int | None, list[str], int | None]] = {}
        for pid, handle in candidates.items():
            with contextlib.suppress(psutil.Error):
                info[pid] = (handle.ppid(), handle.cmdline(), handle.memory_info().rss)
        outcome = stop_processes(list(candidates.values()), first=platform.SIGTERM, grace=grace)
        signals = {pid: sig for sig, pids in outcome.sent for pid in pids}
        for pid, (ppid, cmdline, rss) in info.items():
            self.emit(
                OrphanEnded(pid=pid, ppid=ppid, cmdline=cmdline, rss_bytes=rss, signal=signals.get(pid))
            )


def _execed(known: tree.Proc | None, now: tree.Proc) -> bool:
    """Whether a process seen before now runs another program (same PID, new command line)."""
    return known is not None and bool(now.cmdline) and now.cmdline != known.cmdline
