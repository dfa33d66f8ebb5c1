"""A bounded step curve: what `EventWriter` writes of the step events, and how it is read back.

A fast loop sends hundreds of `Step` events a second (the PyTorch guard one per 10 steps at
thousands of steps a second): written one a line, an hour is hundreds of megabytes and a week
a disk. The curve does not need them: the rules reduce a long curve to `curves.MAX_POINTS`
bucket medians before they look at it, and a chart has a few hundred pixels. So the writer
merges plain steps into buckets, and keeps everything else as it is:

- Buckets are ranges of steps, `[k * width, (k + 1) * width)`, `width` the largest power of two
  up to 1/`POINTS` of the steps run so far. The first `2 * POINTS` steps are kept one by one,
  then every doubling of the run adds about `POINTS` buckets: a run's last half has between
  `POINTS / 2` and `POINTS` points, and the file grows with the logarithm of the run's length.
  Ranks count the same steps, so their buckets end on the same step and the curve's mean over
  ranks still pairs them.
- A bucket is written as one `Step` at its last step: `metrics` holds the mean of each metric
  (what the rules read, as they read the guard's window means), `summary` its first step, how
  many step events it stands for (`events`), each metric's minimum and maximum (the envelope),
  and its count where that differs (a metric some steps did not carry, or not finite); a
  guard's loss window (`Step.window`: every loss of its steps counted) widens the loss's
  envelope to its own minimum and maximum, so a spike between two points is kept. A bucket
  of one event is written as that event. A bucket is written as soon as its range's last step
  arrives (so at full resolution each step is written as it comes), else at the next step past it.
- Memory samples, the guard's clipping reads and its `grad_norm_preclip` curve are bucketed
  on the same principle by `samples` (what their rules read is kept). Every other event
  that is not a plain step (epochs, phases, observations, findings, markers) is
  written as it comes; epochs, phases and findings after the buckets open before them
  (`BOUNDARIES`). So is every step that is an anomaly:
  the first non-finite value of a metric, or a value `SPIKE_FACTOR` times the largest of the
  recent ones, at its exact step, marked `summary={"kept": why}`.
- A framework's logged values (`Step.logged`: the HF Trainer's `on_log`, Lightning's and
  Keras' batch logs) are streams of their own beside the guard's steps of the same process,
  bucketed the same way: a long run logging every step stays as bounded as the guard's curve.
- A step numbered at or below the previous one starts afresh (a new training in a notebook, a
  resume that replays), and a bucket open for `MAX_OPEN_S` is written at its next step, so the
  live status stays current; what is open when the process ends is written at exit.

Read back (`even_out`), a stream's points are merged into groups of equal width in steps, as
wide as its widest bucket, so a curve's first tenth is again the run's first tenth: rules that
compare the start of a curve with its end see the same run as on the full curve. The first
`HEAD` steps (the untrained model's level) and the anomalies are never merged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from trainmedic.eventlog.samples import SampleLog
from trainmedic.events import Epoch, Event, FindingRaised, PhaseEnd, PhaseStart, RunEnd, Step, TrainingPlan

#: Buckets per doubling of the run's length in steps (2x what the rules reduce a curve to).
POINTS = 4000
#: A bucket open this many seconds is written at its next step.
MAX_OPEN_S = 60.0
#: A value this many times the largest magnitude of its metric's recent values is an anomaly.
SPIKE_FACTOR = 10.0
#: "Recent": the last bucket period of at least this many values (and the current one).
RECENT_MIN = 32
#: Read back, the first steps of a stream are never merged: the untrained model's level.
HEAD = 5
#: The events that end a stretch of training: the open buckets are written before them, so the
#: curve up to an epoch's end or a guard's finding is in the file when they are. Other events
#: (observations, memory samples, log lines) are written as they come, beside the open bucket.
BOUNDARIES = (Epoch, PhaseStart, PhaseEnd, FindingRaised, TrainingPlan, RunEnd)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _plain_values(event: Event) -> dict[str, float] | None:
    """A plain step's metrics as floats; None for anything the writer must not merge (another
    event, a summary or kept anomaly, a metric that is not a number)."""
    if type(event) is not Step or event.summary is not None:
        return None
    metrics = event.metrics
    if all(type(v) is float for v in metrics.values()):
        return metrics
    values: dict[str, float] = {}
    for name, value in metrics.items():
        number = value if type(value) is float else _number(value)
        if number is None:
            return None
        values[name] = number
    return values


@dataclass(slots=True)
class _Stats:
    """One metric over a bucket: its finite values' count, sum and range, and the others."""

    n: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    nonfinite: int = 0
    last_bad: float = math.nan

    def add(self, value: float) -> None:
        """One value (the writer's hot path: a few comparisons)."""
        if value - value == 0.0:  # finite (NaN and Inf give NaN)
            self.n += 1
            self.total += value
            self.low = min(self.low, value)
            self.high = max(self.high, value)
        else:
            self.nonfinite += 1
            self.last_bad = value

    def merge(self, mean: float, n: int, low: float, high: float, nonfinite: int) -> None:
        """A point that stands for `n` finite values (read back)."""
        self.nonfinite += nonfinite
        if not math.isfinite(mean) or n <= 0:
            self.last_bad = mean if not math.isfinite(mean) else self.last_bad
            return
        self.n += n
        self.total += mean * n
        self.low, self.high = min(self.low, low), max(self.high, high)

    def mean(self) -> float:
        return self.total / self.n if self.n else self.last_bad


