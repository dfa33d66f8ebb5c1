"""RunRecord: the events of one run, grouped for rules to read.

Rules receive a `RunRecord`, never files or processes. The helpers here answer
the questions most rules ask ("how many epochs were requested, how many ran",
"what was memory in each phase") once, so every rule answers them the same way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TypeVar

from trainmedic.eventlog.steps import even_out
from trainmedic.events import (
    CellEnd,
    CellStart,
    Epoch,
    Event,
    FindingRaised,
    GuardObservation,
    LogLine,
    MemorySample,
    Metric,
    MetricSeries,
    PhaseEnd,
    PhaseStart,
    ProcessSpawn,
    RunEnd,
    RunStart,
    Step,
    TrainingPlan,
)
from trainmedic.findings import Finding
from trainmedic.logged import PRINTED

E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    """A phase as an interval of wall time in one process (end is None while open)."""

    phase: str
    pid: int
    start: float
    end: float | None
    epoch: int | None = None


@dataclass
class RunRecord:
    """All events of one run (possibly several processes, ranks and attempts), in time order."""

    events: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.events = sorted(self.events, key=lambda e: e.t)

    @classmethod
    def of(cls, events: Iterable[Event]) -> RunRecord:
        return cls(events=list(events))

    def of_type(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    # -- the run ---------------------------------------------------------------
    @property
    def start(self) -> RunStart | None:
        starts = self.of_type(RunStart)
        return starts[-1] if starts else None

    @property
    def end(self) -> RunEnd | None:
        ends = self.of_type(RunEnd)
        return ends[-1] if ends else None

    @property
    def processes(self) -> list[ProcessSpawn]:
        return self.of_type(ProcessSpawn)

    @property
    def log_lines(self) -> list[LogLine]:
        return self.of_type(LogLine)

    def last_log_lines(self, n: int = 20) -> list[str]:
        return [line.text for line in self.log_lines[-n:]]

    @property
    def guard_observations(self) -> list[GuardObservation]:
        return self.of_type(GuardObservation)

    @property
    def raised_findings(self) -> list[Finding]:
        """Findings decided in-process by guards and shipped as events."""
        return [Finding.from_dict(e.finding) for e in self.of_type(FindingRaised)]

    # -- training progress --------------------------------------------------------
    @property
    def plans(self) -> list[TrainingPlan]:
        return self.of_type(TrainingPlan)

    @property
    def epochs_requested(self) -> int | None:
        """Epochs asked for: `--expect-epochs` wins, then the last training plan seen."""
        start = self.start
        if start is not None and start.expect_epochs:
            return start.expect_epochs
        for plan in reversed(self.plans):
            if plan.epochs:
                return plan.epochs
        return None

    @cached_property
    def steps_run(self) -> int:
        """Steps the trainer ran, read from the step numbers, not counted as events (the
        PyTorch guard sends one event per window of steps, and the writer merges long runs into
        buckets). Each stretch of numbering counts up to its last step; a stretch ends where a
        step is numbered at or below the one before (a restart from scratch, a new training in
        the same process); a resume that goes on numbering goes on counting. Ranks run the same
        steps: the largest rank's count."""
        per_rank: dict[int | None, int] = {}
        last: dict[int | None, int] = {}
        for s in self.steps or self.logged_steps:
            before = last.get(s.rank)
            counted = s.step if before is None or s.step <= before else s.step - before
            per_rank[s.rank] = per_rank.get(s.rank, 0) + counted
            last[s.rank] = s.step
        return max(per_rank.values(), default=0)

    @property
    def epochs_completed(self) -> int:
        """Distinct epochs that finished (per rank, the max over ranks)."""
        per_rank: dict[int | None, set[int]] = {}
        for e in self.of_type(Epoch):
            per_rank.setdefault(e.rank, set()).add(e.epoch)
        return max((len(v) for v in per_rank.values()), default=0)

    @cached_property
    def steps(self) -> list[Step]:
        """The step events a collector measured (the guards' windows, with the steps' timing),
        not a framework's logged values (`logged_steps`); where a writer merged them into
        buckets (`eventlog.steps`), evened out to points of equal width in steps, so every part of the
        run weighs the same in a curve."""
        return even_out([s for s in self.of_type(Step) if s.logged is None])

    @cached_property
    def logged_steps(self) -> list[Step]:
        """The values a framework logged itself, a step event per log call (`Step.logged`: the
        HF Trainer's `on_log`, Lightning's `self.log`, Keras' batch logs), evened out alike."""
        return even_out([s for s in self.of_type(Step) if s.logged is not None])

    @cached_property
    def curve_steps(self) -> list[Step]:
        """The step events curves are read from: one curve per quantity, from the framework's
        log or from the measured steps, whichever has more points of it (the log on a tie).

        Both carry the same quantities under the same names where they meet (the HF Trainer
        logs `loss` at its `logging_steps`, the guard sends its window's mean `loss` every few
        steps): mixed on one curve, a step would count twice and two means over windows of
        different lengths would alternate, which reads as noise or, on a falling loss, as a
        saw-tooth. The framework's value is the one its console, its trackers and its
        `log_history` show, averaged by the framework over every micro-batch of its window;
        where it logs as often as the guard reads, or more, its curve is taken, with the measured
        points before its first log in the same process: the framework's first value is a mean
        over its first window (HF's first `logging_steps`), and the guard's first window (its
        first step) is the untrained model's level that the rules compare a curve's end with.
        Where it logs more rarely (HF's default of every 500 steps on a short run), the measured
        curve has the resolution the rules need, and is kept. Values a program printed (its
        "step 100, loss: 0.53" lines, read by the supervisor) give a curve only where no guard
        measures it."""
        measured, logged = self.steps, _unprinted(self.steps, self.logged_steps)
        if not logged:
            return measured
        counts: dict[str, list[int]] = {}
        for index, group in enumerate((measured, logged)):
            for s in group:
                for name in s.metrics:
                    counts.setdefault(name, [0, 0])[index] += 1
        from_log = {name for name, (m, g) in counts.items() if g >= m}
        first_log: dict[tuple[int, int | None, str], int] = {}  # a process's first logged step of a name
        for s in logged:
            for name in s.metrics:
                key = (s.pid, s.rank, name)
                first_log[key] = min(first_log.get(key, s.step), s.step)
        out: list[Step] = []
        for s in measured:
            kept = {
                k: v
                for k, v in s.metrics.items()
                if k not in from_log or s.step < first_log.get((s.pid, s.rank, k), s.step + 1)
            }
            if kept:
                out.append(s if len(kept) == len(s.metrics) else replace(s, metrics=kept))
        for s in logged:
            kept = {k: v for k, v in s.metrics.items() if k in from_log}
            if kept:
                out.append(s if len(kept) == len(s.metrics) else replace(s, metrics=kept))
        out.sort(key=lambda s: s.t)
        return out

    def metric_series(self, name: str) -> list[tuple[int, float]]:
        """(x, value) for a metric: per epoch when epochs carry it, else per step."""
        epochs = [(e.epoch, e.metrics[name]) for e in self.of_type(Epoch) if name in e.metrics]
        if epochs:
            return epochs
        steps = [(s.step, s.metrics[name]) for s in self.curve_steps if name in s.metrics]
        if steps:
            return steps
        metrics = [
            (m.step if m.step is not None else (m.epoch or 0), m.value)
            for m in self.of_type(Metric)
            if m.name == name
        ]
        if metrics:
            return metrics
        return [
            (x, v)
            for s in self.of_type(MetricSeries)
            if s.name == name
            for x, v in zip(s.steps, s.values, strict=False)
        ]

    def metric_names(self) -> set[str]:
        """Every metric name any event carries (epochs, steps, single metrics, log series)."""
        names: set[str] = set()
        for e in self.events:
            if isinstance(e, (Epoch, Step)):
                names.update(e.metrics)
            elif isinstance(e, (Metric, MetricSeries)):
                names.add(e.name)
        return names

    # -- memory by phase -------------------------------------------------------------
    @cached_property
    def phase_spans(self) -> list[PhaseSpan]:
        """Phase intervals, pairing each start with the next end of that phase in that process.

        A phase opened inside another without an epoch of its own (a `predict()` called by an
        epoch-end callback) belongs to the enclosing phase's epoch: an OOM kill inside it
        happened "during predict of epoch 1", not at an unknown point of training."""
        spans: list[PhaseSpan] = []
        open_: dict[tuple[int, str], tuple[PhaseStart, int | None]] = {}
        for e in self.events:
            if isinstance(e, PhaseStart):
                epoch = e.epoch
                if epoch is None:
                    enclosing = [
                        (begun.t, inherited)
                        for (pid, _), (begun, inherited) in open_.items()
                        if pid == e.pid and inherited is not None
                    ]
                    epoch = max(enclosing, key=lambda pair: pair[0])[1] if enclosing else None
                open_[(e.pid, e.phase)] = (e, epoch)
            elif isinstance(e, PhaseEnd):
                begun_epoch = open_.pop((e.pid, e.phase), None)
                if begun_epoch is not None:
                    begun, epoch = begun_epoch
                    spans.append(PhaseSpan(e.phase, e.pid, begun.t, e.t, epoch))
        spans.extend(PhaseSpan(s.phase, s.pid, s.t, None, epoch) for s, epoch in open_.values())
        return sorted(spans, key=lambda s: s.start)

    def phase_at(self, t: float) -> str | None:
        """The innermost (latest-started) phase open at time t, in any process."""
        current: PhaseSpan | None = None
        for span in self.phase_spans:
            if span.start <= t and (span.end is None or t <= span.end):
                current = span if current is None or span.start >= current.start else current
        return current.phase if current else None

    @property
    def memory_samples(self) -> list[MemorySample]:
        return self.of_type(MemorySample)

    def memory_by_phase(self, *, gpu: bool = False) -> dict[str, list[int]]:
        """RSS samples of the trainer tree (with `gpu`, its accelerator memory where sampled)
        grouped by the phase open when each was taken."""
        grouped: dict[str, list[int]] = {}
        for sample in self.memory_samples:
            value = sample.gpu_bytes if gpu else sample.rss_bytes
            if value is None:
                continue
            phase = self.phase_at(sample.t) or "unknown"
            grouped.setdefault(phase, []).append(value)
        return grouped

    @property
    def peak_rss(self) -> int | None:
        samples = self.memory_samples
        return max((s.rss_bytes for s in samples), default=None)


