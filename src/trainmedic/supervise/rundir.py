"""The supervisor's part of a run folder: the run's facts in its manifest, and the registry
of live runs that `trainmedic ps` and `stop` read.

The folder's layout (file names, where folders go) is `trainmedic.runfolder`'s.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainmedic import __version__, _osinfo
from trainmedic._osinfo import hostname
from trainmedic.runfolder import read_json, write_json

STATE_DIR_ENV = "TRAINMEDIC_STATE_DIR"


def build_manifest(
    *,
    command: Sequence[str],
    cwd: str,
    name: str,
    started: float,
    ended: float | None = None,
    exit_code: int | None = None,
    signal: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """THE place the run's own facts are put in the manifest. The supervisor lays them over the
    environment capture (`envinfo.capture_manifest`), whose fields stay at the top level so
    `trainmedic diff` and `trainmedic env` read one shape."""
    manifest: dict[str, Any] = {
        "trainmedic": __version__,
        "name": name,
        "command": list(command),
        "cwd": cwd,
        "start": _iso(started),
        "end": _iso(ended) if ended is not None else None,
        "duration_s": round(ended - started, 3) if ended is not None else None,
        "exit_code": exit_code,
        "signal": signal,
        "host": {
            "hostname": hostname(),
            "system": _osinfo.uname()[0],
            "release": _osinfo.uname()[1],
            "machine": _osinfo.uname()[2],
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
        },
    }
    manifest.update(extra or {})
    return manifest


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


# -- the registry of live runs ---------------------------------------------------------------
def state_dir() -> Path:
    """Where live runs register: $TRAINMEDIC_STATE_DIR, else a per-user runtime folder."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "trainmedic" if runtime else Path.home() / ".cache" / "trainmedic" / "live"


def register(supervisor_pid: int, run_dir: Path) -> Path:
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / f"{supervisor_pid}.json"
    write_json(entry, {"run_dir": str(run_dir.resolve()), "supervisor_pid": supervisor_pid})
    return entry


def registered() -> Iterator[tuple[Path, Path]]:
    """(registry entry, run folder) of every registered run, live or stale."""
    folder = state_dir()
    if not folder.is_dir():
        return
    for entry in sorted(folder.glob("*.json")):
        data = read_json(entry)
        if data and "run_dir" in data:
            yield entry, Path(str(data["run_dir"]))


def unregister(entry: Path) -> None:
    with contextlib.suppress(OSError):
        entry.unlink()
