"""`trainmedic explain CODE-or-SLUG`: the documentation of one finding."""

from __future__ import annotations

import json
import sys

import click

from trainmedic.cli.options import plain_format_option
from trainmedic.registry import lookup
from trainmedic.report.explain import explain_text

__all__ = ["command", "explain_text"]  # explain_text stays importable from here (public since 0.1)


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
