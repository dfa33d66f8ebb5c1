"""The every-step record behind a step curve's points: what happened between two of them.

A point of the PyTorch guard's loss curve is the mean of a window of steps, every loss of
which was counted (`Step.window`: how many, their minimum and maximum, the step of the
maximum, the non-finite ones); a point of a bucketed curve (`eventlog.steps`) carries the envelope
of the steps it merged (`Step.summary`). A spike between two points moves their mean little
but shows in their maximum: `windows` gives, for the loss curve the rules read, each point's
range of steps and extremes. Points that carry neither (old run folders, a framework's logged
values) stand for themselves: their maximum is their mean. Pure: reads a `RunRecord`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainmedic.events import Step
from trainmedic.evidence.curves import last_training, since_handover
from trainmedic.record import RunRecord


@dataclass(frozen=True, slots=True)
class Window:
    """One point of a step curve and the steps it stands for."""

    first_step: int
    last_step: int
    mean: float
    count: int  # the values averaged (losses; a bucket's step events where nothing finer is known)
    high: float  # the largest finite value of its steps (the mean where nothing finer is known)
    high_step: int  # the step of `high` (the last step where nothing finer is known)
    epoch: int | None


def windows(record: RunRecord, name: str) -> list[Window]:
    """The points of the step curve `name` of the last training, in step order, one process and
    rank (the lowest rank: every rank of a data-parallel run sees the same spike)."""
    steps = last_training([s for s in record.steps if name in s.metrics], lambda s: s.step)
    steps = since_handover(record, steps)
    if not steps:
        return []
    rank = min((s.rank for s in steps if s.rank is not None), default=None)
    pid = next(s.pid for s in steps if s.rank == rank)
    out = [_window(s, name) for s in steps if s.rank == rank and s.pid == pid]
    return sorted((w for w in out if w is not None), key=lambda w: w.last_step)


def _window(step: Step, name: str) -> Window | None:
    raw = step.metrics[name]
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    mean = float(raw)
    first, count, high, high_step = step.step, 1, mean, step.step
    window = step.window if name == "loss" else None
    summary = step.summary if step.summary is not None and "kept" not in step.summary else None
    if window is not None:
        first = int(window.get("first_step", first))
        count = int(window.get("n", count))
        high = float(window.get("max", high))
        high_step = int(window.get("max_step", high_step))
    elif summary is not None:
        first = int(summary.get("first_step", first))
        count = int(summary.get("n", {}).get(name, summary.get("events", count)))
        high = float(summary.get("max", {}).get(name, high))
    if not math.isfinite(high) or high < mean:
        high = mean
    return Window(first, step.step, mean, max(1, count), high, high_step, step.epoch)


def least_above(w: Window, threshold: float) -> int:
    """How many of a window's values were at least `threshold`, at the least, from its mean and
    maximum alone: every other value is below it, so the sum `count x mean` is at most `k x high
    + (count - k) x threshold`. A single spike leaves a mean near the rest: the bound is then 0
    or 1; a blow-up of several steps lifts the mean, and the bound counts them."""
    if w.high <= threshold or w.mean <= threshold:
        return 0
    return min(w.count, math.ceil(w.count * (w.mean - threshold) / (w.high - threshold) - 1e-9))
