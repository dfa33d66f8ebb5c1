"""Options shared by several commands (`--format`, `--fail-on`) and the exit-code decision."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from trainmedic.errors import ExitCode
from trainmedic.findings import Finding, Severity
from trainmedic.report import OutputFormat, render

F = TypeVar("F", bound=Callable[..., Any])

format_option: Callable[[F], F] = click.option(
    "--format",
    "fmt",
    type=click.Choice([f.value for f in OutputFormat]),
    default=OutputFormat.TEXT.value,
    show_default=True,
    help="Output format: text, json, github (Actions annotations) or sarif (SARIF 2.1.0).",
)

# For commands that print documents rather than findings (`rules`, `explain`).
plain_format_option: Callable[[F], F] = click.option(
    "--format",
    "fmt",
    type=click.Choice([OutputFormat.TEXT.value, OutputFormat.JSON.value]),
    default=OutputFormat.TEXT.value,
    show_default=True,
    help="Output format.",
)

fail_on_option: Callable[[F], F] = click.option(
    "--fail-on",
    type=click.Choice([s.value for s in Severity]),
    default=Severity.ERROR.value,
    show_default=True,
    help="Exit 1 when a finding is at or above this severity.",
)


def write_ci_format(findings: Sequence[Finding], fmt: str) -> bool:
    """`--format github|sarif`: write the findings so to stdout and return True. False for
    text and json, which each command prints its own way."""
    chosen = OutputFormat(fmt)
    if chosen not in (OutputFormat.GITHUB, OutputFormat.SARIF):
        return False
    render(findings, chosen, sys.stdout)
    return True


def findings_exit_code(findings: Sequence[Finding], fail_on: str) -> int:
    """0 when no finding reaches `fail_on`, 1 when one does."""
    threshold = Severity(fail_on)
    if any(f.severity.at_least(threshold) for f in findings):
        return ExitCode.FINDINGS
    return ExitCode.OK
