"""Chart sections of the HTML report: memory timeline, training curves, throughput.

They turn a RunRecord into `_html_charts.Chart` data (what to draw) and leave the
drawing to `_html_charts`. Times are seconds since the run started.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from trainmedic.events import Epoch, MemorySample, Metric, ProcessSpawn, Step, TrainingPlan
from trainmedic.findings import Finding
from trainmedic.record import RunRecord, median, steps_per_second
from trainmedic.report._html_charts import (
    Axis,
    Band,
    Chart,
    HLine,
    Series,
    VMarker,
    clock,
    nice_ticks,
    render_chart,
    time_ticks,
)
from trainmedic.report._html_sections import Outcome
from trainmedic.report.downsample import Point, split_finite
from trainmedic.report.html_format import (
    byte_unit,
    escape,
    fmt_bytes,
    fmt_duration,
    fmt_number,
    shown_epoch,
)
from trainmedic.units import signal_name

MAX_PROCESS_LINES = 6
MAX_METRIC_CHARTS = 12
LOG_SCALE_RATIO = 1e4  # a metric spanning more than this is drawn on a log axis (a diverging loss)
# Gradient norms with a clipping threshold: the norm after clipping sits at the threshold, flat
# at the bottom of a linear axis once the norm before clipping is 100x above it.
CLIPPED_LOG_SCALE_RATIO = 100
_PREFIXES = ("val_", "val/", "train_", "train/", "eval_", "eval/", "test_", "test/")
# The guard's norm before gradient clipping is drawn with the norm after it (`grad_norm`).
_SUFFIXES = ("_preclip",)


def time_origin(record: RunRecord) -> float:
    start = record.start
    if start is not None:
        return start.t
    return record.events[0].t if record.events else 0.0


def _process_labels(record: RunRecord) -> dict[str, str]:
    labels: dict[str, str] = {}
    roles: dict[int, str] = {}
    ranks: dict[int, int] = {}
    for spawn in record.of_type(ProcessSpawn):
        if spawn.role not in ("unknown", "python") or spawn.pid not in roles:
            roles[spawn.pid] = spawn.role
        if spawn.rank is not None:
            ranks[spawn.pid] = spawn.rank
    for pid in set(roles) | set(ranks):
        parts = [f"pid {pid}"]
        if pid in ranks:
            parts.append(f"rank {ranks[pid]}")
        if roles.get(pid) not in (None, "unknown", "python"):
            parts.append(str(roles[pid]))
        labels[str(pid)] = ", ".join(parts)
    return labels


def memory_section(record: RunRecord, findings: Sequence[Finding], result: Outcome) -> str:
    samples = record.memory_samples
    head = '<section id="memory"><h2>Memory</h2>'
    if not samples:
        return head + "<p>No memory samples were recorded.</p></section>"
    t0 = time_origin(record)
    charts = [render_chart(_host_memory_chart(record, samples, result, t0))]
    if any(s.gpu_bytes for s in samples):
        charts.append(render_chart(_gpu_memory_chart(samples, t0)))
    return head + "".join(charts) + _memory_by_phase_table(record) + "</section>"


def _host_memory_chart(
    record: RunRecord, samples: Sequence[MemorySample], result: Outcome, t0: float
) -> Chart:
    peak = max(s.rss_bytes for s in samples)
    limit = next((s.limit_bytes for s in reversed(samples) if s.limit_bytes), None)
    unit, size = byte_unit(max(peak, limit or 0))
    total = [(s.t - t0, s.rss_bytes / size) for s in samples]
    series = [Series("trainer tree (RSS)", total, tone=0)]
    cgroup = [(s.t - t0, s.cgroup_bytes / size) for s in samples if s.cgroup_bytes is not None]
    if cgroup:
        series.append(Series("cgroup usage", cgroup, tone=7, dashed=True))
    series += _per_process_series(record, samples, t0, size)
    end_t = (record.end.t if record.end else samples[-1].t) - t0
    bands = [
        Band(
            s.start - t0,
            (s.end if s.end is not None else t0 + end_t) - t0,
            s.phase,
            f"{s.phase} (pid {s.pid}" + (f", epoch {shown_epoch(s.epoch)})" if s.epoch is not None else ")"),
        )
        for s in record.phase_spans
    ]
    markers: list[VMarker] = []
    if result.killed_at is not None:
        label = "OOM kill" if result.oom else f"killed ({signal_name(result.signal or 0)})"
        markers.append(VMarker(result.killed_at - t0, label, "oom" if result.oom else "end"))
    elif result.exit_code not in (None, 0):
        markers.append(VMarker(end_t, f"exit {result.exit_code}", "end"))
    hlines = [HLine(limit / size, f"limit {fmt_bytes(limit)}")] if limit else []
    i_peak = max(range(len(total)), key=lambda i: total[i][1])
    return Chart(
        name="memory",
        title="Memory over time, by phase",
        x=Axis("time since start", clock, time_ticks),
        y=Axis(unit, lambda v: f"{v:.3g}"),
        series=series,
        bands=bands,
        markers=markers,
        hlines=hlines,
        peak=total[i_peak],
    )


def _per_process_series(
    record: RunRecord, samples: Sequence[MemorySample], t0: float, size: int
) -> list[Series]:
    peaks: dict[str, int] = {}
    for s in samples:
        for pid, rss in s.processes.items():
            peaks[pid] = max(peaks.get(pid, 0), rss)
    if len(peaks) < 2:
        return []  # one process: its line is the total
    labels = _process_labels(record)
    top = sorted(peaks, key=lambda p: -peaks[p])[:MAX_PROCESS_LINES]
    return [
        Series(
            labels.get(pid, f"pid {pid}"),
            [(s.t - t0, s.processes[pid] / size) for s in samples if pid in s.processes],
            tone=i + 1,
        )
        for i, pid in enumerate(top)
    ]


def _gpu_memory_chart(samples: Sequence[MemorySample], t0: float) -> Chart:
    peak = max(s.gpu_bytes or 0 for s in samples)
    unit, size = byte_unit(peak)
    points = [(s.t - t0, s.gpu_bytes / size) for s in samples if s.gpu_bytes is not None]
    return Chart(
        name="gpu-memory",
        title="Accelerator memory over time",
        x=Axis("time since start", clock, time_ticks),
        y=Axis(unit, lambda v: f"{v:.3g}"),
        series=[Series("accelerator memory", points, tone=3)],
        peak=max(points, key=lambda p: p[1]) if points else None,
    )


def _memory_by_phase_table(record: RunRecord) -> str:
    by_phase = record.memory_by_phase()
    if set(by_phase) <= {"unknown"}:
        return ""
    gpu = record.memory_by_phase(gpu=True)  # empty without NVML samples: no GPU columns

    def gpu_cells(phase: str) -> str:
        values = gpu.get(phase)
        if not gpu:
            return ""
        if not values:
            return "<td></td><td></td>"
        return f"<td>{fmt_bytes(median(values))}</td><td>{fmt_bytes(max(values))}</td>"

    rows = "".join(
        f"<tr><td>{escape(_phase_name(phase))}</td><td>{len(values)}</td>"
        f"<td>{fmt_bytes(median(values))}</td><td>{fmt_bytes(max(values))}</td>{gpu_cells(phase)}</tr>"
        for phase, values in sorted(by_phase.items(), key=lambda kv: -max(kv[1]))
    )
    gpu_head = "<th>median GPU</th><th>peak GPU</th>" if gpu else ""
    return (
        '<div class="scroll"><table class="by-phase"><tr><th>phase</th><th>samples</th>'
        f"<th>median RSS</th><th>peak RSS</th>{gpu_head}</tr>{rows}</table></div>"
    )


def _phase_name(phase: str) -> str:
    return "outside any phase" if phase == "unknown" else phase.replace("_", " ")


# -- training curves -----------------------------------------------------------------


def _family(name: str) -> str:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    for suffix in _SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def _clip_threshold(record: RunRecord) -> float | None:
    """The lead rank's latest gradient clipping threshold, drawn on the gradient norm chart."""
    lead = _lead_rank(record)
    clips = [o for o in record.guard_observations if o.check == "clipping" and o.rank in (None, lead)]
    threshold = clips[-1].data.get("threshold") if clips else None
    return float(threshold) if isinstance(threshold, (int, float)) and threshold > 0 else None


