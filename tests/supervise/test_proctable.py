"""The supervisor's process table: a process first seen already exiting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainmedic.events import Event, ProcessSpawn
from trainmedic.supervise import tree
from trainmedic.supervise.proctable import ProcessTable


def test_a_process_first_seen_exiting_is_not_taken_for_the_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ray worker killed at shutdown vanished from one walk of the tree (its read failed as
    it exited) and showed up in the next with an empty command line (seen in a Ray 2.58 run:
    `ray::IDLE`, then gone, then `[]`). It had announced itself as a Python process, so it
    would have been a trainer below the driver, and the driver a launcher stub (RUN006).
    The walk's reading of the exiting process is given here; the parent is a real process."""
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        real = tree.snapshot(parent.pid)
        exiting = tree.Proc(parent.pid + 1, parent.pid, [], 0.0, real[parent.pid].handle)
        monkeypatch.setattr(tree, "snapshot", lambda root: {**real, exiting.pid: exiting})
        events: list[Event] = []
        table = ProcessTable(events.append, tmp_path)
        table.root = parent.pid
        table.refresh(announced=[parent.pid, exiting.pid])
        roles = {e.pid: e.role for e in events if isinstance(e, ProcessSpawn)}
        assert roles == {parent.pid: tree.ROLE_TRAINER}
        assert [p.pid for p in table.trainers()] == [parent.pid]
    finally:
        parent.kill()
        parent.wait()
