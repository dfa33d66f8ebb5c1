"""What the RUN rules share: a run split into attempts, and facts about how each one ended.

Each attempt (a run with `--restarts` has several) is classified on its own, from its
`RunEnd` and the events between its `RunStart` and it. Exit statuses follow the shell:
128+N is "killed by signal N", also when a launcher (bash, torchrun) reports its
trainer's death that way. A distributed job's driver reports a worker's death in its
own words: `dead_worker` reads them (the patterns are compiled only for a failed run).
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainmedic.events import Epoch, Event, LogLine, MemorySample, OomKill, RunEnd, RunStart, StopRequest
from trainmedic.findings import epoch_number
from trainmedic.record import RunRecord, cell_label, cell_running

if TYPE_CHECKING:  # imported where a failed run needs it (see `dead_worker`)
    from trainmedic.rules._helpers.workers import WorkerDeath

LAST_LINES = 12
_KILL_SIGNALS_BY_EXIT = range(129, 129 + 64)


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt of the run: its end, and the events that happened during it."""

    number: int
    start: RunStart | None
    end: RunEnd
    events: tuple[Event, ...]

    def of(self, kind: type[Event]) -> list[Event]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def lines(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, LogLine)]

    @property
    def error_lines(self) -> list[str]:
        """Where Python writes tracebacks and faulthandler reports: stderr. Lines of stdout may
        be stamped out of order with it (two pipes), so they would cut into a traceback.
        All lines when nothing came on stderr (a logger that writes errors to stdout)."""
        errors = [e.text for e in self.events if isinstance(e, LogLine) and e.stream == "stderr"]
        return errors or self.lines

    @property
    def signal(self) -> int | None:
        """The killing signal: from the process itself, or a launcher's 128+N exit status."""
        if self.end.signal is not None:
            return self.end.signal
        if self.end.exit_code in _KILL_SIGNALS_BY_EXIT:
            return self.end.exit_code - 128
        return None

    @property
    def stops(self) -> list[StopRequest]:
        return [e for e in self.events if isinstance(e, StopRequest)]

    @property
    def oom_kills(self) -> list[OomKill]:
        return [e for e in self.events if isinstance(e, OomKill)]


def attempts(record: RunRecord) -> list[AttemptView]:
    """Split the record into attempts (RunStart .. RunEnd of the same attempt number)."""
    views: list[AttemptView] = []
    starts = record.of_type(RunStart)
    previous_end = float("-inf")
    for end in record.of_type(RunEnd):
        start = next((s for s in reversed(starts) if s.attempt == end.attempt and s.t <= end.t), None)
        lower = start.t if start is not None else previous_end
        window = tuple(e for e in record.events if lower <= e.t <= end.t and e is not end)
        views.append(AttemptView(end.attempt, start, end, window))
        previous_end = end.t
    return views


def attempt_suffix(view: AttemptView) -> str:
    return f" (attempt {view.number})" if view.number else ""


def phase_at_end(record: RunRecord, view: AttemptView) -> tuple[str | None, int | None]:
    """The phase open when the attempt ended, and its epoch."""
    samples = [e for e in view.events if isinstance(e, MemorySample)]
    t = samples[-1].t if samples else view.end.t
    best = None
    for span in record.phase_spans:
        if (
            span.phase != "idle"  # a notebook kernel between cells: no phase of training
            and span.start <= t
            and (span.end is None or t <= span.end)
            and (best is None or span.start >= best.start)
        ):
            best = span
    return (best.phase, best.epoch) if best else (None, None)


def during(phase: str | None, epoch: int | None) -> str:
    """' during eval of epoch 3' (`epoch` numbered from 1), ' during train', or ''."""
    if not phase:
        return ""
    return f" during {phase}" + (f" of epoch {epoch}" if epoch is not None else "")


def cell_evidence(view: AttemptView) -> tuple[str, dict[str, object] | None]:
    """' in cell [12] `model.fit(...)`' and its evidence, when a notebook kernel died mid-cell."""
    cell = cell_running(view.events)
    if cell is None:
        return "", None
    return f" in {cell_label(cell)}", {
        "execution_count": cell.execution_count,
        "first_line": cell.first_line,
        "rss_at_start_bytes": cell.rss_bytes,
        "running_s": round(view.end.t - cell.t, 3),
    }


# -- a worker of a distributed job that died (Ray Train, torchrun) ----------------------------
def dead_worker(record: RunRecord, view: AttemptView) -> WorkerDeath | None:
    """The worker whose death the driver / launcher reported in this attempt, if any."""
    if view.end.exit_code == 0 or view.stops:
        return None
    from trainmedic.rules._helpers import workers as _workers  # only a failed run needs its patterns compiled

    ranks = {p.pid: p.rank for p in record.processes if p.source == "announce" and p.rank is not None}
    return _workers.dead_worker(view.lines, ranks)


def worker_evidence(view: AttemptView, death: WorkerDeath) -> dict[str, object]:
    """The worker's own numbers: its peak RSS and the last epoch it reported."""
    key = str(death.pid)
    rss = [s.processes[key] for s in view.events if isinstance(s, MemorySample) and key in s.processes]
    epochs = [
        e.epoch
        for e in view.events
        if isinstance(e, Epoch) and death.rank is not None and e.rank == death.rank
    ]
    return {
        **death.evidence(),
        "peak_rss_bytes": max(rss, default=None),
        "last_epoch": epoch_number(max(epochs)) if epochs else None,
    }


def worker_driver_exception(view: AttemptView) -> str | None:
    from trainmedic.rules._helpers import workers as _workers

    return _workers.driver_exception(view.error_lines)


def worker_then(view: AttemptView) -> str:
    """'; the run then exited with status 1 (ray.train.WorkerGroupError)'."""
    raised = worker_driver_exception(view)
    return f"; the run then exited with status {view.end.exit_code}" + (f" ({raised})" if raised else "")


def worker_oom(record: RunRecord, view: AttemptView) -> WorkerDeath | None:
    """The worker the OOM killer took: it died without an error of its own (SIGKILL leaves none)
    while an OOM-kill counter rose (the run's cgroup, or the host's when the run has none)."""
    if view.end.exit_code == 0 or view.stops:
        return None
    death = dead_worker(record, view)
    if death is not None and (death.ray_memory_monitor is not None or death.spark_memory_kill):
        return (
            death  # Ray's own OOM killer, a Spark executor's container: they say so, no local counter rises
        )
    if not view.oom_kills or death is None or death.python_exception or death.native:
        return None
    if death.signal not in (None, "SIGKILL"):
        return None
    return death


def worker_killed(record: RunRecord, view: AttemptView) -> WorkerDeath | None:
    """A worker that died of a signal (a native crash, a kill) that the OOM killer does not
    explain: RUN008's, which RUN009 leaves to it."""
    death = dead_worker(record, view)
    if death is None or death.python_exception or worker_oom(record, view) is not None:
        return None
    return death if (death.native or death.signal is not None) else None


def oom_explains(view: AttemptView) -> bool:
    """The OOM killer ended this attempt: its trainer died of SIGKILL while an OOM-kill counter
    rose, or the run's own cgroup counted a kill (of a worker, say) and the run then failed.
    The machine-wide counter alone does not blame a failed run: other jobs' kills count too."""
    if not view.oom_kills or view.stops or view.end.exit_code == 0:
        return False
    if view.signal == _signal.SIGKILL:
        return True
    return any(k.scope == "cgroup" for k in view.oom_kills)


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) else None