def _lead_rank(record: RunRecord) -> int | None:
    ranks = {s.rank for s in record.curve_steps} | {e.rank for e in record.of_type(Epoch)}
    return min((r for r in ranks if r is not None), default=None)


def _step_series(record: RunRecord) -> dict[str, list[Point]]:
    lead = _lead_rank(record)
    series: dict[str, list[Point]] = {}
    for step in record.curve_steps:  # a framework's logged values where it logs as often
        if step.rank in (None, lead):
            for name, value in step.metrics.items():
                series.setdefault(name, []).append((float(step.step), float(value)))
    for metric in record.of_type(Metric):
        if metric.step is not None and metric.rank in (None, lead):
            series.setdefault(metric.name, []).append((float(metric.step), float(metric.value)))
    return series


def _epoch_series(record: RunRecord) -> dict[str, list[Point]]:
    """Per-epoch values at x = the epoch number as recorded (see EPOCH_DISPLAY_OFFSET)."""
    lead = _lead_rank(record)
    series: dict[str, list[Point]] = {}
    for epoch in record.of_type(Epoch):
        if epoch.rank in (None, lead):
            for name, value in epoch.metrics.items():
                series.setdefault(name, []).append((float(shown_epoch(epoch.epoch)), float(value)))
    for metric in record.of_type(Metric):
        if metric.step is None and metric.epoch is not None and metric.rank in (None, lead):
            series.setdefault(metric.name, []).append((float(shown_epoch(metric.epoch)), float(metric.value)))
    return series


