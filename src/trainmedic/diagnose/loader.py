"""Turn the paths a user gives `trainmedic diagnose` into one `RunRecord`.

Each path is sniffed (file name, JSON shape, CSV header), read by its format's
reader, and the events of every path are merged in time order (several ranks,
or a run and its restarts). A path that does not exist or is in no known format
is a usage error naming it; a file cut short is read as far as it goes and the
rest is reported as skipped.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainmedic import runfolder
from trainmedic.diagnose import hf_state, keras_logs, lightning_csv, tensorboard
from trainmedic.diagnose.source import LOG_PID, LogRead
from trainmedic.errors import UsageError
from trainmedic.events import Epoch, Event, MetricSeries, RunStart, Step, TrainingPlan
from trainmedic.record import RunRecord
from trainmedic.trackers import mlflow, wandb

KNOWN_FORMATS = (
    "a Keras history .json, a Keras CSVLogger .csv, a Lightning metrics.csv, an HF trainer_state.json, "
    "TensorBoard event files (or their folder), a W&B run folder, mlflow://RUN_ID, or a trainmedic run folder"
)
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")
_MAX_FILES_SCANNED = 20000


@dataclass(slots=True)
class Loaded:
    """The merged record, and what each path contributed."""

    record: RunRecord
    reads: list[LogRead] = field(default_factory=list)

    @property
    def skipped(self) -> list[str]:
        return [f"{r.path}: {note}" for r in self.reads for note in r.skipped]


def load(
    paths: Sequence[str | Path],
    *,
    expect_epochs: int | None = None,
    early_stopping: bool = False,
    tracking_uri: str | None = None,
) -> Loaded:
    """Read every path; `expect_epochs` states the epochs requested when the logs do not;
    `tracking_uri` is the MLflow store of `mlflow://RUN_ID` sources."""
    if not paths:
        raise UsageError("diagnose needs at least one PATH: " + KNOWN_FORMATS)
    reads = [read for raw in paths for read in _read_source(raw, tracking_uri)]
    events: list[Event] = [e for r in reads for e in r.events]
    plan = _plan(reads, expect_epochs, early_stopping, events)
    if plan is not None:
        events.append(plan)
    return Loaded(record=RunRecord.of(events), reads=reads)


def _plan(
    reads: list[LogRead], expect_epochs: int | None, early_stopping: bool, events: list[Event]
) -> TrainingPlan | None:
    """The plan `--expect-epochs` (or a Keras history's params) states; placed after the logs' own plans."""
    epochs = expect_epochs or next(
        (r.epochs for r in reads if r.epochs and r.format == "keras-history"), None
    )
    if not epochs or not reads:
        return None
    logged = [e for e in events if isinstance(e, TrainingPlan)]
    t = max((e.t for e in logged), default=min((e.t for e in events), default=0.0)) + 1e-6
    return TrainingPlan(
        framework=reads[0].framework, epochs=epochs, early_stopping=early_stopping, t=t, pid=LOG_PID
    )


def _read_source(raw: str | Path, tracking_uri: str | None) -> list[LogRead]:
    """A path, or `mlflow://RUN_ID` (checked on the raw text: a Path would fold its `//`)."""
    if isinstance(raw, str) and mlflow.is_mlflow_source(raw):
        return [mlflow.read_mlflow_run(raw, tracking_uri)]
    return read_path(Path(raw))


def read_path(path: Path) -> list[LogRead]:
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_dir():
        return _read_folder(path)
    return [_read_file(path)]


def _read_folder(path: Path) -> list[LogRead]:
    if runfolder.is_run_folder(path):
        return [_read_run_folder(path)]
    if wandb.is_wandb_source(path):
        return [wandb.read_wandb_run(path)]
    state = _latest_trainer_state(path)
    if state is not None:
        return [hf_state.read_trainer_state(state)]
    files = _files(path)
    lightning = [f for f in files if f.name == "metrics.csv"]
    if lightning:
        return [lightning_csv.read_metrics_csv(f) for f in lightning]
    for candidate in (f for f in files if f.suffix in (".json", ".csv")):
        try:
            return [_read_file(candidate)]
        except UsageError:
            continue
    if any(tensorboard.is_event_file(f) for f in files):
        return tensorboard.restart_chain(path) or [tensorboard.read_tensorboard(path)]
    raise UsageError(f"{path}: no training log found in this folder (expected {KNOWN_FORMATS})")


def _read_run_folder(path: Path) -> LogRead:
    """A trainmedic run folder (or its events.jsonl), replayed as `runfolder.replay` reads it."""
    replay = runfolder.replay(path)
    read = LogRead(
        path=replay.folder,
        format="trainmedic-run",
        framework="trainmedic",
        events=replay.events,
        skipped=replay.skipped,
        notes=[replay.note] if replay.note is not None else [],
    )
    starts = [e for e in read.events if isinstance(e, RunStart)]
    if starts and starts[-1].expect_epochs:
        read.epochs = starts[-1].expect_epochs
    read.points = sum(
        len(e.metrics)
        if isinstance(e, (Step, Epoch))
        else len(e.values)
        if isinstance(e, MetricSeries)
        else 0
        for e in read.events
    )
    return read


def _files(path: Path) -> list[Path]:
    found: list[Path] = []
    for f in sorted(path.rglob("*")):
        if f.is_file():
            found.append(f)
            if len(found) >= _MAX_FILES_SCANNED:
                break
    return found


def _latest_trainer_state(path: Path) -> Path | None:
    """`trainer_state.json` of an HF output folder, else that of its latest `checkpoint-N`."""
    if (path / "trainer_state.json").is_file():
        return path / "trainer_state.json"
    checkpoints = [
        (int(m.group(1)), d / "trainer_state.json")
        for d in path.iterdir()
        if (m := _CHECKPOINT.search(d.name)) and (d / "trainer_state.json").is_file()
    ]
    return max(checkpoints)[1] if checkpoints else None


def _read_file(path: Path) -> LogRead:
    if path.name == runfolder.EVENTS:
        return _read_run_folder(path)
    if tensorboard.is_event_file(path):
        return tensorboard.read_tensorboard(path)
    if wandb.is_wandb_source(path):
        return wandb.read_wandb_run(path)
    if path.suffix.lower() == ".json":
        return _read_json(path)
    if path.suffix.lower() == ".csv":
        return _read_csv(path)
    raise UsageError(f"{path}: not a log format trainmedic reads (expected {KNOWN_FORMATS})")


def _read_json(path: Path) -> LogRead:
    raw = path.read_bytes()
    try:
        data = hf_state.parse_json(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        text = raw.decode("utf-8", errors="replace")
        if not isinstance(exc, json.JSONDecodeError):
            raise UsageError(f"{path}: not UTF-8 JSON ({exc.reason})") from exc
        if '"log_history"' in text:
            return hf_state.read_trainer_state(path)  # salvages the complete entries of a cut file
        if exc.pos >= len(text.rstrip()) - 1:
            raise UsageError(
                f"{path}: the JSON ends early (cut at byte {exc.pos}); nothing readable"
            ) from exc
        raise UsageError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from exc
    if hf_state.looks_like_trainer_state(data):
        return hf_state.read_trainer_state(path, data)
    if keras_logs.looks_like_history(data):
        return keras_logs.read_history(path, data)
    if isinstance(data, dict) and "packages" in data and "python" in data:
        raise UsageError(
            f"{path}: is a trainmedic manifest, not a training log (compare two with `trainmedic diff`)"
        )
    raise UsageError(f"{path}: JSON in no known log shape (expected {KNOWN_FORMATS})")


def _read_csv(path: Path) -> LogRead:
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        header = next(csv.reader(handle), [])
    if lightning_csv.looks_like_lightning(header):
        return lightning_csv.read_metrics_csv(path)
    if "epoch" in header:
        return keras_logs.read_csvlogger(path)
    raise UsageError(
        f"{path}: CSV without the epoch/step columns of a Keras CSVLogger or Lightning metrics.csv"
    )
