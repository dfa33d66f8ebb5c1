"""The report drawn in a child process, within a time and a memory budget.

Why a child: the supervisor draws the report after the trainer has exited (and during the run
when an error appears), and a report is the largest piece of code over the run's numbers
(every chart, every series, every axis). Whatever goes wrong in it, a loop that never ends, a
chart that grows without bound, an exception, must cost the report alone: never the
diagnosis, never the exit status, never the machine. A child process is the one boundary
Python offers that can be stopped from outside at any point: the supervisor watches its
resident memory and its time and ends it past either budget, then says in one line that the
report was skipped and why. The child costs a Python start and the report's imports (about
half a second) at the end of a run that lasted minutes to days.

The child (`python -m trainmedic.report.bounded RUN_DIR`) reads the run folder as
`trainmedic report` does and prints the report's path and its own peak memory as one JSON line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from trainmedic._osinfo import peak_rss_bytes
from trainmedic.errors import TrainmedicError

#: Defaults of `trainmedic run --report-seconds / --report-memory`. A week-long run's report is
#: drawn in a few seconds and under 200 MiB (benchmarks/supervisor_soak.py): the budgets leave
#: room for a slow, loaded machine, and stop a runaway long before it threatens the host.
DEFAULT_SECONDS = 120.0
DEFAULT_MEMORY_BYTES = 2 * 1024**3
#: How often the supervisor looks at the child: memory grows at most this long past the budget.
POLL_S = 0.05


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportBudget:
    """What drawing the report may take: wall-clock seconds and resident bytes of its process."""

    seconds: float = DEFAULT_SECONDS
    memory_bytes: int = DEFAULT_MEMORY_BYTES


class ReportSkipped(TrainmedicError):
    """The report was not written; the message says why, in one line."""


def write_report_within(run_dir: Path, budget: ReportBudget = ReportBudget()) -> dict[str, object]:
    """Draw `run_dir`'s report in a child process within `budget`: its path, the seconds it took
    (the child's start included) and the child's peak resident bytes. ReportSkipped if it was not
    written."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            [sys.executable, "-m", __name__, str(run_dir)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        reason = _watch(child, budget, started)
        if reason is None and child.returncode != 0:
            err.seek(0)
            reason = _last_line(err.read()) or f"its process exited with status {child.returncode}"
        if reason is not None:
            raise ReportSkipped(reason)
        out.seek(0)
        drawn: dict[str, object] = json.loads(out.read())
    return drawn | {"seconds": round(time.monotonic() - started, 3)}


def _watch(child: subprocess.Popen[bytes], budget: ReportBudget, started: float) -> str | None:
    """Wait for the child within the budget: None once it has exited, else why it was ended."""
    try:
        watched = psutil.Process(child.pid)
    except psutil.NoSuchProcess:
        watched = None
    peak = 0
    while child.poll() is None:
        elapsed = time.monotonic() - started
        if elapsed > budget.seconds:
            _end(child)
            return f"not done within its budget of {budget.seconds:g} s"
        peak = max(peak, _rss(watched))
        if peak > budget.memory_bytes:
            _end(child)
            return f"its memory passed its budget of {_mib(budget.memory_bytes)} ({_mib(peak)} resident)"
        time.sleep(POLL_S)
    return None


def _rss(process: psutil.Process | None) -> int:
    if process is None:
        return 0
    try:
        return int(process.memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0


def _end(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait()


def _mib(n: int) -> str:
    return f"{n / 1024**2:,.0f} MiB"


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main(argv: list[str]) -> int:
    """The child: draw the report of the run folder argv[0]; print where, its peak and seconds."""
    from trainmedic.report.html import write_report

    path = write_report(Path(argv[0]))
    sys.stdout.write(json.dumps({"path": str(path), "peak_rss_bytes": peak_rss_bytes()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