def curves_section(record: RunRecord, findings: Sequence[Finding]) -> str:
    charts: list[Chart] = []
    for axis, data in (("step", _step_series(record)), ("epoch", _epoch_series(record))):
        families: dict[str, list[str]] = {}
        for name in data:
            families.setdefault(_family(name), []).append(name)
        order = sorted(families, key=lambda f: (f != "loss", "loss" not in f, f))
        threshold = _clip_threshold(record) if axis == "step" else None
        charts.extend(
            _metric_chart(
                axis,
                fam,
                families[fam],
                data,
                findings,
                clip_threshold=threshold if fam == "grad_norm" else None,
            )
            for fam in order
        )
    head = '<section id="curves"><h2>Loss and metrics</h2>'
    if not charts:
        return head + "<p>No step, epoch or metric values were recorded.</p></section>"
    note = (
        f"<p class='meta'>Showing {MAX_METRIC_CHARTS} of {len(charts)} charts.</p>"
        if len(charts) > MAX_METRIC_CHARTS
        else ""
    )
    return head + note + "".join(render_chart(c) for c in charts[:MAX_METRIC_CHARTS]) + "</section>"


def _metric_chart(
    axis: str,
    family: str,
    names: list[str],
    data: dict[str, list[Point]],
    findings: Sequence[Finding],
    *,
    clip_threshold: float | None = None,
) -> Chart:
    series: list[Series] = []
    markers: list[VMarker] = []
    finite_by_name: dict[str, list[Point]] = {}
    for name in sorted(names, key=lambda n: (n != family, n)):
        finite, first_bad = split_finite(sorted(data[name]))
        finite_by_name[name] = finite
        if first_bad is not None:
            markers.append(
                VMarker(first_bad[0], f"{name} {first_bad[1]} at {axis} {int(first_bad[0])}", "nan")
            )
    values = [y for pts in finite_by_name.values() for _, y in pts]
    spread = LOG_SCALE_RATIO if clip_threshold is None else CLIPPED_LOG_SCALE_RATIO
    log = bool(values) and min(values) > 0 and max(values) / min(values) > spread
    for i, (name, finite) in enumerate(finite_by_name.items()):
        shown = [(x, math.log10(y)) for x, y in finite] if log else finite
        series.append(Series(name, shown, tone=i, dashed=i > 0))
    for f in findings:
        where = f.step if axis == "step" else f.epoch
        if where is not None:
            markers.append(VMarker(float(where), f.code, f"finding-{f.severity.value}"))
    return Chart(
        name=f"metric-{axis}-{family}",
        title=f"{family} per {axis}" + (" (log scale: it spans many orders of magnitude)" if log else ""),
        x=Axis(axis, lambda v: f"{v:g}", whole_ticks),
        y=Axis(family, (lambda v: fmt_number(10**v)) if log else fmt_number),
        series=series,
        markers=markers,
        hlines=[HLine(math.log10(clip_threshold) if log else clip_threshold, "clipping threshold")]
        if clip_threshold is not None
        else [],
        y_from_zero=False,
    )


