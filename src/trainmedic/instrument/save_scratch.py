"""What the torch and the Keras save checks share: their scratch folders and their worker.

Both check a user's save in a worker process of trainmedic's own, fed through a folder per
save. The folders live in the run folder's `save-checks/` under `trainmedic run` (kept with
the run's evidence) and in a temporary folder otherwise (removed when the checks end); never
in the user's output folder. The worker is a `python -m` module of trainmedic, started
without the boot module (it is trainmedic's process, not the user's), one thread, with
trainmedic importable as it is in the training process (a checkout run from its source).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from trainmedic.instrument import channel


class ScratchFolders:
    """A fresh folder per save, numbered in the order of the saves, under one root per process
    (a forked child starts its own: its saves are its own)."""

    def __init__(self, name: str, temp_prefix: str) -> None:
        self.name = name  # the root's name under the run folder's save-checks/: {name}{pid}
        self.temp_prefix = temp_prefix
        self.root: Path | None = None
        self._pid = 0
        self._made = 0

    def next(self) -> Path:
        if self.root is None or self._pid != os.getpid():
            events = channel.events_path()
            if events:
                self.root = Path(events).parent / "save-checks" / f"{self.name}{os.getpid()}"
                self.root.mkdir(parents=True, exist_ok=True)
            else:
                self.root = Path(tempfile.mkdtemp(prefix=self.temp_prefix))
            self._pid, self._made = os.getpid(), 0
        self._made += 1
        folder = self.root / f"{self._made:04d}"
        folder.mkdir()
        return folder

    def drop_temporary(self) -> None:
        """Remove a temporary root (a run folder's stays: it is the checks' evidence)."""
        if self.root is not None and self.root.name.startswith(self.temp_prefix):
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


def error_line(exc: BaseException) -> str:
    """What a worker's result says of a failure: the exception's type and its first line."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:400]


def start_worker(module: str, root: Path, env_updates: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """`python -m module root`, uninstrumented, its stderr in `root/worker.stderr`."""
    env = dict(os.environ)
    env[channel.INSTRUMENT_ENV] = "0"
    env.pop(channel.EVENTS_ENV, None)
    env.update({"OMP_NUM_THREADS": "1", **env_updates})
    here = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    with (root / "worker.stderr").open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", module, str(root)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            close_fds=True,
        )
