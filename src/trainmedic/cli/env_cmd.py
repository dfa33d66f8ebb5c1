"""`trainmedic env`: capture the environment manifest (the one `trainmedic run` writes per run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from trainmedic.cli.options import fail_on_option, findings_exit_code, format_option, write_ci_format


@click.command("env")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the manifest JSON here.",
)
@click.option(
    "--data",
    "data_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A data file or folder to hash (repeatable).",
)
@click.option(
    "--import-frameworks",
    is_flag=True,
    default=False,
    help="Import torch/TensorFlow for their runtime view (cuDNN loaded, GPUs visible); slower.",
)
@format_option
@fail_on_option
def command(
    out: Path | None, data_paths: tuple[Path, ...], import_frameworks: bool, fmt: str, fail_on: str
) -> int:
    """Capture Python, packages, frameworks (CUDA/cuDNN), GPUs and driver, CPU, RAM, OS, git state,
    relevant environment variables and data hashes as one JSON manifest."""
    from trainmedic.envinfo import capture_manifest, manifest_event, write_manifest
    from trainmedic.record import RunRecord
    from trainmedic.registry import rules_for, run_rules

    manifest = capture_manifest(data_paths=data_paths, import_frameworks=import_frameworks)
    findings = run_rules(RunRecord.of([manifest_event(manifest)]), rules=rules_for("environment check"))
    if out is not None:
        write_manifest(out, manifest)
    if write_ci_format(findings, fmt):
        return findings_exit_code(findings, fail_on)
    if fmt == "json":
        doc = {"manifest": manifest, "findings": [f.to_dict() for f in findings]}
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        from trainmedic.report.text import render_text

        sys.stdout.write("\n".join(summary_lines(manifest)) + "\n")
        if out is not None:
            sys.stdout.write(f"wrote {out}\n")
        if findings:
            render_text(findings, sys.stdout)
    return findings_exit_code(findings, fail_on)


def summary_lines(m: dict[str, Any]) -> list[str]:
    """A readable digest of a manifest (the JSON holds everything)."""
    py = m["python"]
    lines = [f"python    {py['version']} ({py['implementation']}) {py['executable']}"]
    fw = m.get("frameworks") or {}
    shown = []
    for name, info in fw.items():
        extra = [f"{k} {info[k]}" for k in ("cuda", "cudnn", "backend") if info.get(k)]
        shown.append(f"{name} {info.get('version')}" + (f" ({', '.join(extra)})" if extra else ""))
    lines.append(
        f"packages  {len(m.get('packages') or {})} installed; " + ("; ".join(shown) or "no ML framework")
    )
    gpus = m.get("gpus")
    if not gpus:
        lines.append("gpus      none (no NVIDIA driver found)")
    elif "error" in gpus:
        lines.append(f"gpus      NVML error: {gpus['error']}")
    else:
        names = ", ".join(
            f"{d['index']}: {d['name']} ({d['memory_bytes'] / 2**30:.0f} GiB)" for d in gpus["devices"]
        )
        lines.append(f"gpus      {names}; driver {gpus['driver']} (CUDA {gpus['cuda_driver']})")
    cpu = m["cpu"]
    lines.append(
        f"cpu       {cpu['model']}, {cpu['cores_logical']} logical / {cpu['cores_physical']} physical cores; "
        f"RAM {m['memory_bytes'] / 2**30:.1f} GiB"
    )
    lines.append(f"os        {m['os']['platform']}")
    git = m.get("git")
    if git:
        state = f"dirty: {len(git['modified'])} modified file(s)" if git["dirty"] else "clean"
        lines.append(f"git       {git['root']} @ {(git['commit'] or '?')[:12]} ({state})")
    else:
        lines.append("git       not in a git repository")
    if m.get("env"):
        lines.append("env       " + " ".join(f"{k}={v}" for k, v in m["env"].items()))
    for d in m.get("data") or []:
        size = f"{d['kind']}, {d['files']} file(s), {d['bytes']} bytes"
        lines.append(f"data      {d['path']} ({size}) sha256 {d['sha256']}")
    return lines
