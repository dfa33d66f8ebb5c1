"""Terminal renderer: severity colour, code, slug, message, evidence, fix.

Colour (rich) only on a terminal or with FORCE_COLOR; with a file or pipe the same
lines come out plain, written directly: rich's import is most of what
`trainmedic run` spends after a run whose output goes to a log file, as long runs' do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from trainmedic.findings import Finding, Severity, sort_findings

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_MAX_EVIDENCE_CHARS = 300
#: Text with the style of each piece (None: unstyled); rich renders it on a terminal.
Styled = list[tuple[str, str | None]]

if TYPE_CHECKING:
    from rich.console import Console


def make_console(out: TextIO, *, width: int | None = None) -> Console:
    """A console on `out`; colour and width follow whether `out` is a terminal."""
    from rich.console import Console

    return Console(file=out, width=width or (None if out.isatty() else 100), highlight=False, soft_wrap=True)


def render_text(findings: Sequence[Finding], out: TextIO, *, title: str = "") -> None:
    blocks: list[Styled] = [[(title, "bold")]] if title else []
    if not findings:
        blocks.append([("No findings.", "green")])
    else:
        blocks += [finding_text(f) for f in sort_findings(findings)]
        blocks.append(summary_line(findings))
    if out.isatty() or os.environ.get("FORCE_COLOR"):
        from rich.text import Text

        console = make_console(out)
        for block in blocks:
            console.print(Text.assemble(*((piece, style or "") for piece, style in block)))
    else:
        out.write("".join("".join(piece for piece, _ in block) + "\n" for block in blocks))
        out.flush()


def finding_text(finding: Finding) -> Styled:
    """One finding as a few lines: header, evidence, fix."""
    style = SEVERITY_STYLE[finding.severity]
    text: Styled = [
        (f"{finding.severity.value.upper():7} ", style),
        (f"{finding.code} {finding.slug}", "bold"),
    ]
    where = _where(finding)
    if where:
        text.append((f" [{where}]", "dim"))
    text.append((f"\n  {finding.message}", None))
    for key, value in finding.evidence.items():
        text += [(f"\n    {key}: ", "dim"), (_short(value), None)]
    if finding.fix:
        text += [("\n  fix: ", "green"), (finding.fix, None)]
    text.append(("\n", None))
    return text


def summary_line(findings: Sequence[Finding]) -> Styled:
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    parts = [f"{counts[s]} {s.value}{'s' if counts[s] != 1 else ''}" for s in Severity]
    return [(", ".join(parts), "bold")]


def _where(finding: Finding) -> str:
    return ", ".join(f"{name} {value}" for name, value in finding.location())


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
