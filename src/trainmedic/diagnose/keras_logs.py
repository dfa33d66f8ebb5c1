"""Keras logs: `history.history` saved as JSON, and the CSVLogger callback's CSV.

Both hold one row per finished epoch, so they become `Epoch` events (0-based, as
Keras callbacks count). A history JSON exists only once `fit` has returned, so
it also records the end of the training loop (`PhaseEnd("train")`): with the
requested epochs known, KER003 can then tell a `fit` that returned early.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from trainmedic.diagnose.source import LOG_PID, LogRead, synthetic_times
from trainmedic.events import Epoch, Event, PhaseEnd


def looks_like_history(data: Any) -> bool:
    """`{"loss": [...], ...}` or a saved History object `{"history": {...}, "params": {...}}`."""
    if isinstance(data, dict) and isinstance(data.get("history"), dict):
        data = data["history"]
    return (
        isinstance(data, dict)
        and bool(data)
        and all(isinstance(v, list) for v in data.values())
        and any(isinstance(k, str) and "loss" in k for k in data)
    )


def read_history(path: Path, data: dict[str, Any]) -> LogRead:
    params = data.get("params") if isinstance(data.get("params"), dict) else {}
    history: dict[str, list[Any]] = data["history"] if isinstance(data.get("history"), dict) else data
    n = max(len(v) for v in history.values())
    read = LogRead(path=path, format="keras-history", framework="keras", finished=True)
    epochs = params.get("epochs") if params else None
    read.epochs = int(epochs) if isinstance(epochs, int) else None
    rows = [{k: _float(v[i]) for k, v in history.items() if i < len(v)} for i in range(n)]
    short = sorted(k for k, v in history.items() if len(v) < n)
    if short:
        read.skipped.append(f"metrics with fewer values than epochs: {', '.join(short)}")
    _epochs(read, rows, list(range(n)))
    return read


def read_csvlogger(path: Path) -> LogRead:
    read = LogRead(path=path, format="keras-csv", framework="keras")
    rows: list[dict[str, float]] = []
    indices: list[int] = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        for number, row in enumerate(reader, start=2):
            if None in row or any(v is None for v in row.values()) or not row.get("epoch", "").strip():
                read.skipped.append(f"line {number}: incomplete row")
                continue
            try:
                index = int(float(row["epoch"]))
            except ValueError:
                read.skipped.append(f"line {number}: epoch {row['epoch']!r} is not a number")
                continue
            indices.append(index)
            rows.append({k: _float(v) for k, v in row.items() if k != "epoch" and v != ""})
    _epochs(read, rows, indices)
    return read


def _epochs(read: LogRead, rows: list[dict[str, float]], indices: list[int]) -> None:
    times = synthetic_times(read.path, len(rows) + 1)
    events: list[Event] = [
        Epoch(epoch=index, metrics=row, t=t, pid=LOG_PID)
        for index, row, t in zip(indices, rows, times, strict=False)
    ]
    if read.finished:
        events.append(
            PhaseEnd(phase="train", epoch=indices[-1] if indices else None, t=times[-1], pid=LOG_PID)
        )
    read.events = events
    read.points = sum(len(r) for r in rows)


def _float(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