def _fold_window(metrics: dict[str, _Stats], window: dict[str, Any]) -> None:
    """A guard's loss window (`Step.window`): its every-step range widens the bucket's envelope
    of the loss, so a spike between two points survives the merge."""
    stats = metrics.get("loss")
    low, high = _number(window.get("min")), _number(window.get("max"))
    if stats is None or low is None or high is None:
        return
    stats.low, stats.high = min(stats.low, low), max(stats.high, high)


@dataclass(slots=True)
class _Bucket:
    """Step events merged into one point."""

    template: Step
    first_step: int
    first_t: float
    key: int = 0
    events: list[Step] = field(default_factory=list)
    metrics: dict[str, _Stats] = field(default_factory=dict)
    count: int = 0
    duration: _Stats = field(default_factory=_Stats)
    data_wait: _Stats = field(default_factory=_Stats)

    def add(self, step: Step, values: dict[str, float]) -> None:
        """A plain step, its metrics as floats (the writer)."""
        self.count += 1
        self.template = step
        if len(self.events) < 2:  # a bucket of one is written as that event
            self.events.append(step)
        metrics = self.metrics
        for name, value in values.items():
            stats = metrics.get(name)
            if stats is None:
                stats = metrics[name] = _Stats()
            stats.add(value)
        if step.window is not None:
            _fold_window(metrics, step.window)
        if step.duration_s is not None:
            self.duration.add(step.duration_s)
        if step.data_wait_s is not None:
            self.data_wait.add(step.data_wait_s)

    def add_point(self, step: Step) -> None:
        """A step or a bucket's point, weighted by how many steps it stands for (read back)."""
        summary = step.summary if step.summary is not None and "kept" not in step.summary else {}
        counts, lows, highs = summary.get("n", {}), summary.get("min", {}), summary.get("max", {})
        bad = summary.get("nonfinite", {})
        events = int(summary.get("events", 1))
        self.count += events
        self.template = step
        if len(self.events) < 2:
            self.events.append(step)
        for name, raw in step.metrics.items():
            value = float(raw)
            low, high = float(lows.get(name, value)), float(highs.get(name, value))
            stats = self.metrics.setdefault(name, _Stats())
            stats.merge(value, int(counts.get(name, events)), low, high, int(bad.get(name, 0)))
        if step.window is not None:
            _fold_window(self.metrics, step.window)
        for stats, timing in ((self.duration, step.duration_s), (self.data_wait, step.data_wait_s)):
            if timing is not None:
                stats.merge(timing, events, timing, timing, 0)

    def point(self) -> Step:
        """The bucket as one `Step` (the event itself when it holds one)."""
        if len(self.events) == 1:
            return self.events[0]
        last = self.template
        summary: dict[str, Any] = {
            "first_step": self.first_step,
            "events": self.count,
            "min": {k: s.low for k, s in self.metrics.items() if s.n},
            "max": {k: s.high for k, s in self.metrics.items() if s.n},
        }
        counts = {k: s.n for k, s in self.metrics.items() if s.n != self.count}
        if counts:  # a metric some of the steps did not carry, or not as a finite value
            summary["n"] = counts
        bad = {k: s.nonfinite for k, s in self.metrics.items() if s.nonfinite}
        if bad:
            summary["nonfinite"] = bad
        return Step(
            t=last.t,
            pid=last.pid,
            rank=last.rank,
            node=last.node,
            step=last.step,
            epoch=last.epoch,
            metrics={k: s.mean() for k, s in self.metrics.items()},
            duration_s=self.duration.mean() if self.duration.n else None,
            data_wait_s=self.data_wait.mean() if self.data_wait.n else None,
            summary=summary,
            logged=last.logged,
        )


