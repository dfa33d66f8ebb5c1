"""`trainmedic run` as the click group lists it; the command itself is cli/run_args.py.

The console script hands `run` to run_args before click is imported (the supervisor's
start-up CPU is budgeted); this face is what `trainmedic --help` shows, and it forwards
everything, `--help` included, to the same parser.
"""

from __future__ import annotations

import click

from trainmedic.cli import run_args


@click.command(
    "run",
    help=run_args.SUMMARY,
    short_help="Supervise a training command: the real trainer, memory by phase, how it ended.",
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> int:
    return run_args.main(args)
