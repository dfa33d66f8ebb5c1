"""Launcher resolution on real process trees (bash -c, a Python launcher stub, forked workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from trainmedic.supervise import tree

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "supervise"
SLEEPER = "import time, sys; time.sleep(30)"


def wait_for_tree(pid: int, size: int, timeout: float = 15.0) -> dict[int, tree.Proc]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = tree.snapshot(pid)
        if len(procs) >= size and all(p.cmdline for p in procs.values()):
            return procs
        time.sleep(0.05)
    raise AssertionError(f"tree of {pid} did not reach {size} processes: {tree.snapshot(pid)}")


@pytest.fixture
def spawn():
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, process_group=0)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_bash_wrapper_is_a_launcher(spawn) -> None:
    root = spawn(["bash", "-c", f"{sys.executable} -c '{SLEEPER}'; exit $?"])
    procs = wait_for_tree(root.pid, 2)
    roles = tree.classify(procs, root.pid)
    python = next(pid for pid, p in procs.items() if pid != root.pid)
    assert roles == {root.pid: tree.ROLE_LAUNCHER, python: tree.ROLE_TRAINER}


def test_python_stub_and_forked_workers(spawn) -> None:
    code = (
        "import multiprocessing as mp, time\n"
        "def w():\n    time.sleep(30)\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('fork')\n"
        "    [ctx.Process(target=w).start() for _ in range(2)]\n"
        "    time.sleep(30)\n"
    )
    root = spawn([sys.executable, str(EXAMPLES / "launcher_stub.py"), "-c", code])
    procs = wait_for_tree(root.pid, 4)
    roles = tree.classify(procs, root.pid)
    trainer = next(pid for pid, p in procs.items() if p.ppid == root.pid)
    assert roles[root.pid] == tree.ROLE_LAUNCHER
    assert roles[trainer] == tree.ROLE_TRAINER
    assert sorted(r for pid, r in roles.items() if pid not in (root.pid, trainer)) == [tree.ROLE_WORKER] * 2
    _, trainers = tree.resolve_trainers(root.pid)
    assert [p.pid for p in trainers] == [trainer]


def test_single_process_is_its_own_trainer(spawn) -> None:
    root = spawn([sys.executable, "-c", SLEEPER])
    procs = wait_for_tree(root.pid, 1)
    assert tree.classify(procs, root.pid) == {root.pid: tree.ROLE_TRAINER}


def test_non_python_leaf_is_the_trainer(spawn) -> None:
    root = spawn(["bash", "-c", "sleep 30; exit 0"])
    procs = wait_for_tree(root.pid, 2)
    roles = tree.classify(procs, root.pid)
    assert roles[root.pid] == tree.ROLE_LAUNCHER
    assert list(roles.values()).count(tree.ROLE_TRAINER) == 1


def test_the_save_checks_worker_is_not_taken_for_the_trainer(spawn, tmp_path: Path) -> None:
    """A trainer that saved a model has trainmedic's save worker as a Python child (a real one,
    started as the save checks start it): the trainer is still the trainer, not a launcher."""
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from trainmedic.torch._save_worker import launch\n"
        "launch(Path(sys.argv[1]))\n"
        "time.sleep(30)\n"
    )
    root = spawn([sys.executable, "-c", code, str(tmp_path)])
    procs = wait_for_tree(root.pid, 2)
    roles = tree.classify(procs, root.pid)
    worker = next(pid for pid in procs if pid != root.pid)
    assert "trainmedic.torch._save_worker" in procs[worker].cmdline
    assert roles == {root.pid: tree.ROLE_TRAINER, worker: tree.ROLE_WORKER}


def test_kernel_children_lists_find_the_same_tree_as_psutil(spawn) -> None:
    """Three levels, a child started from a second thread (listed under that thread's children file)."""
    code = (
        "import subprocess, sys, threading, time\n"
        f"sleeper = [sys.executable, '-c', {SLEEPER!r}]\n"
        "threading.Thread(target=lambda: subprocess.Popen(sleeper)).start()\n"
        "subprocess.Popen(['bash', '-c', ' '.join(sleeper[:2]) + ' \"' + sleeper[2] + '\"; exit $?'])\n"
        "time.sleep(30)\n"
    )
    root = spawn([sys.executable, "-c", code])
    wait_for_tree(root.pid, 4)
    below = tree.descendants(root.pid)
    if below is None:
        pytest.skip("this kernel has no /proc/PID/task/TID/children")
    expected = {p.pid for p in psutil.Process(root.pid).children(recursive=True)}
    assert len(expected) == 3
    assert set(below) == expected