@dataclass(slots=True)
class _Stream:
    """The steps of one process and rank, since its training (re)started."""

    first: int
    last: int
    width: int = 1
    bucket: _Bucket | None = None
    recent: dict[str, float] = field(default_factory=dict)  # largest |value| of the last period
    current: dict[str, float] = field(default_factory=dict)  # ... of the period going on
    period_values: int = 0
    bad: set[str] = field(default_factory=set)  # the metrics whose last value was not finite

    def observe(self, values: dict[str, float]) -> str | None:
        """Note the step's values; why it is kept apart, if it is: a metric turned non-finite,
        or jumped past `SPIKE_FACTOR` times the largest magnitude of its recent values."""
        self.period_values += 1
        recent, current, bad = self.recent, self.current, self.bad
        why = None
        for name, value in values.items():
            if value - value == 0.0:  # finite (NaN and Inf give NaN)
                magnitude = abs(value)
                now = current.get(name, 0.0)
                scale = max(recent.get(name, 0.0), now)
                if scale > 0 and magnitude > SPIKE_FACTOR * scale:
                    why = why or "spike"
                if magnitude > now:
                    current[name] = magnitude
                if bad:
                    bad.discard(name)
            elif name not in bad:
                bad.add(name)
                why = "nonfinite"
        return why


