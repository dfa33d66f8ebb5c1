"""`trainmedic ps`: the supervised runs on this machine, with their real trainer PIDs."""

from __future__ import annotations

import json
import sys
import time

import click
from rich.table import Table

from trainmedic.cli.options import plain_format_option
from trainmedic.report.text import make_console


@click.command("ps")
@plain_format_option
def command(fmt: str) -> int:
    """List running supervised runs: supervisor PID, trainer PIDs, elapsed time, run folder."""
    from trainmedic.supervise.control import live_runs

    runs = live_runs()
    if fmt == "json":
        click.echo(json.dumps({"runs": [r.to_dict() for r in runs]}, indent=2))
        return 0
    if not runs:
        click.echo("no supervised runs")
        return 0
    table = Table("supervisor", "trainer pids", "elapsed", "run folder", box=None, pad_edge=False)
    table.add_column("command", no_wrap=True, overflow="ellipsis", max_width=50)
    now = time.time()
    for run in runs:
        elapsed = int(now - run.started)
        table.add_row(
            str(run.supervisor_pid),
            ",".join(map(str, run.trainer_pids)) or "-",
            f"{elapsed // 3600}:{elapsed % 3600 // 60:02d}:{elapsed % 60:02d}",
            str(run.run_dir),
            " ".join(run.command),
        )
    make_console(sys.stdout).print(table)
    return 0
