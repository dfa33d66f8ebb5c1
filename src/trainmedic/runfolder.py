"""The run folder's layout: its file names, where run folders go, and how to find them.

`trainmedic run` writes one folder per run; `report`, `diagnose`, `diff`, `stop` and the
notebook extension read it back. They all take the names and the rules for creating and
finding folders from here, so the layout is spelled once (DESIGN.md):

    events.jsonl    every event, one JSON object a line (the supervisor's and the trainer's)
    output.log      the trainer's stdout and stderr
    findings.json   the diagnosis at the end
    manifest.json   the environment and the run's own facts
    report.html     the report
    supervisor.json the live supervisor's state (PIDs), so `trainmedic stop RUN_DIR` works
    stop.request    written by `trainmedic stop`, read by the supervisor

Standard library only: the supervisor, the boot path's neighbours and the CLI all read it.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from trainmedic.atomicfile import write_text_atomic

EVENTS = "events.jsonl"
OUTPUT = "output.log"
FINDINGS = "findings.json"
MANIFEST = "manifest.json"
REPORT = "report.html"
LIVE_STATE = "supervisor.json"
STOP_REQUEST = "stop.request"

RUNS_DIR_ENV = "TRAINMEDIC_RUNS_DIR"  # where run folders go without --out (e.g. a notebook kernel's)
RUN_DIR_ENV = "TRAINMEDIC_RUN_DIR"  # set by the supervisor for its trainer: the run's own folder


def runs_base() -> Path:
    """Where run folders go without `--out`: $TRAINMEDIC_RUNS_DIR, else ./runs."""
    return Path(os.environ.get(RUNS_DIR_ENV) or "runs")


def default_name(command: Sequence[str]) -> str:
    """'train' for `python train.py`, else the program's name."""
    for arg in command[1:]:
        if arg.endswith(".py"):
            return PurePath(arg).stem
    return PurePath(command[0]).stem if command else "run"


def make_run_dir(out: Path | None, name: str, base: Path = Path("runs")) -> Path:
    """`--out` as given, else <base>/<UTC timestamp>-<name>/ (suffixed if taken)."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        return out
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = base / f"{stamp}-{safe}"
    for n in range(2, 1000):
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            path = base / f"{stamp}-{safe}-{n}"
    raise FileExistsError(path)


def is_run_folder(path: Path) -> bool:
    """A folder `trainmedic run` wrote: it holds events.jsonl."""
    return path.is_dir() and (path / EVENTS).is_file()


def run_folders(base: Path) -> list[Path]:
    """The run folders directly under `base` that have a manifest, by name; none when `base`
    is not a folder. A folder without manifest.json is one whose supervisor never got going."""
    if not base.is_dir():
        return []
    return sorted(d for d in base.iterdir() if (d / MANIFEST).is_file())


def read_json(path: Path) -> dict[str, Any] | None:
    """A run folder's JSON object; None when absent, unreadable or not an object (a folder may
    be from a supervisor killed before it wrote the file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON atomically (temp file + rename): a reader never sees half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
