"""Renderers: findings (and events) to terminal text, JSON, GitHub annotations, SARIF and HTML.

Every renderer takes the same inputs and writes to a stream; the CLI picks one
by `--format`. They are equals behind one interface (`render`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import TextIO

from trainmedic.findings import Finding


class OutputFormat(str, Enum):
    TEXT = "text"
    JSON = "json"
    GITHUB = "github"  # GitHub Actions annotations (report/github.py)
    SARIF = "sarif"  # SARIF 2.1.0 for code-scanning dashboards (report/sarif.py)


def render(findings: Sequence[Finding], fmt: OutputFormat, out: TextIO, *, title: str = "") -> None:
    """Write findings in the chosen format."""
    if fmt is OutputFormat.JSON:
        from trainmedic.report.json import render_json

        render_json(findings, out)
    elif fmt is OutputFormat.GITHUB:
        from trainmedic.report.github import render_github

        render_github(findings, out)
    elif fmt is OutputFormat.SARIF:
        from trainmedic.report.sarif import render_sarif

        render_sarif(findings, out)
    else:
        from trainmedic.report.text import render_text

        render_text(findings, out, title=title)
