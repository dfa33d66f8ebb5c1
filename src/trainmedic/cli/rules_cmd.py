"""`trainmedic rules`: the table of every finding code."""

from __future__ import annotations

import json
import sys

import click
from rich.table import Table

from trainmedic.cli.options import plain_format_option
from trainmedic.registry import all_specs
from trainmedic.report.text import SEVERITY_STYLE, make_console


@click.command("rules")
@plain_format_option
def command(fmt: str) -> int:
    """List every finding: code, slug, severity, title."""
    specs = all_specs()
    out = sys.stdout
    if fmt == "json":
        rows = [
            {"code": s.code, "slug": s.slug, "severity": s.severity.value, "title": s.title} for s in specs
        ]
        out.write(json.dumps({"rules": rows}, indent=2) + "\n")
        return 0
    table = Table("code", "slug", "severity", "title", box=None, pad_edge=False)
    for s in specs:
        table.add_row(s.code, s.slug, f"[{SEVERITY_STYLE[s.severity]}]{s.severity.value}[/]", s.title)
    make_console(out).print(table)
    return 0
