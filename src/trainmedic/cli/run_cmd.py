"""`trainmedic run [OPTIONS] -- CMD ARGS...`: supervise a training command to the end.

Exits with the command's own status (128+N when killed by signal N), like
`time`, so it drops into any scheduler script; 127 when the command does not
exist; 2 for bad options.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from trainmedic.cli.options import plain_format_option
from trainmedic.errors import UsageError

ON_HANG = ("wait", "stop")


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run folder (default runs/<time>-<name>/).",
)
@click.option("--name", help="Name of the run (default: the script's name).")
@click.option("--expect-epochs", type=click.IntRange(min=1), help="Epochs the run must complete.")
@click.option(
    "--memory-limit", metavar="SIZE", help="Run the trainer under this memory limit (cgroup), e.g. 6G."
)
@click.option(
    "--hang-timeout",
    type=click.FloatRange(min=0),
    default=1800.0,
    show_default=True,
    help="Seconds without progress and CPU before a hang is reported (0: off).",
)
@click.option(
    "--on-hang",
    type=click.Choice(ON_HANG),
    default="wait",
    show_default=True,
    help="After a hang: keep waiting, or stop the trainer.",
)
@click.option(
    "--restarts",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Restart a failed run N times.",
)
@click.option(
    "--sample-interval",
    type=click.FloatRange(min=0.05),
    default=0.5,
    show_default=True,
    help="Seconds between memory samples (stretches up to 4x while memory is flat).",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds between SIGINT, SIGTERM and SIGKILL when stopping.",
)
@click.option("--quiet", is_flag=True, help="No status lines; only the diagnosis at the end.")
@click.option("--no-instrument", is_flag=True, help="Do not load the in-process instrumentation.")
@plain_format_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def command(
    *,
    out: Path | None,
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
    command: tuple[str, ...],
) -> int:
    """Run CMD under supervision: the real trainer behind any launcher, memory by phase, how it
    ended and why. The run folder holds events.jsonl, output.log, findings.json, manifest.json,
    report.html."""
    import os

    from trainmedic.supervise import CommandNotFound, RunOptions, Supervisor
    from trainmedic.supervise.cgroup import parse_size

    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a folder")
    options = RunOptions(
        command=list(command),
        out=out,
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
    )
    try:
        supervisor = Supervisor(options)
    except CommandNotFound as exc:
        click.echo(f"trainmedic: error: {exc}", err=True)
        return exc.status
    outcome = supervisor.run()
    if fmt == "json":  # one line on stderr, after the trainer's output (stdout stays the trainer's)
        document = {
            "run_dir": str(outcome.run_dir),
            "exit_status": outcome.exit_status,
            "attempts": outcome.attempts,
            "findings": [f.to_dict() for f in outcome.findings],
        }
        click.echo(json.dumps(document, allow_nan=False), err=True)
        return outcome.exit_status
    from trainmedic.report.text import render_text  # after the run: rich costs nothing while it trains

    err = sys.stderr
    err.flush()
    render_text(outcome.findings, err, title=f"\ntrainmedic diagnosis (exit status {outcome.exit_status}):")
    click.echo(f"trainmedic: run folder {outcome.run_dir}", err=True)
    report = outcome.run_dir / "report.html"
    if report.is_file():
        click.echo(f"trainmedic: report {report}", err=True)
    return outcome.exit_status