class CurveLog:
    """Decides, event by event, what a writer writes (see the module's docstring). Not thread
    safe: `EventWriter` calls it under its lock."""

    def __init__(self, points: int = POINTS, max_open_s: float = MAX_OPEN_S) -> None:
        self.points = points
        self.max_open_s = max_open_s
        self._streams: dict[tuple[int, int | None, str | None], _Stream] = {}
        self._samples = SampleLog()
        self._ended = False

    def feed(self, event: Event) -> list[Event]:
        """The events to write now, in order (none while `event` joins an open bucket)."""
        values = _plain_values(event) if not self._ended else None
        if values is None:
            sampled = self._samples.feed(event) if not self._ended else None
            if sampled is not None:  # a memory sample, a clipping read: `samples` buckets them
                return sampled
            if isinstance(event, BOUNDARIES):
                return [*self.flush(), event]
            return [*self._samples.closes(event), event]
        step: Step = event  # type: ignore[assignment]  # _plain_values said so
        key = (step.pid, step.rank, step.logged)
        stream = self._streams.get(key)
        if stream is None or step.step <= stream.last:
            out = self._close(stream) if stream is not None else []
            if stream is None or step.step <= stream.first:  # a new training: full resolution again
                stream = self._streams[key] = _Stream(first=step.step, last=step.step)
            stream.last = step.step
            stream.observe(values)
            return [*out, step]
        stream.last = step.step
        why = stream.observe(values)
        if why is not None:  # a copy: the caller's other sinks keep the event as sent
            return [*self._close(stream), replace(step, summary={"kept": why})]
        return self._add(stream, step, values)

    def flush(self, *, end: bool = False) -> list[Event]:
        """Every open bucket, as points (before an event that is not a step). With `end` (the
        process is ending), what comes later is written as it comes: atexit handlers that run
        after the writer's still send their last steps."""
        self._ended = self._ended or end
        out: list[Event] = self._samples.flush()
        for stream in self._streams.values():
            out.extend(self._close(stream))
        return out

    def _add(self, stream: _Stream, step: Step, values: dict[str, float]) -> list[Event]:
        out: list[Event] = []
        bucket = stream.bucket
        if bucket is not None and (
            step.step // stream.width != bucket.key
            or step.epoch != bucket.template.epoch
            or step.t - bucket.first_t >= self.max_open_s
        ):
            out = self._close(stream)
            bucket = None
        if bucket is None:
            span = step.step - stream.first
            stream.width = max(stream.width, 1 << max(0, (span // self.points).bit_length() - 1))
            bucket = stream.bucket = _Bucket(template=step, first_step=step.step, first_t=step.t)
            bucket.key = step.step // stream.width
        bucket.add(step, values)
        if step.step == (bucket.key + 1) * stream.width - 1:  # its last step: nothing can join it
            out.extend(self._close(stream))
        return out

    def _close(self, stream: _Stream) -> list[Event]:
        bucket, stream.bucket = stream.bucket, None
        if stream.period_values >= RECENT_MIN:
            stream.recent, stream.current, stream.period_values = stream.current, {}, 0
        return [bucket.point()] if bucket is not None else []


# -- read back ----------------------------------------------------------------------------------


def even_out(steps: list[Step], points: int = POINTS) -> list[Step]:
    """The step events with each bucketed stream merged into groups of equal width in steps.

    Streams (a process, rank and log, split where the steps go back) without a summary are left as
    they are: a short run, or events kept in memory, read exactly as written.
    """
    if not any(s.summary is not None and "kept" not in s.summary for s in steps):
        return steps
    streams: dict[tuple[int, int | None, str | None], list[list[Step]]] = {}
    for s in steps:
        segments = streams.setdefault((s.pid, s.rank, s.logged), [[]])
        if segments[-1] and s.step <= segments[-1][-1].step:
            segments.append([])
        segments[-1].append(s)
    out: list[Step] = []
    for segments in streams.values():
        for segment in segments:
            out.extend(_even_segment(segment, points))
    out.sort(key=lambda s: s.t)
    return out


def _even_segment(segment: list[Step], points: int) -> list[Step]:
    if not any(s.summary is not None and "kept" not in s.summary for s in segment):
        return segment
    start = _first_step(segment[0])
    span = segment[-1].step - start
    width = 1 << max(0, math.ceil(math.log2(max(1.0, span / points))))
    widest = max(s.step - _first_step(s) + 1 for s in segment)
    while width < widest:  # no bucket is cut in two
        width *= 2
    out: list[Step] = list(segment[:HEAD])
    group: _Bucket | None = None
    for s in segment[HEAD:]:
        if _kept_apart(s):
            if group is not None:
                out.append(group.point())
                group = None
            out.append(s)
            continue
        key = s.step // width
        if group is not None and (key != group.key or s.epoch != group.template.epoch):
            out.append(group.point())
            group = None
        if group is None:
            group = _Bucket(template=s, first_step=_first_step(s), first_t=s.t, key=key)
        group.add_point(s)
    if group is not None:
        out.append(group.point())
    return out


def _kept_apart(step: Step) -> bool:
    """An anomaly the writer kept, or a point whose mean is not finite: never merged."""
    if step.summary is not None and "kept" in step.summary:
        return True
    return any(not math.isfinite(v) for v in (_number(x) for x in step.metrics.values()) if v is not None)


def _first_step(step: Step) -> int:
    summary = step.summary or {}
    return int(summary.get("first_step", step.step))
