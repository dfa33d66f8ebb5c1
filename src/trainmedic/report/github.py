"""GitHub Actions annotations: one workflow command per finding, shown inline in the CI job.

`::error file=F,title=T::MESSAGE` lines printed by a step become annotations on
the run's summary page (and on the file, when the finding names one). Values
are escaped as the Actions runner expects: `%`, CR and LF everywhere, and `:`
and `,` inside properties.
See https://docs.github.com/actions/reference/workflow-commands-for-github-actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from trainmedic.findings import Finding, Severity, sort_findings

COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    """One `::error ...::...` line; the message carries the fix on its second line."""
    props = {"title": f"{finding.code} {finding.slug}"}
    if finding.file:
        props = {"file": finding.file, **props}
    where = ", ".join(
        f"{name} {value}"
        for name, value in (("rank", finding.rank), ("epoch", finding.epoch), ("step", finding.step))
        if value is not None
    )
    message = finding.message + (f" [{where}]" if where else "")
    if finding.fix:
        message += f"\nFix: {finding.fix}"
    joined = ",".join(f"{key}={escape_property(value)}" for key, value in props.items())
    return f"::{COMMAND[finding.severity]} {joined}::{escape_data(message)}"


def render_github(findings: Sequence[Finding], out: TextIO) -> None:
    for finding in sort_findings(findings):
        out.write(annotation(finding) + "\n")
