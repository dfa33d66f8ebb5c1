"""Renderers: findings (and events) to terminal text, JSON and, later, HTML.

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


def render(findings: Sequence[Finding], fmt: OutputFormat, out: TextIO, *, title: str = "") -> None:
    """Write findings in the chosen format."""
    if fmt is OutputFormat.JSON:
        from trainmedic.report.json import render_json

        render_json(findings, out)
    else:
        from trainmedic.report.text import render_text

        render_text(findings, out, title=title)
