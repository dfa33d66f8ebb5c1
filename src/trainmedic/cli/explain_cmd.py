"""`trainmedic explain CODE-or-SLUG`: the documentation of one finding."""

from __future__ import annotations

import json
import sys

import click

from trainmedic.cli.options import plain_format_option
from trainmedic.findings import FindingSpec
from trainmedic.registry import lookup


def explain_text(spec: FindingSpec) -> str:
    """The documentation as plain text; the HTML report embeds the same text."""
    return (
        f"{spec.code} {spec.slug} ({spec.severity.value}): {spec.title}\n\n"
        f"What it means\n  {spec.what}\n\n"
        f"Why it hurts\n  {spec.why}\n\n"
        f"Example\n  " + spec.example.replace("\n", "\n  ") + "\n\n"
        f"Fix\n  {spec.fix}\n"
    )


@click.command("explain")
@click.argument("finding")
@plain_format_option
def command(finding: str, fmt: str) -> int:
    """Explain a finding: what it means, why it hurts, an example, the fix."""
    spec = lookup(finding)
    out = sys.stdout
    if fmt == "json":
        doc = {
            "code": spec.code,
            "slug": spec.slug,
            "severity": spec.severity.value,
            "title": spec.title,
            "what": spec.what,
            "why": spec.why,
            "example": spec.example,
            "fix": spec.fix,
        }
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        out.write(explain_text(spec))
    return 0
