"""Bounded periodic samples: the supervisor's memory samples and the guard's clipping reads.

`steps.CurveLog` bounds the step curve; the same writer hands this module the other events a
run sends again and again, on the same principle: full resolution at the start, then buckets
whose width grows with the run (a power of two up to 1/`POINTS` of the run so far, so the file
grows with the logarithm of the run's length), each written as one event that keeps what the
rules read.

- Memory samples (one per process tree every 0.5-2 s): the first `HEAD` of a sampler are kept
  one by one, then buckets of `width` seconds. A bucket holds samples of one set of processes
  and one limit only, and is never extended past a sample the sampler marks as opening a new
  stretch (`OPENS`: a new phase, a new process, as `TreeSampler.densely` is told), a sample
  `JUMP` away from the bucket's mean (memory moving: a spike starts its own bucket), or an
  event that ends a stretch (an epoch, a phase, a finding, a process starting or ending, an
  attempt). It is written as one `MemorySample` at its first sample's time whose fields are the
  maxima (peak RSS, per process, cgroup charge, GPU memory: what RUN001, RUN002 and the chart
  read), with `summary` holding how many samples it stands for (`events`), its last time, and
  the means (what RUN003's training steady state reads, weighted by `events`: `mean_of`,
  `weight_of`).
- Clipping reads (`GuardObservation` check `clipping`, one per sampled read) and the
  `grad_norm_preclip` curve: the first `HEAD` reads kept, then buckets of `width` steps, within
  an epoch and one threshold. A bucket is one observation whose counters are exact sums
  (`calls`, `engaged`, `nonfinite`: TRN010's ratios), `reads` how many it stands for, the
  median of the reads' median norms and factors (`norm_median`, `factor_median`, weighted by
  `reads` in the rule), their smallest (`norm_min`) and the largest norm (`norm_max`). A read
  with a non-finite norm is never merged. A curve point is the bucket's mean at its last step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from trainmedic.events import Event, GuardObservation, LogLine, MemorySample, Metric, Step

#: Buckets per doubling of the run (memory: in seconds; clipping: in steps).
POINTS = 1000
#: The first samples (reads) of a stream, kept one by one.
HEAD = 2000
#: A memory sample this far (relative) from its bucket's mean opens a new bucket.
JUMP = 0.1
#: The marker a sampler puts in a sample's `summary`: never merged with the samples before it.
OPENS = "opens"
#: The guard observation and curve bucketed here.
CLIPPING = "clipping"
PRECLIP = "grad_norm_preclip"
#: Events that pass beside the open memory bucket; every other event closes it.
_BESIDE = (Step, MemorySample, GuardObservation, Metric, LogLine)
_MEASURES = ("rss_bytes", "cgroup_bytes", "gpu_bytes")


def _width(span: float) -> int:
    """The largest power of two up to `span / POINTS` (at least 1)."""
    return 1 << max(0, int(span // POINTS).bit_length() - 1)


@dataclass(slots=True)
class _Stream:
    first: float  # time (memory) or step (clipping) of the stream's first event
    seen: int = 0
    width: int = 1
    events: list[Any] = field(default_factory=list)  # the open bucket's events
    key: int = 0


def _max(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _merge_memory(samples: list[MemorySample]) -> MemorySample:
    if len(samples) == 1:
        return samples[0]
    first, last = samples[0], samples[-1]
    pids = first.processes.keys()
    gpus = {k for s in samples for k in s.gpu_processes}
    mean: dict[str, Any] = {k: _mean([getattr(s, k) for s in samples]) for k in _MEASURES}
    mean["processes"] = {p: _mean([s.processes.get(p) for s in samples]) for p in pids}
    return replace(
        first,
        rss_bytes=max(s.rss_bytes for s in samples),
        processes={p: max(s.processes[p] for s in samples) for p in pids},
        cgroup_bytes=_max([s.cgroup_bytes for s in samples]),
        limit_bytes=last.limit_bytes,
        gpu_bytes=_max([s.gpu_bytes for s in samples]),
        gpu_processes={g: max(s.gpu_processes.get(g, 0) for s in samples) for g in gpus},
        cpu_percent=_mean([s.cpu_percent for s in samples]),
        summary={"events": sum(weight_of(s) for s in samples), "last_t": last.t, "mean": mean},
    )


def _median(values: list[float]) -> float | None:
    ordered = sorted(v for v in values if math.isfinite(v))
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _merge_clipping(reads: list[GuardObservation]) -> GuardObservation:
    if len(reads) == 1:
        return reads[0]
    first, last = reads[0].data, reads[-1].data
    norms = [float(r.data["norm_median"]) for r in reads if r.data.get("norm_median") is not None]
    peaks = [float(r.data["norm_max"]) for r in reads if r.data.get("norm_max") is not None]
    data = dict(last)
    data.update(
        calls=sum(int(r.data.get("calls", 0)) for r in reads),
        engaged=sum(int(r.data.get("engaged", 0)) for r in reads),
        nonfinite=sum(int(r.data.get("nonfinite", 0)) for r in reads),
        first_step=first.get("first_step"),
        reads=sum(int(r.data.get("reads", 1)) for r in reads),
        norm_median=_median(norms),
        norm_min=min(norms) if norms else None,
        norm_max=max(peaks) if peaks else None,
        factor_median=_median([float(r.data.get("factor_median", 1.0)) for r in reads]),
    )
    return replace(reads[-1], data=data)


def _merge_metric(points: list[Metric]) -> Metric:
    if len(points) == 1:
        return points[0]
    return replace(points[-1], value=sum(p.value for p in points) / len(points))


class SampleLog:
    """Decides, event by event, what a writer writes of memory samples and clipping reads."""

    def __init__(self) -> None:
        self._streams: dict[tuple[Any, ...], _Stream] = {}

    def feed(self, event: Event) -> list[Event] | None:
        """The events to write now, or None for an event this log does not bucket."""
        if type(event) is MemorySample:
            return self._memory(event)
        if type(event) is GuardObservation and event.check == CLIPPING and event.step is not None:
            return self._clipping(event)
        if type(event) is Metric and event.name == PRECLIP and event.step is not None:
            return self._metric(event)
        return None

    def closes(self, event: Event) -> list[Event]:
        """Before an event that ends a stretch (an epoch, a phase, a process, an attempt): the open
        memory buckets."""
        if isinstance(event, _BESIDE):
            return []
        return [e for key in list(self._streams) if key[0] == "memory" for e in self._close(key)]

    def flush(self) -> list[Event]:
        return [e for key in list(self._streams) for e in self._close(key)]

    def _close(self, key: tuple[Any, ...]) -> list[Event]:
        stream = self._streams[key]
        events, stream.events = stream.events, []
        if not events:
            return []
        if key[0] == "memory":
            return [_merge_memory(events)]
        return [_merge_clipping(events) if key[0] == CLIPPING else _merge_metric(events)]

    def _stream(self, key: tuple[Any, ...], start: float) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream(first=start)
        stream.seen += 1
        return stream

    def _memory(self, sample: MemorySample) -> list[Event]:
        key = ("memory", sample.pid)
        stream = self._stream(key, sample.t)
        opens = sample.summary is not None and OPENS in sample.summary
        if opens:  # the marker has done its work: written as a plain sample
            sample = replace(sample, summary=None)
        if stream.seen <= HEAD:
            return [*self._close(key), sample]
        out: list[Event] = []
        bucket = stream.events
        if bucket and (opens or not _fits(bucket, sample, stream.width)):
            out = self._close(key)
        if not stream.events:
            stream.width = max(stream.width, _width(sample.t - stream.first))
        stream.events.append(sample)
        return out

    def _clipping(self, read: GuardObservation) -> list[Event]:
        key = (CLIPPING, read.pid, read.rank)
        step = int(read.step or 0)
        stream = self._stream(key, step)
        if stream.seen <= HEAD or int(read.data.get("nonfinite", 0)):
            return [*self._close(key), read]
        return self._bucket(key, stream, read, step, read.epoch, read.data.get("threshold"))

    def _metric(self, point: Metric) -> list[Event]:
        key = (PRECLIP, point.pid, point.rank)
        step = int(point.step or 0)
        stream = self._stream(key, step)
        if stream.seen <= HEAD or not math.isfinite(point.value):
            return [*self._close(key), point]
        return self._bucket(key, stream, point, step, point.epoch, None)

    def _bucket(
        self, key: tuple[Any, ...], stream: _Stream, event: Any, step: int, *same: Any
    ) -> list[Event]:
        out: list[Event] = []
        bucket = stream.events
        if bucket:
            previous = bucket[-1]
            was = (previous.epoch, previous.data.get("threshold") if key[0] == CLIPPING else None)
            if step // stream.width != stream.key or was != same or step <= int(previous.step):
                out = self._close(key)
        if not stream.events:
            stream.width = max(stream.width, _width(step - stream.first))
            stream.key = step // stream.width
        stream.events.append(event)
        return out


def _fits(bucket: list[MemorySample], sample: MemorySample, width: int) -> bool:
    """Whether `sample` may join the open bucket: the same processes and limit, within its width
    in time, and none of its measures `JUMP` away from the bucket's mean."""
    first = bucket[0]
    if sample.t - first.t >= width or sample.processes.keys() != first.processes.keys():
        return False
    if sample.limit_bytes != first.limit_bytes:
        return False
    for name in _MEASURES:
        value = getattr(sample, name)
        known = [v for v in (getattr(s, name) for s in bucket) if v is not None]
        if (value is None) != (not known):
            return False
        if value is not None:
            mean = sum(known) / len(known)
            if abs(value - mean) > JUMP * mean:
                return False
    return True


# -- read back ----------------------------------------------------------------------------------


def weight_of(event: MemorySample | GuardObservation) -> int:
    """How many samples (reads) an event stands for."""
    if isinstance(event, GuardObservation):
        return int(event.data.get("reads", 1))
    return int((event.summary or {}).get("events", 1))


def mean_of(sample: MemorySample) -> MemorySample:
    """A bucket's means as a sample (a sample itself where it stands for itself)."""
    mean = (sample.summary or {}).get("mean")
    if not mean:
        return sample

    def rounded(name: str) -> int | None:
        value = mean.get(name)
        return None if value is None else round(value)

    return replace(
        sample,
        rss_bytes=rounded("rss_bytes") or 0,
        cgroup_bytes=rounded("cgroup_bytes"),
        gpu_bytes=rounded("gpu_bytes"),
        processes={p: round(v) for p, v in mean.get("processes", {}).items() if v is not None},
    )
