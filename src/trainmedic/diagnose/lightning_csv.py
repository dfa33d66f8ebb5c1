"""Lightning's CSVLogger `metrics.csv`: one row per logging call, columns per metric.

Lightning writes step-level values (`train_loss_step`, every `log_every_n_steps`)
and epoch-level values (`val_loss`, `train_loss_epoch`) into the same table,
leaving the other cells empty. A column that never has two values in one epoch
is epoch-level and goes into `Epoch` events; the others become step series.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from trainmedic.diagnose.source import LOG_PID, LogRead, synthetic_times
from trainmedic.events import Epoch, Event, MetricSeries

_INDEX = ("epoch", "step")


def looks_like_lightning(header: list[str]) -> bool:
    return "step" in header and "epoch" in header


def read_metrics_csv(path: Path) -> LogRead:
    read = LogRead(path=path, format="lightning-csv", framework="lightning")
    rows: list[tuple[int, int, dict[str, float]]] = []
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        width = len(header)
        for number, cells in enumerate(reader, start=2):
            if len(cells) != width:
                read.skipped.append(f"line {number}: {len(cells)} cells where the header has {width}")
                continue
            row = dict(zip(header, cells, strict=True))
            try:
                epoch, step = int(float(row["epoch"])), int(float(row["step"]))
            except ValueError:
                read.skipped.append(f"line {number}: epoch/step not numbers")
                continue
            values = {k: _float(v) for k, v in row.items() if k not in _INDEX and v != ""}
            rows.append((epoch, step, values))
    metrics = [h for h in header if h not in _INDEX]
    per_epoch = {m for m in metrics if _at_most_once_per_epoch(rows, m)}
    times = synthetic_times(path, len(rows) + 1)
    events: list[Event] = []
    epochs: dict[int, dict[str, float]] = {}
    for epoch, _, values in rows:
        target = epochs.setdefault(epoch, {})
        target.update({k: v for k, v in values.items() if k in per_epoch})
    if per_epoch:  # an epoch with step values only may not have finished
        epochs = {e: m for e, m in epochs.items() if m}
    for i, (epoch, metrics_of) in enumerate(sorted(epochs.items())):
        events.append(Epoch(epoch=epoch, metrics=metrics_of, t=times[min(i, len(times) - 1)], pid=LOG_PID))
    for name in metrics:
        if name in per_epoch:
            continue
        points = [(step, epoch, values[name]) for epoch, step, values in rows if name in values]
        events.append(
            MetricSeries(
                name=name,
                steps=[p[0] for p in points],
                values=[p[2] for p in points],
                epochs=[float(p[1]) for p in points],
                source=str(path),
                t=times[-1],
                pid=LOG_PID,
            )
        )
    read.events = events
    read.points = sum(len(v) for _, _, v in rows)
    return read


def _at_most_once_per_epoch(rows: list[tuple[int, int, dict[str, float]]], name: str) -> bool:
    seen: set[int] = set()
    for epoch, _, values in rows:
        if name in values:
            if epoch in seen:
                return False
            seen.add(epoch)
    return bool(seen)


def _float(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return math.nan
