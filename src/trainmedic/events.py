"""Events: the single currency between collectors and rules.

Every collector (supervisor, in-process hooks, log readers) turns what it sees
into these small typed records; rules read nothing else. Epochs in events are
0-based indices, as framework callbacks count (a log line "Epoch 3/12" becomes
epoch 2); findings show them 1-based (`findings.epoch_number`). Each event is one JSON
line (`encode`, `decode`); `trainmedic.eventlog` writes them to a run's file as they
happen and reads them back.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Literal

Phase = Literal["train", "eval", "epoch_end", "checkpoint", "predict", "idle"]
PHASES: tuple[str, ...] = ("train", "eval", "epoch_end", "checkpoint", "predict", "idle")


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class Event:
    """Fields every event has: wall time, process, distributed rank and node.

    Event types are dataclasses with `eq=False, repr=False`: they share the __eq__ and
    __repr__ defined here once, instead of dataclass() compiling both for each of the
    event types at import, in every supervised process (start-up each process pays).
    """

    kind: ClassVar[str] = "event"
    t: float = field(default_factory=time.time)
    pid: int = field(default_factory=os.getpid)
    rank: int | None = None
    node: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields by name, and the kind. Shallow: the JSON encoder walks the containers
        itself; `dataclasses.asdict` deep-copies every list and dict first (for every event,
        a line of output being one)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("summary", "logged", "window"):  # optional: bucketed, framework-logged, windowed
            if data.get(key, 0) is None:
                del data[key]
        data["kind"] = self.kind
        return data

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self))

    __hash__ = None  # type: ignore[assignment]  # mutable records, as dataclass(eq=True) makes them

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"{type(self).__name__}({inner})"


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class RunStart(Event):
    """The supervisor started (or restarted) the command."""

    kind: ClassVar[str] = "run_start"
    command: list[str]
    cwd: str = ""
    name: str = ""
    expect_epochs: int | None = None
    attempt: int = 0


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class RunEnd(Event):
    """How the supervised command ended: `exit_code` as the shell sees it, `signal` if killed."""

    kind: ClassVar[str] = "run_end"
    exit_code: int
    signal: int | None = None
    duration_s: float = 0.0
    attempt: int = 0


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class ProcessSpawn(Event):
    """A process of the supervised tree, as seen by the supervisor or announced by itself."""

    kind: ClassVar[str] = "process_spawn"
    ppid: int | None = None
    cmdline: list[str] = field(default_factory=list)
    role: str = "unknown"  # launcher | trainer | worker | unknown
    source: str = "supervisor"  # supervisor | announce
    executable: str | None = None  # an announced Python process's interpreter (`sys.executable`)


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class ProcessExit(Event):
    """A process of the supervised tree exited."""

    kind: ClassVar[str] = "process_exit"
    exit_code: int | None = None
    signal: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class PhaseStart(Event):
    """A training phase (train, eval, epoch_end, ...) began in a process: memory samples are grouped by it."""

    kind: ClassVar[str] = "phase_start"
    phase: str
    epoch: int | None = None
    step: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class PhaseEnd(Event):
    """A training phase ended in a process."""

    kind: ClassVar[str] = "phase_end"
    phase: str
    epoch: int | None = None
    step: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class TrainingPlan(Event):
    """What the training loop was asked to do (e.g. `fit(epochs=12, steps_per_epoch=500)`)."""

    kind: ClassVar[str] = "training_plan"
    framework: str
    epochs: int | None = None
    steps_per_epoch: int | None = None
    max_steps: int | None = None
    samples: int | None = None
    batch_size: int | None = None
    early_stopping: bool = False


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class Step(Event):
    """One optimizer/batch step; `metrics` holds what the framework logged for it."""

    kind: ClassVar[str] = "step"
    step: int
    epoch: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    duration_s: float | None = None
    data_wait_s: float | None = None
    summary: dict[str, Any] | None = None  # a bucket of steps (their means) or an anomaly: eventlog.steps
    logged: str | None = None  # the framework whose log gave the values (`trainmedic.logged`)
    window: dict[str, Any] | None = None  # the torch guard's every-loss record: rules/_helpers/windows


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class Epoch(Event):
    """An epoch finished; `steps` is how many batches it really ran."""

    kind: ClassVar[str] = "epoch"
    epoch: int
    metrics: dict[str, float] = field(default_factory=dict)
    steps: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class Metric(Event):
    """A single scalar outside step/epoch records (e.g. a TensorBoard tag)."""

    kind: ClassVar[str] = "metric"
    name: str
    value: float
    step: int | None = None
    epoch: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class MetricSeries(Event):
    """A whole curve read from a log file (a TensorBoard tag, an HF log column).

    One event per curve, not one per point, so a log of a million scalars stays a
    handful of events. `steps[i]` is the global step of `values[i]` (the epoch index
    when `per == "epoch"`); `epochs[i]`, where the log says, is its (possibly
    fractional) epoch; `times[i]` its wall time.
    """

    kind: ClassVar[str] = "series"
    name: str = ""
    # Sequences: readers may hand numpy arrays (a million points as Python floats costs seconds).
    steps: Sequence[int] = field(default_factory=list)
    values: Sequence[float] = field(default_factory=list)
    epochs: Sequence[float] | None = None
    times: Sequence[float] | None = None
    per: str = "step"  # step | epoch
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = Event.to_dict(self)  # slotted dataclasses break zero-argument super()
        for key in ("steps", "values", "epochs", "times"):
            tolist = getattr(data[key], "tolist", None)  # numpy arrays -> plain JSON lists
            if callable(tolist):
                data[key] = tolist()
            elif data[key] is not None:
                data[key] = list(data[key])
        return data


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class EnvironmentManifest(Event):
    """The environment of a run as `trainmedic env` captures it (manifest.json), for ENV rules."""

    kind: ClassVar[str] = "environment"
    manifest: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class MemorySample(Event):
    """Memory of the trainer tree at one instant; `pid` is the sampler's, `processes` the tree's."""

    kind: ClassVar[str] = "memory"
    rss_bytes: int
    processes: dict[str, int] = field(default_factory=dict)  # str(pid) -> rss
    cgroup_bytes: int | None = None
    limit_bytes: int | None = None
    gpu_bytes: int | None = None
    gpu_processes: dict[str, int] = field(default_factory=dict)
    cpu_percent: float | None = None
    summary: dict[str, Any] | None = None  # several samples' maxima, their count and means: eventlog.samples


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class LogLine(Event):
    """One line the supervised command printed."""

    kind: ClassVar[str] = "log"
    stream: str = "stdout"
    text: str = ""


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class GuardObservation(Event):
    """A fact an in-process hook measured (e.g. `{"check": "grad_norm", "value": 3e4}`)."""

    kind: ClassVar[str] = "guard"
    check: str
    data: dict[str, Any] = field(default_factory=dict)
    step: int | None = None
    epoch: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class FindingRaised(Event):
    """A finding decided in-process (a guard at the step it happened), as `Finding.to_dict()`."""

    kind: ClassVar[str] = "finding"
    finding: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class MemoryLimit(Event):
    """The memory limit the trainer runs under (`--memory-limit`, or its container's cgroup)."""

    kind: ClassVar[str] = "memory_limit"
    limit_bytes: int
    source: str = "cgroup"  # memory-limit-option | cgroup
    cgroup: str = ""
    cgroup_version: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class OomKill(Event):
    """The kernel's OOM-kill counter rose during the run (`scope`: the run's cgroup or the host)."""

    kind: ClassVar[str] = "oom_kill"
    count: int
    scope: str = "cgroup"  # cgroup | host
    cgroup: str = ""


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class StopRequest(Event):
    """The supervisor signalled the trainers: forwarded signal, `trainmedic stop`, or a hang."""

    kind: ClassVar[str] = "stop_request"
    signal: int
    reason: str = ""
    targets: list[int] = field(default_factory=list)


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class HangDetected(Event):
    """No progress and near-zero CPU for `idle_s`; `stacks` maps pid -> every thread's stack."""

    kind: ClassVar[str] = "hang"
    idle_s: float
    cpu_percent: float
    stacks: dict[str, str] = field(default_factory=dict)
    action: str = "wait"


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class OrphanEnded(Event):
    """A process of the trainer tree that outlived the trainer and was ended (`pid` is its own)."""

    kind: ClassVar[str] = "orphan"
    ppid: int | None = None
    cmdline: list[str] = field(default_factory=list)
    rss_bytes: int | None = None
    signal: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class CellStart(Event):
    """A notebook kernel began executing a cell: its execution count (the `[12]` the notebook
    shows), its first line, and the kernel's RSS then."""

    kind: ClassVar[str] = "cell_start"
    execution_count: int | None = None
    first_line: str = ""
    rss_bytes: int | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class CellEnd(Event):
    """A notebook cell finished (`error`: the exception type it raised, if any). `peak_rss_bytes`
    is the kernel's own peak during the cell, where the OS can reset it at the cell's start."""

    kind: ClassVar[str] = "cell_end"
    execution_count: int | None = None
    first_line: str = ""
    duration_s: float = 0.0
    rss_start_bytes: int | None = None
    rss_end_bytes: int | None = None
    peak_rss_bytes: int | None = None
    error: str | None = None


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class KernelShutdown(Event):
    """A notebook kernel was asked to shut down (or restart) by its frontend. Jupyter then
    waits a few seconds and sends SIGTERM: a signal after this is the normal end of a kernel."""

    kind: ClassVar[str] = "kernel_shutdown"
    restart: bool = False


@dataclass(kw_only=True, eq=False, repr=False, slots=True)
class UnknownEvent(Event):
    """An event type this version does not know (written by a newer trainmedic): kept, not lost."""

    kind: ClassVar[str] = "unknown"
    original_kind: str = ""
    payload: dict[str, Any] = field(default_factory=dict)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStart,
        RunEnd,
        ProcessSpawn,
        ProcessExit,
        PhaseStart,
        PhaseEnd,
        TrainingPlan,
        Step,
        Epoch,
        Metric,
        MetricSeries,
        EnvironmentManifest,
        MemorySample,
        LogLine,
        GuardObservation,
        FindingRaised,
        MemoryLimit,
        OomKill,
        StopRequest,
        HangDetected,
        OrphanEnded,
        CellStart,
        CellEnd,
        KernelShutdown,
    )
}


def encode(event: Event) -> str:
    """One JSON line (no newline). Non-finite floats are kept as JSON's NaN/Infinity tokens."""
    return json.dumps(event.to_dict(), separators=(",", ":"), default=_json_default)


def _json_default(value: object) -> object:
    """A record inside an event's data (a guard's dataclass) as its fields; anything else as text."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


def decode(line: str) -> Event:
    """Parse one line; unknown kinds become `UnknownEvent`. Raises ValueError on bad JSON."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("event line is not a JSON object")
    kind = str(data.pop("kind", ""))
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        base = {k: data.pop(k) for k in ("t", "pid", "rank", "node") if k in data}
        return UnknownEvent(original_kind=kind, payload=data, **base)
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"bad {kind} event: {exc}") from exc
