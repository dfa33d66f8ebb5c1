"""ENV: environment and reproducibility (`trainmedic env`, `trainmedic diff`)."""

from __future__ import annotations

from trainmedic.findings import FindingSpec, Severity

ENV_DRIFT = FindingSpec(
    code="ENV001",
    slug="env-drift",
    severity=Severity.WARNING,
    title="Environment differs between two runs",
    what="Two runs differ in package versions, hardware, driver, dataset hash or code commit.",
    why="Half of 'it worked yesterday' is an environment change; this lists what changed.",
    example="torch 2.12.0 -> 2.13.0 and the dataset hash changed between the good and the bad run.",
    fix="Pin the versions that matter (frameworks, CUDA, numpy) and record data hashes with every run.",
)

DIRTY_WORKTREE = FindingSpec(
    code="ENV002",
    slug="dirty-worktree",
    severity=Severity.INFO,
    title="Run started from uncommitted code",
    what="The run started from uncommitted code.",
    why="The exact code of the run cannot be recovered from the commit it names.",
    example="git status shows modified train.py when the run starts.",
    fix="Commit (or stash) before long runs; trainmedic records the commit in the manifest.",
)

SPECS: tuple[FindingSpec, ...] = (ENV_DRIFT, DIRTY_WORKTREE)
