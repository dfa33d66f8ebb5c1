"""`trainmedic diagnose wandb/offline-run-…/`: a W&B run's metric history from its own log.

The run's `run-ID.wandb` transaction log is read with the SDK's reader
(`wandb_tracker.records`); each `history` record is one row of `_step` and values. Keys
W&B keeps for itself (`_step`, `_runtime`, `_timestamp`) are not metrics; media, tables
and text are skipped; "NaN" and "Infinity" are the non-finite values they stand for.
A run resumed offline (the diagnosis `trainmedic run` attaches) has a second folder with the
same id: a run folder, its `latest-run` link or the `wandb/` folder stands for every folder
of that id, read as one run, with the findings attached to it (`attached`). A folder that W&B
names for a run but that holds no readable log is one line, exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainmedic.diagnose import attached, tracker_series
from trainmedic.diagnose.source import LogRead
from trainmedic.errors import UsageError


def is_wandb_source(path: Path) -> bool:
    """A run's `.wandb` log, a run folder (or `latest-run`, its link), or a `wandb/` folder of run folders."""
    from trainmedic.trackers import wandb_tracker

    return path.suffix == ".wandb" or wandb_tracker.looks_like_run_folder(path) or bool(_runs_in(path))


def _runs_in(path: Path) -> list[Path]:
    """The run folders of a `wandb/` folder (its `latest-run` link is one of them)."""
    from trainmedic.trackers import wandb_tracker

    if not path.is_dir():
        return []
    return sorted(d for d in path.iterdir() if not d.is_symlink() and wandb_tracker.looks_like_run_folder(d))


def run_folders(path: Path) -> list[Path]:
    """Every folder of the run at `path`, oldest first: W&B writes a second folder of the same
    run id when a run is resumed offline (as `trainmedic run` does to attach its diagnosis)."""
    from trainmedic.trackers import wandb_tracker

    if path.is_file():
        return [path.parent]
    folder = path.resolve()  # `latest-run` is a link to the newest folder
    if wandb_tracker.looks_like_run_folder(folder):
        run_id = wandb_tracker.run_id_of(folder)
        same = [d for d in _runs_in(folder.parent) if wandb_tracker.run_id_of(d) == run_id]
        return same if run_id is not None and folder in same else [folder]
    by_id: dict[str | None, list[Path]] = {}
    for d in _runs_in(folder):
        by_id.setdefault(wandb_tracker.run_id_of(d), []).append(d)
    if len(by_id) > 1:
        latest = ", ".join(d.name for d in sorted(d for ds in by_id.values() for d in ds)[-3:])
        raise UsageError(f"{path}: holds {len(by_id)} W&B runs; give one run folder (the latest: {latest})")
    return next(iter(by_id.values()), [])


def read_wandb_run(path: Path, *, with_attached: bool = True) -> LogRead:
    """The run's history from all its folders; with `with_attached`, the findings `trainmedic
    run` attached to it (the newest `files/findings.json` among them)."""
    from trainmedic.trackers import wandb_tracker

    folders = run_folders(path)
    logs = [log for log in (wandb_tracker.run_file(f) for f in folders) if log is not None]
    if not logs:
        raise UsageError(f"{path}: not a W&B run (expected one run-ID.wandb log in the folder)")
    named = path.is_file() or wandb_tracker.looks_like_run_folder(path)  # else the `wandb/` folder
    read = LogRead(path=path if named else folders[-1], format="wandb", framework="wandb")
    if len(folders) > 1:
        read.label = f"{path} [W&B run {wandb_tracker.run_id_of(folders[-1])}, {len(folders)} folders]"
    histories: dict[str, tracker_series.History] = {}
    exited = False
    for log in logs:
        for record in wandb_tracker.records(log):
            kind = record.get("type")
            if kind == "history":
                _row(record["history"], histories, wandb_tracker.number)
            elif kind == "exit":
                exited = True
    tracker_series.fill(read, histories)
    if with_attached:
        _attached(read, folders, str(path))
    if not exited:
        read.notes.append(f"{path}: the run has no exit record (still running, or killed)")
    return read


def _attached(read: LogRead, folders: list[Path], source: str) -> None:
    for folder in reversed(folders):
        where = folder / "files" / attached.FILE
        found = attached.read_file(where) if where.is_file() else None
        if found is not None:
            read.events.extend(found)
            read.notes.append(attached.note(source, found, f"{folder.name}/files/{attached.FILE}"))
            return


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
