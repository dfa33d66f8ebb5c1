"""What `trainmedic run` attached to a tracker run: the run folder's `findings.json`, saved as
an MLflow artifact (`trainmedic/findings.json`) or a W&B run file (`files/findings.json`).

Diagnosing the tracker run shows those findings as the run's own (`FindingRaised` events: the
diagnosis of the supervised run, made with everything it saw); a rule that finds the same
code again from the logged curves says less and steps aside (`registry.run_rules`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainmedic.diagnose.source import LOG_PID
from trainmedic.events import Event, FindingRaised
from trainmedic.findings import Finding

FILE = "findings.json"


def events(document: Any) -> list[Event]:
    """The findings of a `findings.json` document as events; an unreadable entry is left out."""
    entries = document.get("findings") if isinstance(document, dict) else None
    found: list[Event] = []
    for data in entries if isinstance(entries, list) else []:
        try:
            finding = Finding.from_dict(data)
        except (KeyError, TypeError, ValueError):
            continue
        found.append(FindingRaised(finding=finding.to_dict(), t=0.0, pid=LOG_PID))
    return found


def read_file(path: Path) -> list[Event] | None:
    """The findings of `path`; None when it is missing or no JSON."""
    try:
        return events(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def note(source: str, found: list[Event], where: str) -> str:
    """'wandb/…: trainmedic run attached 2 findings (DAT017, TOR011) to this run (files/findings.json)'."""
    codes = [e.finding.get("code", "?") for e in found if isinstance(e, FindingRaised)]
    listed = f" ({', '.join(dict.fromkeys(codes))})" if codes else ""
    count = f"{len(codes)} finding{'s' if len(codes) != 1 else ''}"
    return f"{source}: trainmedic run attached {count}{listed} to this run ({where})"