def whole_ticks(lo: float, hi: float) -> list[float]:
    """Steps and epochs are counts: no tick at 0.5."""
    return [t for t in nice_ticks(lo, max(hi, lo + 1)) if t == int(t)]


# -- throughput ----------------------------------------------------------------------


def throughput_section(record: RunRecord) -> str:
    lead = _lead_rank(record)
    steps = [s for s in record.steps if s.rank in (None, lead)]
    head = '<section id="throughput"><h2>Throughput</h2>'
    if len(steps) < 2:
        return head + "<p>Too few step events to measure throughput.</p></section>"
    steady = _after_start_up(steps)
    timed = [s for s in steady if s.duration_s is not None]
    durations = [s.duration_s for s in timed if s.duration_s is not None]
    step_time = median(durations) if durations else median([b.t - a.t for a, b in itertools.pairwise(steps)])
    waited = [(s.duration_s, s.data_wait_s) for s in timed if s.data_wait_s is not None]
    wait_share = sum(w for _, w in waited if w) / sum(d for d, _ in waited if d) if waited else None
    rate = steps_per_second(steps)
    batch = next((p.batch_size for p in reversed(record.of_type(TrainingPlan)) if p.batch_size), None)
    stats = [
        ("median step time", fmt_duration(step_time) if step_time >= 1 else f"{step_time * 1000:.1f} ms"),
        ("steps / s", f"{rate:.4g}" if rate is not None else "-"),
        ("data-wait share", f"{wait_share:.0%}" if wait_share is not None else "not measured"),
    ]
    if batch and rate is not None:
        stats.append(("samples / s", f"{rate * batch:.4g}"))
    start = record.start
    if start is not None and steps[0].t >= start.t:
        stats.append((f"start-up, to step {steps[0].step:,}", fmt_duration(steps[0].t - start.t)))
    cells = "".join(f'<div class="stat"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for k, v in stats)
    chart = _step_time_chart(steady) if len(steady) >= 2 else None
    return head + f'<div class="stats">{cells}</div>' + (render_chart(chart) if chart else "") + "</section>"


def _after_start_up(steps: Sequence[Step]) -> list[Step]:
    """The step events but each process's first: the time of a first window holds the
    process's start-up (imports, data loading, compilation), which is not a step's time."""
    seen: set[int] = set()
    steady = []
    for s in steps:
        if s.pid in seen:
            steady.append(s)
        seen.add(s.pid)
    return steady


def _step_time_chart(steps: Sequence[Step]) -> Chart:
    timed = [s for s in steps if s.duration_s is not None]
    if timed:
        total = [(float(s.step), (s.duration_s or 0.0) * 1000) for s in timed]
        wait = [(float(s.step), s.data_wait_s * 1000) for s in timed if s.data_wait_s is not None]
    else:
        total = [(float(b.step), (b.t - a.t) * 1000) for a, b in itertools.pairwise(steps)]
        wait = []
    series = [Series("step time" if timed else "time between steps", total, tone=0)]
    if wait:
        series.append(Series("waiting for data", wait, tone=4))
    return Chart(
        name="throughput",
        title="Step time and data wait",
        x=Axis("step", lambda v: f"{v:g}"),
        y=Axis("ms", fmt_number),
        series=series,
    )
