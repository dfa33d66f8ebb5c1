"""`trainmedic diff A B`: what changed from a known-good run A to run B.

A and B are run folders (manifest.json + events.jsonl, or any log folder
`diagnose` reads) or manifest files. The environment is compared section by
section (ENV001 env-drift carries the differences as evidence); metrics are
shown side by side, with the step where B's curve first leaves A's beyond noise.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from trainmedic import runfolder
from trainmedic.cli.options import fail_on_option, findings_exit_code, format_option, write_ci_format
from trainmedic.errors import UsageError
from trainmedic.record import RunRecord


@dataclass(slots=True)
class Side:
    """One run as `diff` sees it: its manifest and/or its events."""

    name: str
    manifest: dict[str, Any] | None
    record: RunRecord | None


@click.command("diff")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@format_option
@fail_on_option
def command(a: Path, b: Path, fmt: str, fail_on: str) -> int:
    """Compare run B against the known-good run A: packages, hardware, driver, data hashes,
    commit, command, and metrics side by side."""
    from trainmedic.envinfo import TRAINING_PACKAGES
    from trainmedic.rules.env.env001_env_drift import compare_manifests, judge

    side_a, side_b = load_side(a), load_side(b)
    differences: dict[str, Any] = {}
    if side_a.manifest is not None and side_b.manifest is not None:
        differences = compare_manifests(side_a.manifest, side_b.manifest, TRAINING_PACKAGES)
    command_a, command_b = _command(side_a), _command(side_b)
    if command_a != command_b and "command" not in differences and command_a and command_b:
        differences["command"] = [command_a, command_b]
    plan_a, plan_b = _plan(side_a), _plan(side_b)
    if plan_a and plan_b and plan_a != plan_b:
        differences["training_plan"] = {
            k: [plan_a.get(k), plan_b.get(k)]
            for k in sorted(set(plan_a) | set(plan_b))
            if plan_a.get(k) != plan_b.get(k)
        }
    metrics = compare_metrics(side_a.record, side_b.record)
    drift = judge(str(a), str(b), differences)
    findings = [drift] if drift is not None else []
    if write_ci_format(findings, fmt):
        return findings_exit_code(findings, fail_on)
    if fmt == "json":
        doc = {
            "a": str(a),
            "b": str(b),
            "differences": differences,
            "metrics": metrics,
            "findings": [f.to_dict() for f in findings],
        }
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        _text(side_a, side_b, differences, metrics, findings)
    return findings_exit_code(findings, fail_on)


def load_side(path: Path) -> Side:
    from trainmedic.diagnose import load
    from trainmedic.envinfo import load_manifest

    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_file():
        if path.suffix == ".json":
            try:
                return Side(str(path), load_manifest(path), None)
            except UsageError:
                pass
        return Side(str(path), None, load([path]).record)
    manifest_file = path / runfolder.MANIFEST
    manifest = load_manifest(manifest_file) if manifest_file.is_file() else None
    try:
        record: RunRecord | None = load([path]).record
    except UsageError:
        if manifest is None:
            raise UsageError(f"{path}: neither a manifest.json nor a log trainmedic reads") from None
        record = None
    return Side(str(path), manifest, record)


def _command(side: Side) -> list[str] | None:
    if side.record is not None and side.record.start is not None:
        return list(side.record.start.command)
    if side.manifest is not None and side.manifest.get("command"):
        return list(side.manifest["command"])
    return None


def _plan(side: Side) -> dict[str, Any] | None:
    """The training configuration the run stated (epochs, steps, batch size, early stopping)."""
    if side.record is None or not side.record.plans:
        return None
    plan = side.record.plans[-1].to_dict()
    return {k: v for k, v in plan.items() if k not in ("t", "pid", "rank", "node", "kind") and v is not None}


def compare_metrics(a: RunRecord | None, b: RunRecord | None) -> list[dict[str, Any]]:
    """Every metric both runs logged: final values and where B first departs from A."""
    from trainmedic.evidence.curves import curve, departure, final_value, is_loss

    if a is None or b is None:
        return []
    rows = []
    for name in sorted(a.metric_names() & b.metric_names(), key=lambda n: (not is_loss(n), n)):
        ca, cb = curve(a, name), curve(b, name)
        if ca is None or cb is None:
            continue
        left = departure(ca, cb)
        offset = 1 if ca.per == "epoch" else 0  # epochs counted from 1, as in findings and framework logs
        rows.append(
            {
                "metric": name,
                "per": ca.per,
                "a_final": final_value(ca),
                "b_final": final_value(cb),
                "a_points": len(ca),
                "b_points": len(cb),
                "departs_at": None if left is None else left.x + offset,
                "a_at_departure": None if left is None else left.a,
                "b_at_departure": None if left is None else left.b,
            }
        )
    return rows


def _text(
    a: Side, b: Side, differences: dict[str, Any], metrics: list[dict[str, Any]], findings: list[Any]
) -> None:
    from trainmedic.report.text import render_text

    out = [f"A (baseline): {a.name}", f"B:            {b.name}"]
    if a.manifest is None or b.manifest is None:
        out.append("environment: not compared (a manifest.json is missing on one side)")
    elif not differences:
        out.append("environment: identical")
    for section, value in differences.items():
        out.append(f"\n{section}:")
        out.extend(_lines(section, value))
    if metrics:
        out.append("\nmetrics (A -> B):")
        for row in metrics:
            where = (
                f"departs at {row['per']} {row['departs_at']} ({_num(row['a_at_departure'])} -> "
                f"{_num(row['b_at_departure'])})"
                if row["departs_at"] is not None
                else "no departure beyond noise"
            )
            out.append(
                f"  {row['metric']:<24} final {_num(row['a_final'])} -> {_num(row['b_final'])}; {where}"
            )
    sys.stdout.write("\n".join(out) + "\n\n")
    render_text(findings, sys.stdout, title="trainmedic diff")


def _lines(section: str, value: Any) -> list[str]:
    if section == "packages":
        lines = [f"  changed  {n} {v[0]} -> {v[1]}" for n, v in value.get("changed", {}).items()]
        lines += [f"  added    {n} {v}" for n, v in value.get("added", {}).items()]
        lines += [f"  removed  {n} {v}" for n, v in value.get("removed", {}).items()]
        return lines
    if isinstance(value, dict):
        return [f"  {k}: {_pair(v)}" for k, v in value.items()]
    return [f"  {_pair(value)}"]


def _pair(value: Any) -> str:
    if isinstance(value, list) and len(value) == 2:
        return f"{value[0]} -> {value[1]}"
    if isinstance(value, dict):
        return "; ".join(f"{k} {_pair(v)}" for k, v in value.items())
    return str(value)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
