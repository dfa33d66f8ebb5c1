"""Terminal renderer (rich): severity colour, code, slug, message, evidence, fix.

Colour only on a terminal; with a file or pipe the same lines come out plain, so
logs and tests read the text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from trainmedic.findings import Finding, Severity, sort_findings

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_MAX_EVIDENCE_CHARS = 300


def make_console(out: TextIO, *, width: int | None = None) -> Console:
    """A console on `out`; colour and width follow whether `out` is a terminal."""
    return Console(file=out, width=width or (None if out.isatty() else 100), highlight=False, soft_wrap=True)


def render_text(findings: Sequence[Finding], out: TextIO, *, title: str = "") -> None:
    console = make_console(out)
    if title:
        console.print(Text(title, style="bold"))
    if not findings:
        console.print(Text("No findings.", style="green"))
        return
    for finding in sort_findings(findings):
        console.print(finding_text(finding))
    console.print(summary_line(findings))


def finding_text(finding: Finding) -> Text:
    """One finding as a few lines: header, evidence, fix."""
    style = SEVERITY_STYLE[finding.severity]
    text = Text()
    text.append(f"{finding.severity.value.upper():7} ", style=style)
    text.append(f"{finding.code} {finding.slug}", style="bold")
    where = _where(finding)
    if where:
        text.append(f" [{where}]", style="dim")
    text.append(f"\n  {finding.message}")
    for key, value in finding.evidence.items():
        text.append(f"\n    {key}: ", style="dim")
        text.append(_short(value))
    if finding.fix:
        text.append("\n  fix: ", style="green")
        text.append(finding.fix)
    text.append("\n")
    return text


def summary_line(findings: Sequence[Finding]) -> Text:
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    parts = [f"{counts[s]} {s.value}{'s' if counts[s] != 1 else ''}" for s in Severity]
    return Text(", ".join(parts), style="bold")


def _where(finding: Finding) -> str:
    parts = [
        f"{name} {value}"
        for name, value in (
            ("rank", finding.rank),
            ("pid", finding.pid),
            ("epoch", finding.epoch),
            ("step", finding.step),
            ("file", finding.file),
        )
        if value is not None
    ]
    return ", ".join(parts)


def _short(value: Any) -> str:
    if isinstance(value, str):
        shown = value
    elif isinstance(value, (Mapping, list, tuple)):
        shown = json.dumps(value, default=str)
    else:
        shown = str(value)
    if len(shown) > _MAX_EVIDENCE_CHARS:
        shown = shown[: _MAX_EVIDENCE_CHARS - 1] + "…"
    return shown
