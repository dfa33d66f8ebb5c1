"""`trainmedic report RUN_DIR [--open]`: (re)build the run's self-contained HTML report."""

from __future__ import annotations

import json
import sys
import webbrowser
from pathlib import Path

import click

from trainmedic.cli.options import format_option
from trainmedic.report import OutputFormat, render
from trainmedic.report.html import write_report
from trainmedic.runfolder import load_run_folder


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the page here instead of RUN_DIR/report.html.",
)
@click.option("--open", "open_page", is_flag=True, help="Open the report in the default web browser.")
@format_option
def command(run_dir: Path, output: Path | None, open_page: bool, fmt: str) -> int:
    """Write RUN_DIR/report.html: how the run ended, findings, memory, curves, processes, log.

    Prints the report's path (text), or the findings in the chosen format
    (json, github, sarif) with the path on stderr, so CI can annotate and keep the page.
    """
    path = write_report(run_dir, output=output)
    folder = load_run_folder(run_dir)
    if folder.note is not None:  # the run did not end under supervision
        click.echo(f"trainmedic: note: {folder.note}", err=True)
    chosen = OutputFormat(fmt)
    if chosen is OutputFormat.TEXT:
        click.echo(str(path))
    else:
        findings = folder.findings
        if chosen is OutputFormat.JSON:
            doc = {"report": str(path), "findings": [f.to_dict() for f in findings]}
            sys.stdout.write(json.dumps(doc, indent=2, allow_nan=False) + "\n")
        else:
            render(findings, chosen, sys.stdout)
            click.echo(f"report: {path}", err=True)
    if open_page:
        webbrowser.open(path.resolve().as_uri())
    return 0
