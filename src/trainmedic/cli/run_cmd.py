"""`trainmedic run [OPTIONS] -- CMD ARGS...`: supervise a training command to the end.

Exits with the command's own status (128+N when killed by signal N), like `time`, so it
drops into any scheduler script; 127 when the command does not exist, 126 when it cannot
be executed; 2 for bad options (cli/main.py prints them as one line).

Option parsing stops at the command's name, so the command's own options (`-c`, `--help`)
are its own, with or without `--` before it.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from trainmedic import runfolder
from trainmedic.errors import UsageError
from trainmedic.report import bounded

if TYPE_CHECKING:
    from trainmedic.supervise import RunOutcome

ON_HANG = ("wait", "stop")
FORMATS = ("text", "json")
TRACKERS = ("auto", "mlflow", "wandb", "none")  # trackers.attach.CHOICES, kept import-free here
USAGE = "trainmedic run [OPTIONS] -- CMD ARGS..."
SUMMARY = (
    "Run CMD under supervision: the real trainer behind any launcher, memory by phase, how it "
    "ended and why. The run folder holds events.jsonl, output.log, findings.json, "
    "manifest.json, report.html."
)


@click.command(
    "run",
    help=SUMMARY,
    short_help="Supervise a training command: the real trainer, memory by phase, how it ended.",
    options_metavar="[OPTIONS] --",
    context_settings={"allow_interspersed_args": False},
)
@click.option(
    "--out",
    metavar="DIR",
    help=f"Run folder (default runs/<time>-<name>/, or under ${runfolder.RUNS_DIR_ENV} when set).",
)
@click.option("--name", metavar="NAME", help="Name of the run (default: the script's name).")
@click.option(
    "--expect-epochs", metavar="N", type=click.IntRange(min=1), help="Epochs the run must complete."
)
@click.option(
    "--memory-limit", metavar="SIZE", help="Run the trainer under this memory limit (cgroup), e.g. 6G."
)
@click.option(
    "--hang-timeout",
    metavar="SECONDS",
    type=click.FloatRange(min=0),
    default=1800.0,
    help="Seconds without progress and CPU before a hang is reported (0: off). Default 1800.",
)
@click.option(
    "--on-hang",
    type=click.Choice(ON_HANG),
    default="wait",
    help="After a hang: keep waiting, or stop the trainer. Default wait.",
)
@click.option(
    "--restarts",
    metavar="N",
    type=click.IntRange(min=0),
    default=0,
    help="Restart a failed run N times. Default 0.",
)
@click.option(
    "--sample-interval",
    metavar="SECONDS",
    type=click.FloatRange(min=0.05),
    default=0.5,
    help="Seconds between memory samples (stretches up to 4x while memory is flat). Default 0.5.",
)
@click.option(
    "--grace",
    metavar="SECONDS",
    type=click.FloatRange(min=0),
    default=10.0,
    help="Seconds between SIGINT, SIGTERM and SIGKILL when stopping. Default 10.",
)
@click.option("--quiet", is_flag=True, help="No status lines; only the diagnosis at the end.")
@click.option("--no-instrument", is_flag=True, help="Do not load the in-process instrumentation.")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="text", help="Output format. Default text."
)
@click.option(
    "--tracker",
    type=click.Choice(TRACKERS),
    default="auto",
    help="Attach the diagnosis to the script's own MLflow / W&B run (auto: each one it opened).",
)
@click.option(
    "--report-seconds",
    metavar="SECONDS",
    type=click.FloatRange(min=0, min_open=True),
    default=bounded.DEFAULT_SECONDS,
    envvar="TRAINMEDIC_REPORT_SECONDS",
    help=f"Time the report may take to draw before it is skipped. Default {bounded.DEFAULT_SECONDS:g}.",
)
@click.option(
    "--report-memory",
    metavar="SIZE",
    default=f"{bounded.DEFAULT_MEMORY_BYTES // 1024**3}G",
    envvar="TRAINMEDIC_REPORT_MEMORY",
    help=f"Memory the report's process may use before it is skipped. "
    f"Default {bounded.DEFAULT_MEMORY_BYTES // 1024**3}G.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="CMD ARGS...")
def command(
    *,
    out: str | None,
    name: str | None,
    expect_epochs: int | None,
    memory_limit: str | None,
    hang_timeout: float,
    on_hang: str,
    restarts: int,
    sample_interval: float,
    grace: float,
    quiet: bool,
    no_instrument: bool,
    fmt: str,
    tracker: str,
    report_seconds: float,
    report_memory: str,
    command: tuple[str, ...],
) -> int:
    from trainmedic.supervise import CommandNotFound, RunOptions, Supervisor
    from trainmedic.supervise.cgroup import parse_size
    from trainmedic.verdict import LiveDiagnosis

    if not command:
        raise UsageError(f"no command given: expected `{USAGE}`")
    folder = Path(out) if out is not None else None
    if folder is not None and folder.exists() and not folder.is_dir():
        raise UsageError(f"--out: {folder} exists and is not a folder")
    budget = bounded.ReportBudget(
        seconds=report_seconds, memory_bytes=parse_size(report_memory, "--report-memory")
    )
    options = RunOptions(
        command=list(command),
        out=folder,
        name=name,
        expect_epochs=expect_epochs,
        memory_limit=parse_size(memory_limit) if memory_limit is not None else None,
        hang_timeout=hang_timeout,
        on_hang=on_hang,
        restarts=restarts,
        sample_interval=sample_interval,
        grace=grace,
        quiet=quiet,
        instrument=not no_instrument and os.environ.get("TRAINMEDIC_INSTRUMENT", "1") != "0",
        runs_base=runfolder.runs_base(),
        tracker=tracker,
    )
    try:
        render = functools.partial(bounded.write_report_within, budget=budget)
        supervisor = Supervisor(options, diagnosis=functools.partial(LiveDiagnosis, render=render))
    except CommandNotFound as exc:
        sys.stderr.write(f"trainmedic: error: {exc}\n")
        return exc.status
    return _report(supervisor.run(), fmt)


def _report(outcome: RunOutcome, fmt: str) -> int:
    """The diagnosis on stderr (stdout stays the trainer's); the trainer's exit status."""
    err = sys.stderr
    if fmt == "json":  # one line on stderr, after the trainer's output (stdout stays the trainer's)
        document = {
            "run_dir": str(outcome.run_dir),
            "exit_status": outcome.exit_status,
            "attempts": outcome.attempts,
            "findings": [f.to_dict() for f in outcome.findings],
        }
        err.write(json.dumps(document, allow_nan=False) + "\n")
        return outcome.exit_status
    from trainmedic.report.text import render_text  # after the run: rich costs nothing while it trains

    err.flush()
    render_text(outcome.findings, err, title=f"\ntrainmedic diagnosis (exit status {outcome.exit_status}):")
    counts = counts_line(outcome.counts)
    if counts:
        err.write(f"trainmedic: {counts}\n")
    err.write(f"trainmedic: run folder {outcome.run_dir}\n")
    report = outcome.run_dir / runfolder.REPORT
    if report.is_file():
        err.write(f"trainmedic: report {report}\n")
    return outcome.exit_status


def counts_line(counts: dict[str, float | int | None]) -> str:
    """'80 steps · 1 epoch · 6.94 steps/s after step 10 (start-up 18.2 s)': what the trainer
    ran, its rate with the start-up apart; empty for a run without steps."""
    steps = counts.get("steps")
    if not steps:
        return ""
    parts = [f"{int(steps):,} step{'s' if steps != 1 else ''}"]
    epochs, asked = counts.get("epochs"), counts.get("epochs_requested")
    if epochs is not None:
        of = f" of {int(asked)}" if asked else ""
        parts.append(f"{int(epochs)}{of} epoch{'s' if (asked or epochs) != 1 else ''}")
    rate, first, start_up = counts.get("steps_per_s"), counts.get("first_step"), counts.get("start_up_s")
    if rate:
        after = f" after step {int(first)}" if first is not None else ""
        up = f" (start-up {start_up:.1f} s)" if start_up is not None else ""
        parts.append(f"{rate:.3g} steps/s{after}{up}")
    return " · ".join(parts)
