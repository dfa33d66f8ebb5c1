"""`trainmedic check contract CONTRACT DATA`: does this data match the saved training contract?"""

from __future__ import annotations

import json
import sys

import click

from trainmedic.cli.options import fail_on_option, findings_exit_code, format_option, write_ci_format
from trainmedic.report.text import render_text


@click.command("contract")
@click.argument("contract_path", metavar="CONTRACT", type=click.Path(path_type=str))
@click.argument("data", type=click.Path(path_type=str))
@format_option
@fail_on_option
def command(contract_path: str, data: str, fmt: str, fail_on: str) -> int:
    """Check DATA (a table file, an image folder or an image) against a saved input CONTRACT."""
    from trainmedic import contract

    saved = contract.load(contract_path)
    findings = contract.check(saved, data)
    if write_ci_format(findings, fmt):
        return findings_exit_code(findings, fail_on)
    if fmt == "json":
        sys.stdout.write(json.dumps({"findings": [f.to_dict() for f in findings]}, indent=2) + "\n")
    else:
        render_text(findings, sys.stdout, title=f"trainmedic check contract: {data} against {contract_path}")
    return findings_exit_code(findings, fail_on)
