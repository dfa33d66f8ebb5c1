"""Findings as notebook output: self-contained HTML (inline styles, no script, no CDN) with a
plain-text twin for frontends that show text only (terminals, nbconvert to text)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from trainmedic.findings import Finding

_COLOURS = {
    "error": ("#b3261e", "#fdecea"),
    "warning": ("#8a5a00", "#fff4e0"),
    "info": ("#1f5f99", "#eaf2fb"),
}
_BOX = (
    "border-left:4px solid {edge};background:{fill};color:#1d1d1f;padding:6px 10px;margin:4px 0;"
    "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.45"
)


def finding_html(finding: Finding, where: str = "") -> str:
    """One finding as a coloured box: code, slug, severity, the fact, the fix."""
    edge, fill = _COLOURS.get(finding.severity.value, _COLOURS["info"])
    e = html.escape
    head = (
        f"<b>trainmedic {e(finding.code)}</b> <code>{e(finding.slug)}</code> "
        f"<span style='color:{edge};font-weight:600'>{e(finding.severity.value)}</span>"
        + (f" <span style='color:#555'>· {e(where)}</span>" if where else "")
    )
    fix = f"<div style='color:#333'><b>Fix:</b> {e(finding.fix)}</div>" if finding.fix else ""
    return (
        f"<div class='trainmedic-finding' data-code='{e(finding.code)}' "
        f'style="{_BOX.format(edge=edge, fill=fill)}">'
        f"<div>{head}</div><div class='trainmedic-message'>{e(finding.message)}</div>{fix}</div>"
    )


def finding_text(finding: Finding, where: str = "") -> str:
    at = f" ({where})" if where else ""
    fix = f"\n  fix: {finding.fix}" if finding.fix else ""
    return f"trainmedic {finding.code} {finding.slug} [{finding.severity.value}]{at}: {finding.message}{fix}"


def note_html(title: str, lines: Sequence[str]) -> str:
    """A neutral box for what is not a finding (where the previous run is, no findings)."""
    e = html.escape
    body = "".join(f"<div>{e(line)}</div>" for line in lines)
    box = _BOX.format(edge="#6b6b6b", fill="#f4f4f4")
    return f"<div class='trainmedic-note' style=\"{box}\"><b>{e(title)}</b>{body}</div>"


def bundle(
    findings: Sequence[Finding], where: str = "", header: tuple[str, list[str]] | None = None
) -> dict[str, str]:
    """The MIME bundle (`text/html`, `text/plain`) IPython's `display(..., raw=True)` takes."""
    parts_html = [note_html(*header)] if header else []
    parts_text = [header[0], *header[1]] if header else []
    parts_html += [finding_html(f, where) for f in findings]
    parts_text += [finding_text(f, where) for f in findings]
    return {"text/html": "".join(parts_html), "text/plain": "\n".join(parts_text)}
