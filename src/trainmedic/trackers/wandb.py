"""Weights & Biases: read a run's `.wandb` log, and put the diagnosis on a run after it ended.

Reading goes through the SDK's own reader: `wandb-core leet inspect --json` (the binary the
wandb package ships) prints every record of a run's transaction log as one JSON line; no
protobuf is parsed here. Writing goes through `wandb.init` with the run's own id, folder and
mode (`resume="allow"`): offline, the SDK writes a second folder of the same run next to the
first, which `wandb sync` uploads into that run; online, it resumes the run on its server.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainmedic.errors import UsageError, install_hint
from trainmedic.trackers.learned import TrackerRun

if TYPE_CHECKING:
    from trainmedic.trackers.attach import Attachment

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