Rule = Callable[[RunRecord], list[Finding]]


def _unprinted(measured: Sequence[Step], logged: Sequence[Step]) -> list[Step]:
    """The logged steps less the values a program printed (`Step.logged == PRINTED`, read by
    the supervisor from its output) of a quantity that a guard measures or a framework logs: a
    printed value is a rounded copy, from another process, of what those give exactly, and two
    copies of one curve would count its steps twice."""
    printed = [s for s in logged if s.logged == PRINTED]
    if not printed:
        return list(logged)
    given = {name for s in itertools.chain(measured, logged) if s.logged != PRINTED for name in s.metrics}
    out = [s for s in logged if s.logged != PRINTED]
    for s in printed:
        kept = {k: v for k, v in s.metrics.items() if k not in given}
        if kept:
            out.append(s if len(kept) == len(s.metrics) else replace(s, metrics=kept))
    return out


def cell_running(events: Iterable[Event], until: float | None = None) -> CellStart | None:
    """The notebook cell still executing at the end of these events (or at time `until`): the
    last `CellStart` with no `CellEnd` after it in the same kernel. A kernel that dies mid-cell
    leaves exactly this behind; a finished cell never counts."""
    running: dict[int, CellStart] = {}
    for e in events:
        if until is not None and e.t > until:
            break
        if isinstance(e, CellStart):
            running[e.pid] = e
        elif isinstance(e, CellEnd):
            running.pop(e.pid, None)
    return max(running.values(), key=lambda c: c.t) if running else None


