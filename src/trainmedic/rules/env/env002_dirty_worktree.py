"""ENV002 `dirty-worktree`: the run started from uncommitted code.

Collector: environment capture (`trainmedic.envinfo`: `trainmedic run` writes the manifest
of every run, `trainmedic env` captures one) records git's state (`commit`, `root`,
`dirty`, `modified` tracked files) in the manifest and sends it as an
`EnvironmentManifest` event; the rule reads the last one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import EnvironmentManifest, Event
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord

#: Modified files kept in the evidence, and named in the message.
KEPT, SHOWN = 20, 3


def _example() -> list[Event]:
    """The manifest a run records: git says train.py is modified on commit 5f3c1e2."""
    git = {"commit": "5f3c1e2a9b7d", "root": "/home/u/project", "dirty": True, "modified": ["train.py"]}
    return [EnvironmentManifest(t=0.0, pid=100, manifest={"git": git})]


SPEC = FindingSpec(
    code="ENV002",
    slug="dirty-worktree",
    severity=Severity.INFO,
    title="Run started from uncommitted code",
    what="The run started from uncommitted code (tracked files modified; untracked files are counted apart).",
    why="The exact code of the run cannot be recovered from the commit it names.",
    example="git status shows modified train.py when the run starts.",
    fix="Commit (or stash) before long runs; trainmedic records the commit in the manifest.",
    decided_in=("run events", "environment check"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    modified, count = evidence["modified"], evidence["modified_count"]
    shown = ", ".join(modified[:SHOWN]) + (", ..." if count > SHOWN else "")
    return (
        f"The run started from uncommitted code: {count} modified file(s) ({shown}) on commit "
        f"{evidence['commit'][:12]}"
    )


def dirty_worktree(record: RunRecord) -> list[Finding]:
    """ENV002 from the run's manifest: git said the worktree had uncommitted changes."""
    manifests = record.of_type(EnvironmentManifest)
    if not manifests:
        return []
    git = manifests[-1].manifest.get("git")
    if not isinstance(git, dict) or not git.get("dirty"):
        return []
    modified = list(git.get("modified") or [])
    evidence = {
        "commit": str(git.get("commit") or "?"),
        "root": git.get("root"),
        "modified": modified[:KEPT],
        "modified_count": len(modified),
    }
    return [SPEC.finding(message(evidence), evidence=evidence)]


RULES: tuple[Rule, ...] = (dirty_worktree,)
