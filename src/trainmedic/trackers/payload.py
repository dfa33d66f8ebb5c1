"""What a tracker run receives from `trainmedic run` once it has ended: the diagnosis as tags,
alerts and files (`trackers.attach` sends it; each tracker's module puts it on its run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trainmedic.findings import Finding, Severity

PREFIX = "trainmedic"
_MESSAGE_CHARS = 500


@dataclass(frozen=True, slots=True)
class Attachment:
    """What a tracker run receives: tag/summary keys, one alert per finding with a step, the
    run folder's files, and how the run ended."""

    tags: dict[str, str | int]
    alerts: list[tuple[str, str]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    exit_status: int = 0
    stopped: bool = False


def attachment(findings: list[Finding], files: list[Path], *, exit_status: int, stopped: bool) -> Attachment:
    """The tags every tracker gets: `trainmedic.status` (error/warning/ok), the counts, the codes,
    and per finding its message, step and epoch where known."""
    errors = sum(f.severity is Severity.ERROR for f in findings)
    warnings = sum(f.severity is Severity.WARNING for f in findings)
    tags: dict[str, str | int] = {
        f"{PREFIX}.status": "error" if errors else "warning" if warnings else "ok",
        f"{PREFIX}.errors": errors,
        f"{PREFIX}.warnings": warnings,
        f"{PREFIX}.findings": ",".join(dict.fromkeys(f.code for f in findings)),
        f"{PREFIX}.exit_status": exit_status,
    }
    alerts: list[tuple[str, str]] = []
    for f in findings:
        key = f"{PREFIX}.{f.code}"
        if key in tags:  # the first (worst) occurrence speaks for the code
            continue
        tags[key] = f.message[:_MESSAGE_CHARS]
        if f.step is not None:
            tags[f"{key}.step"] = f.step
            alerts.append((f"{f.code} {f.slug}", f"{f.message} (step {f.step})"[:_MESSAGE_CHARS]))
        if f.epoch is not None:
            tags[f"{key}.epoch"] = f.epoch
    return Attachment(tags, alerts, [p for p in files if p.is_file()], exit_status, stopped)
