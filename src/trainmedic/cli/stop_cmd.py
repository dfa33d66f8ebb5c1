"""`trainmedic stop RUN_DIR|PID`: stop the real trainer, gracefully, leaving no process behind."""

from __future__ import annotations

import json

import click

from trainmedic.cli.options import plain_format_option


@click.command("stop")
@click.argument("target")
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds between SIGINT, SIGTERM and SIGKILL.",
)
@plain_format_option
def command(target: str, grace: float, fmt: str) -> int:
    """Stop a supervised run (RUN_DIR) or the trainer behind any PID (e.g. a launcher stub):
    SIGINT, then SIGTERM, then SIGKILL, then whatever is left of its tree."""
    from trainmedic.supervise.control import stop

    report = stop(target, grace)
    if fmt == "json":
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        trainers = ", ".join(map(str, report.trainer_pids)) or "none found"
        if report.via_supervisor is not None:
            click.echo(
                f"stopped {report.run_dir} through its supervisor (PID {report.via_supervisor}); "
                f"trainer PID {trainers}"
            )
        else:
            if report.launcher_pids:
                click.echo(f"PID {target} is a launcher; its trainer is PID {trainers}")
            for step in report.signals:
                click.echo(f"sent {step}")
        if report.survivors:
            click.echo(f"still running: {', '.join(map(str, report.survivors))}")
    return 1 if report.survivors else 0