def cell_label(cell: CellStart) -> str:
    """ "cell [12] `model.fit(...)`", as the notebook numbers it."""
    number = f"[{cell.execution_count}]" if cell.execution_count is not None else "[ ]"
    return f"cell {number} `{cell.first_line}`" if cell.first_line else f"cell {number}"


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence (rules use it for robust steady states)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def weighted_median(points: Sequence[tuple[float, int]]) -> float:
    """The median of values each standing for `n` samples, as `median` of the samples would be
    (a bucket of samples the writer merged counts for all of them)."""
    ordered = sorted(points)
    total = sum(n for _, n in ordered)
    values: list[float] = []
    for wanted in sorted({(total - 1) // 2, total // 2}) if total else ():  # the middle one(s)
        seen = 0
        for value, n in ordered:
            seen += n
            if seen > wanted:
                values.append(value)
                break
    return sum(values) / len(values) if values else math.nan


def steps_per_second(steps: Sequence[Step]) -> float | None:
    """The trainer's rate, from step numbers and times between consecutive step events of one
    process: the start-up before its first event, pauses between attempts and restarted
    numbering are left out."""
    done, seconds = 0, 0.0
    for a, b in itertools.pairwise(steps):
        if a.pid == b.pid and b.step > a.step and b.t > a.t:
            done, seconds = done + b.step - a.step, seconds + b.t - a.t
    return done / seconds if seconds > 0 else None


def run_counts(record: RunRecord) -> dict[str, float | int | None]:
    """What the trainer ran, as the terminal and the report give it: its steps and epochs, its
    rate after each process's first step event (`steps_per_second`) and the start-up before
    that event (imports, data loading, compilation: no step's time). None where unmeasured."""
    lead = min((s.rank for s in record.steps if s.rank is not None), default=None)
    steps = [s for s in record.steps if s.rank in (None, lead)]
    start = record.start
    start_up = steps[0].t - start.t if steps and start is not None and steps[0].t >= start.t else None
    return {
        "steps": record.steps_run if record.steps or record.logged_steps else None,
        "first_step": steps[0].step if steps else None,
        "epochs": record.epochs_completed if record.of_type(Epoch) else None,
        "epochs_requested": record.epochs_requested,
        "steps_per_s": steps_per_second(steps),
        "start_up_s": start_up,
    }
