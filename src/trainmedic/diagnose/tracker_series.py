"""Metric histories of an experiment tracker as the events every rule reads.

MLflow and W&B keep each metric as a list of (step, value, wall time): the same
shape as a TensorBoard tag, so they become the same `MetricSeries` events
(`per="step"`), and a run diagnosed from its tracker is judged exactly as the
same curve written to TensorBoard. Where the run also logged an `epoch` metric
(Lightning's loggers do), each step is mapped to the epoch logged at it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from trainmedic.diagnose.source import LOG_PID, LogRead
from trainmedic.events import Event, MetricSeries

EPOCH_METRIC = "epoch"


@dataclass(slots=True)
class History:
    """One metric's points, in the order the tracker returned them."""

    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)

    def add(self, step: int, value: float, wall: float) -> None:
        self.steps.append(step)
        self.values.append(value)
        self.walls.append(wall)


def fill(read: LogRead, histories: dict[str, History]) -> None:
    """Set `read.events` and `read.points` from the histories (empty ones are dropped)."""
    import numpy as np

    epoch_map = histories.get(EPOCH_METRIC)
    events: list[Event] = []
    for name, h in sorted(histories.items()):
        if not h.values:
            continue
        order = np.argsort(np.asarray(h.steps, dtype=np.int64), kind="stable")
        steps = np.asarray(h.steps, dtype=np.int64)[order]
        values = np.asarray(h.values, dtype=np.float64)[order]
        walls = np.asarray(h.walls, dtype=np.float64)[order]
        epochs = None
        if epoch_map is not None and epoch_map.values and name != EPOCH_METRIC:
            epochs = cast(Sequence[float], _epochs_of(steps, epoch_map))
        events.append(
            MetricSeries(
                name=name,
                steps=cast(Sequence[int], steps),
                values=cast(Sequence[float], values),
                epochs=epochs,
                times=cast(Sequence[float], walls),
                per="step",
                source=read.name,
                t=float(walls.max()),
                pid=LOG_PID,
            )
        )
    read.events = events
    read.points = sum(len(h.values) for h in histories.values())


def _epochs_of(steps: object, epoch_map: History) -> object:
    """The epoch logged at or before each step (floor: Lightning logs it as a float)."""
    import numpy as np

    e_steps = np.asarray(epoch_map.steps, dtype=np.int64)
    e_values = np.asarray(epoch_map.values, dtype=np.float64)
    order = np.argsort(e_steps, kind="stable")
    e_steps, e_values = e_steps[order], e_values[order]
    at = np.clip(np.searchsorted(e_steps, np.asarray(steps), side="right") - 1, 0, len(e_steps) - 1)
    return np.floor(e_values[at])
