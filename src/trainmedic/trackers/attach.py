"""After a supervised run: the diagnosis onto the tracker runs the script itself opened.

Called once by the supervisor when the run has ended however it ended (findings.json and
report.html are written by then). `--tracker` picks the tracker, `auto` (the default) takes
every run the trainer recorded (`learned`), `none` sends nothing. Nothing goes to a tracker
run the script did not open. A tracker that cannot be reached costs one line on stderr: the
run's own exit status and outputs never depend on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainmedic import runfolder
from trainmedic.findings import Finding
from trainmedic.trackers import learned
from trainmedic.trackers.payload import Attachment, attachment

if TYPE_CHECKING:  # the readers (numpy, the trackers' clients) load only for a run that used a tracker
    from trainmedic.diagnose.source import LogRead

CHOICES = ("auto", learned.MLFLOW, learned.WANDB, "none")


def curves_from_trackers(
    run_dir: Path, *, choice: str = "auto", say: Callable[[str], None] = lambda _: None
) -> int:
    """Append the metric histories of the tracker runs the script opened to the run's events,
    so the diagnosis judges the curves the script logged only to its tracker (read once the run
    has ended: nothing during it). Returns the number of points added."""
    if choice == "none":
        return 0
    from trainmedic.events import EventWriter

    points = 0
    for run in (r for r in learned.read(run_dir) if choice in ("auto", r.tracker)):
        try:
            read = _read_run(run)
        except Exception as exc:  # a store gone since the run: its curves are missing, no more
            say(f"trainmedic: could not read {run.tracker} run {run.run_id}: {_one_line(exc)}")
            continue
        with EventWriter(run_dir / runfolder.EVENTS) as writer:
            for event in read.events:
                writer.emit(event)
        points += read.points
    return points


def _read_run(run: learned.TrackerRun) -> LogRead:
    if run.tracker == learned.MLFLOW:
        from trainmedic.trackers import mlflow

        return mlflow.read_mlflow_run(f"{mlflow.SCHEME}{run.run_id}", run.location, with_attached=False)
    from trainmedic.trackers import wandb

    # the curves only: findings an earlier supervised run attached are not this run's
    return wandb.read_wandb_run(Path(run.location), with_attached=False)


def to_trackers(
    run_dir: Path,
    findings: list[Finding],
    *,
    exit_status: int,
    stopped: bool = False,
    choice: str = "auto",
    say: Callable[[str], None] = lambda _: None,
) -> list[str]:
    """Attach the diagnosis to each tracker run the trainer recorded; one line said per run."""
    if choice == "none":
        return []
    runs = [r for r in learned.read(run_dir) if choice in ("auto", r.tracker)]
    if not runs:
        return []
    files = [run_dir / runfolder.FINDINGS, run_dir / runfolder.REPORT]
    payload = attachment(findings, files, exit_status=exit_status, stopped=stopped)
    said: list[str] = []
    for run in runs:
        t0 = time.monotonic()
        name = f"{run.tracker} run {run.run_id}"
        try:
            where = _attach_one(run, payload)
            line = f"trainmedic: diagnosis attached to {name} ({where}) in {time.monotonic() - t0:.1f} s"
        except Exception as exc:  # the run has ended: a tracker problem is reported, never raised
            line = f"trainmedic: could not attach the diagnosis to {name}: {_one_line(exc)}"
        say(line)
        said.append(line)
    return said


def _attach_one(run: learned.TrackerRun, payload: Attachment) -> str:
    if run.tracker == learned.MLFLOW:
        from trainmedic.trackers import mlflow

        return mlflow.attach(run, payload)
    from trainmedic.trackers import wandb

    return wandb.attach(run, payload)


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0][:300] if lines else "") or type(exc).__name__
