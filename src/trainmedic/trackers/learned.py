"""Which tracker runs the trainer opened: one JSON line each in the run folder's `trackers.jsonl`.

Written from inside the trainer (the hooks in `hooks`) the moment the script opens a run,
read by the supervisor once the run has ended. One `os.write` per line on an O_APPEND file,
so several processes (ranks, restarts) can record theirs. Stdlib only: it runs in the
trainer's interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

FILE = "trackers.jsonl"
#: Set by the supervisor for its trainer (`runfolder.RUN_DIR_ENV`): the run's own folder.
RUN_DIR_ENV = "TRAINMEDIC_RUN_DIR"
MLFLOW = "mlflow"
WANDB = "wandb"


@dataclass(frozen=True, slots=True)
class TrackerRun:
    """One run of a tracker: for MLflow `location` is the tracking URI; for W&B, the run's
    local folder (where its `run-ID.wandb` lives) and `mode` online/offline."""

    tracker: str
    run_id: str
    location: str
    path: str = ""  # W&B entity/project/id
    mode: str = ""
    root: str = ""  # W&B: the `dir` given to wandb.init (the parent of `wandb/`)
    pid: int = 0


def record(run: TrackerRun) -> None:
    """Append `run` to the supervised run's folder; nothing outside `trainmedic run`."""
    folder = os.environ.get(RUN_DIR_ENV)
    if not folder:
        return
    line = json.dumps(asdict(run), sort_keys=True) + "\n"
    with contextlib.suppress(OSError):
        fd = os.open(Path(folder) / FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def read(run_dir: Path) -> list[TrackerRun]:
    """The runs recorded in `run_dir`, each once (first record wins), in the order opened."""
    seen: dict[tuple[str, str, str], TrackerRun] = {}
    try:
        lines = (run_dir / FILE).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            data = json.loads(line)
            run = TrackerRun(**{k: data[k] for k in TrackerRun.__dataclass_fields__ if k in data})
        except (ValueError, TypeError, KeyError):
            continue  # a line cut by a kill
        seen.setdefault((run.tracker, run.location, run.run_id), run)
    return list(seen.values())
