"""Weights & Biases, both ways: a run's metric history read from its own log, and the diagnosis
put on a run after it ended.

Reading (`trainmedic diagnose wandb/offline-run-…/`): the run's `run-ID.wandb` transaction log
is read with the SDK's reader (`records`); each `history` record is one row of `_step` and
values. Keys W&B keeps for itself (`_step`, `_runtime`, `_timestamp`) are not metrics; media,
tables and text are skipped; "NaN" and "Infinity" are the non-finite values they stand for.
A run resumed offline (the diagnosis `trainmedic run` attaches) has a second folder with the
same id: a run folder, its `latest-run` link or the `wandb/` folder stands for every folder
of that id, read as one run, with the findings attached to it (`attached`). A folder that W&B
names for a run but that holds no readable log is one line, exit 2.

The SDK's own reader: `wandb-core leet inspect --json` (the binary the wandb package ships)
prints every record of a run's transaction log as one JSON line; no protobuf is parsed here.

Attaching (`trackers.attach`, after a supervised run) goes through `wandb.init` with the run's
own id, folder and mode (`resume="allow"`): offline, the SDK writes a second folder of the same
run next to the first, which `wandb sync` uploads into that run; online, it resumes the run on
its server.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainmedic.diagnose import attached, tracker_series
from trainmedic.diagnose.source import LogRead
from trainmedic.errors import UsageError, install_hint
from trainmedic.trackers.learned import TrackerRun
from trainmedic.trackers.payload import Attachment

INSTALL = f"reading W&B runs needs the wandb package: {install_hint('wandb', 'wandb')}"
READ_TIMEOUT_S = 120.0
#: What a resumed run must not add: system metrics, console capture, code and package snapshots.
_QUIET_SETTINGS = {
    "x_disable_stats": True,
    "x_disable_meta": True,
    "x_save_requirements": False,
    "console": "off",
    "save_code": False,
    "disable_git": True,
}
_RUN_FOLDER = re.compile(r"^(offline-)?run-\d{8}_\d{6}-(\w+)$")
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def is_wandb_source(path: Path) -> bool:
    """A run's `.wandb` log, a run folder (or `latest-run`, its link), or a `wandb/` folder of run folders."""
    return path.suffix == ".wandb" or looks_like_run_folder(path) or bool(_runs_in(path))


def _runs_in(path: Path) -> list[Path]:
    """The run folders of a `wandb/` folder (its `latest-run` link is one of them)."""
    if not path.is_dir():
        return []
    return sorted(d for d in path.iterdir() if not d.is_symlink() and looks_like_run_folder(d))


def run_folders(path: Path) -> list[Path]:
    """Every folder of the run at `path`, oldest first: W&B writes a second folder of the same
    run id when a run is resumed offline (as `trainmedic run` does to attach its diagnosis)."""
    if path.is_file():
        return [path.parent]
    folder = path.resolve()  # `latest-run` is a link to the newest folder
    if looks_like_run_folder(folder):
        run_id = run_id_of(folder)
        same = [d for d in _runs_in(folder.parent) if run_id_of(d) == run_id]
        return same if run_id is not None and folder in same else [folder]
    by_id: dict[str | None, list[Path]] = {}
    for d in _runs_in(folder):
        by_id.setdefault(run_id_of(d), []).append(d)
    if len(by_id) > 1:
        latest = ", ".join(d.name for d in sorted(d for ds in by_id.values() for d in ds)[-3:])
        raise UsageError(f"{path}: holds {len(by_id)} W&B runs; give one run folder (the latest: {latest})")
    return next(iter(by_id.values()), [])


def read_wandb_run(path: Path, *, with_attached: bool = True) -> LogRead:
    """The run's history from all its folders; with `with_attached`, the findings `trainmedic
    run` attached to it (the newest `files/findings.json` among them)."""
    folders = run_folders(path)
    logs = [log for log in (run_file(f) for f in folders) if log is not None]
    if not logs:
        raise UsageError(f"{path}: not a W&B run (expected one run-ID.wandb log in the folder)")
    named = path.is_file() or looks_like_run_folder(path)  # else the `wandb/` folder
    read = LogRead(path=path if named else folders[-1], format="wandb", framework="wandb")
    if len(folders) > 1:
        read.label = f"{path} [W&B run {run_id_of(folders[-1])}, {len(folders)} folders]"
    histories: dict[str, tracker_series.History] = {}
    exited = False
    for log in logs:
        for record in records(log):
            kind = record.get("type")
            if kind == "history":
                _row(record["history"], histories, number)
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


def run_file(path: Path) -> Path | None:
    """The `run-ID.wandb` log of a run folder (or the file itself); None when there is none."""
    if path.is_file():
        return path if path.suffix == ".wandb" else None
    found = sorted(path.glob("run-*.wandb"))
    return found[0] if len(found) == 1 else None


def run_id_of(folder: Path) -> str | None:
    """The run id of a run folder: from its name (`offline-run-20261205_110404-ID`), else its log's."""
    match = _RUN_FOLDER.match(folder.name)
    if match is not None:
        return match.group(2)
    log = run_file(folder)
    return log.stem.removeprefix("run-") if log is not None else None


def looks_like_run_folder(path: Path) -> bool:
    """A folder named as W&B names a run's (`offline-run-20261205_110404-ID`) or holding a `.wandb` log."""
    return path.is_dir() and (run_file(path) is not None or _RUN_FOLDER.match(path.name) is not None)


def records(log: Path) -> Iterator[dict[str, Any]]:
    """Every record of a `.wandb` log, as the SDK's reader prints it (a cut tail is left out)."""
    try:
        from wandb.util import get_core_path
    except ImportError as exc:
        raise UsageError(f"{log}: {INSTALL}") from exc
    command = [get_core_path(), "leet", "inspect", "--json", "--no-observability"]
    command += ["--run-file", str(log), str(log.parent.parent)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=READ_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise UsageError(f"{log}: the W&B reader did not finish in {READ_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"{log}: not a readable W&B run log ({reason[-1] if reason else 'no records'})")
    for line in done.stdout.splitlines():
        if line.strip():
            yield json.loads(line)


def number(value: Any) -> float | None:
    """A logged value as a float: numbers and the reader's "NaN"/"Infinity"; None for media, text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return _NON_FINITE.get(value)
    return None


def attach(run: TrackerRun, diagnosis: Attachment) -> str:
    """Resume `run` with its own id, folder and mode; add the summary keys, the files, an alert
    per finding with a step, and the run's exit code. Returns the folder the SDK wrote."""
    import wandb

    entity, project = _owner(run.path)
    resumed = wandb.init(
        id=run.run_id,
        project=project,
        entity=entity,
        dir=run.root or None,
        mode="offline" if run.mode == "offline" else "online",
        resume="allow",
        settings=wandb.Settings(**_QUIET_SETTINGS),  # type: ignore[arg-type]
    )
    try:
        resumed.summary.update(dict(diagnosis.tags))
        for path in diagnosis.files:
            resumed.save(str(path), base_path=str(path.parent), policy="now")
        for title, text in diagnosis.alerts:
            resumed.alert(title=title, text=text, level="WARN")
        where = str(resumed.settings.sync_dir)
    finally:
        resumed.finish(exit_code=diagnosis.exit_status)
    return where


def _owner(path: str) -> tuple[str | None, str | None]:
    """(entity, project) of a run path `entity/project/id` (offline runs may lack the entity)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3:
        return parts[-3] or None, parts[-2] or None
    if len(parts) == 2:
        return None, parts[0] or None
    return None, os.environ.get("WANDB_PROJECT")
