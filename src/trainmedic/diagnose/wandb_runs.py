"""`trainmedic diagnose wandb/offline-run-…/`: a W&B run's metric history from its own log.

The run's `run-ID.wandb` transaction log is read with the SDK's reader
(`wandb_tracker.records`); each `history` record is one row of `_step` and values. Keys
W&B keeps for itself (`_step`, `_runtime`, `_timestamp`) are not metrics; media, tables
and text are skipped; "NaN" and "Infinity" are the non-finite values they stand for.
A folder that W&B names for a run but that holds no readable log is one line, exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainmedic.diagnose import tracker_series
from trainmedic.diagnose.source import LogRead
from trainmedic.errors import UsageError


def is_wandb_source(path: Path) -> bool:
    """A run's `.wandb` log, a run folder, or a `wandb/` folder of run folders."""
    from trainmedic.trackers import wandb_tracker

    return path.suffix == ".wandb" or wandb_tracker.looks_like_run_folder(path) or bool(_runs_in(path))


def _runs_in(path: Path) -> list[Path]:
    from trainmedic.trackers import wandb_tracker

    if not path.is_dir():
        return []
    return sorted(d for d in path.iterdir() if not d.is_symlink() and wandb_tracker.looks_like_run_folder(d))


def read_wandb_run(path: Path) -> LogRead:
    from trainmedic.trackers import wandb_tracker

    runs = [] if wandb_tracker.looks_like_run_folder(path) or path.is_file() else _runs_in(path)
    if len(runs) > 1:
        names = ", ".join(d.name for d in runs[-3:])
        raise UsageError(f"{path}: holds {len(runs)} W&B runs; give one run folder (the latest: {names})")
    if runs:
        path = runs[0]
    log = wandb_tracker.run_file(path)
    if log is None:
        raise UsageError(f"{path}: not a W&B run (expected one run-ID.wandb log in the folder)")
    read = LogRead(path=path, format="wandb", framework="wandb")
    histories: dict[str, tracker_series.History] = {}
    exited = False
    for record in wandb_tracker.records(log):
        kind = record.get("type")
        if kind == "history":
            _row(record["history"], histories, wandb_tracker.number)
        elif kind == "exit":
            exited = True
    tracker_series.fill(read, histories)
    if not exited:
        read.notes.append(f"{path}: the run has no exit record (still running, or killed)")
    return read


def _row(history: dict[str, Any], out: dict[str, tracker_series.History], number: Any) -> None:
    item = history.get("item", {})
    step = history.get("step", {}).get("num", item.get("_step", 0))
    wall = number(item.get("_timestamp")) or 0.0
    for key, value in item.items():
        if key.startswith("_"):
            continue
        x = number(value)
        if x is not None:
            out.setdefault(key, tracker_series.History()).add(int(step or 0), x, wall)
