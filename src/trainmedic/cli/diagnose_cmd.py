"""`trainmedic diagnose PATH...`: findings from the logs a run already wrote."""

from __future__ import annotations

import json
import sys

import click

from trainmedic.cli.options import fail_on_option, findings_exit_code, format_option, write_ci_format
from trainmedic.errors import UsageError
from trainmedic.findings import Finding


@click.command("diagnose")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option(
    "--expect-epochs",
    type=click.IntRange(min=1),
    default=None,
    help="Epochs the run was asked for (HF logs state it themselves).",
)
@click.option(
    "--early-stopping",
    is_flag=True,
    default=False,
    help="The run used early stopping: fewer epochs than requested is then expected.",
)
@click.option(
    "--tracking-uri",
    metavar="URI",
    default=None,
    help="MLflow store of mlflow://RUN_ID paths (default: $MLFLOW_TRACKING_URI).",
)
@format_option
@fail_on_option
def command(
    *,
    paths: tuple[str, ...],
    expect_epochs: int | None,
    early_stopping: bool,
    tracking_uri: str | None,
    fmt: str,
    fail_on: str,
) -> int:
    """Diagnose existing logs: Keras history JSON / CSVLogger CSV, Lightning metrics.csv,
    HF trainer_state.json, TensorBoard event files, W&B run folders, MLflow runs
    (mlflow://RUN_ID), trainmedic run folders. Several paths (ranks, restarts) are merged
    in time order."""
    from trainmedic.diagnose import load
    from trainmedic.registry import run_rules

    loaded = load(
        paths, expect_epochs=expect_epochs, early_stopping=early_stopping, tracking_uri=tracking_uri
    )
    if not any(r.events for r in loaded.reads):
        notes = "; ".join(loaded.skipped) or "no events"
        raise UsageError(f"nothing readable in {', '.join(paths)} ({notes})")
    for note in loaded.skipped:
        click.echo(f"trainmedic: warning: skipped {note}", err=True)
    for read in loaded.reads:
        for note in read.notes:
            click.echo(f"trainmedic: note: {note}", err=True)
    findings = run_rules(loaded.record)
    if write_ci_format(findings, fmt):
        return findings_exit_code(findings, fail_on)
    if fmt == "json":
        _json(findings, [r.summary() for r in loaded.reads])
    else:
        _text(findings, loaded)
    return findings_exit_code(findings, fail_on)


def _json(findings: list[Finding], sources: list[dict[str, object]]) -> None:
    doc = {"findings": [f.to_dict() for f in findings], "sources": sources}
    sys.stdout.write(json.dumps(doc, indent=2, allow_nan=False) + "\n")


def _text(findings: list[Finding], loaded: object) -> None:
    from trainmedic.diagnose import Loaded
    from trainmedic.evidence.curves import train_loss
    from trainmedic.report.text import render_text

    assert isinstance(loaded, Loaded)
    lines = [
        f"read {r.name} ({r.format}): {r.points} values"
        + (f", {len(r.skipped)} part(s) skipped" if r.skipped else "")
        for r in loaded.reads
    ]
    loss = train_loss(loaded.record)
    if loss is not None:
        lines.append(f"loss: {loss.name} ({len(loss)} points, per {loss.per})")
    sys.stdout.write("\n".join(lines) + "\n")
    render_text(findings, sys.stdout, title="trainmedic diagnose")
