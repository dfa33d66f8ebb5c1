"""`trainmedic check config FILE`: CFG001-CFG004 on a DeepSpeed / HF / Accelerate / loop config.

Text output is one line per problem, like a linter, so a CI log shows each at a
glance: `FILE: error CFG001 batch-size-mismatch: <fact> (fix: <change>)`.
"""

from __future__ import annotations

import sys

import click

from trainmedic.cli.options import fail_on_option, findings_exit_code, format_option, write_ci_format
from trainmedic.configcheck import HARDWARE_PRECISIONS, check_config
from trainmedic.findings import Finding, findings_to_json


def finding_line(finding: Finding, default_file: str) -> str:
    """One finding as one line (no wrapping: the terminal wraps, grep still matches)."""
    where = finding.file or default_file
    return (
        f"{where}: {finding.severity.value} {finding.code} {finding.slug}: {finding.message} "
        f"(fix: {finding.fix})"
    )


@click.command("config")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--world-size", type=int, default=None, help="Number of devices (data-parallel processes).")
@click.option(
    "--hardware",
    type=click.Choice(list(HARDWARE_PRECISIONS)),
    default=None,
    help="Check precision against this device: cpu, cuda-fp16 (no bf16, e.g. V100/T4), cuda-bf16.",
)
@click.option(
    "--reference",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="A previous run's config: flags a batch change without a matching LR/warm-up change.",
)
@format_option
@fail_on_option
def command(
    file: str, *, world_size: int | None, hardware: str | None, reference: str | None, fmt: str, fail_on: str
) -> int:
    """Check a training config: batch arithmetic, precision, LR scaling, distributed settings."""
    findings = check_config(file, world_size=world_size, hardware=hardware, reference=reference)
    out = sys.stdout
    if write_ci_format(findings, fmt):
        return findings_exit_code(findings, fail_on)
    if fmt == "json":
        out.write(findings_to_json(findings) + "\n")
    elif findings:
        for finding in findings:
            out.write(finding_line(finding, file) + "\n")
    else:
        out.write(f"{file}: no configuration problems found\n")
    return findings_exit_code(findings, fail_on)
