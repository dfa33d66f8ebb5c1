"""DAT003 `group-overlap`: a group (patient, user, session...) has examples in more than one split.

Collector: `trainmedic check data` with `--group COL` (`trainmedic.data._leakage`, and the
engines through `trainmedic.data.engines`) counts the group values of a later split that
also occur in an earlier one, and the later split's rows holding them: it sends a
`GroupOverlap`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows


def _example() -> TablesExample:
    """Scans of the same patient in train and test."""
    train, test = rows(300, seed=0), rows(100, seed=1)
    train["patient"] = [f"p{i % 100}" for i in range(300)]
    test["patient"] = [f"p{i}" for i in range(100)]
    return TablesExample({"train": train, "test": test}, group="patient")


SPEC = FindingSpec(
    code="DAT003",
    slug="group-overlap",
    severity=Severity.ERROR,
    title="A group spans several splits",
    what="A group (patient, user, session...) has examples in more than one split.",
    why="The model learns the group, not the task: the score does not hold for new groups.",
    example="Scans of the same patient in train and test.",
    fix="Split by group: GroupKFold / GroupShuffleSplit or trainmedic.data.split(strategy='group').",
    decided_in=("data check", "data engine"),
    measured="`--group` values shared by two splits",
    reported_when="any group",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class GroupOverlap:
    """Groups of `column` found in both splits; `total` rows in the later split."""

    splits: tuple[str, str]
    column: str
    total: int
    rows: int  # rows of the later split holding a shared group
    shared: int  # distinct shared groups
    distinct: int  # distinct groups of the later split
    examples: list[object]  # shared groups, first appearance in the later split


def message(evidence: GroupOverlap) -> str:
    earlier, later = evidence.splits
    rows = evidence.rows
    return (
        f"{evidence.shared:,} {evidence.column!r} groups appear in both {earlier} and {later} "
        f"({rows:,} {later} rows, {rows / evidence.total:.1%})"
    )


def judge(evidence: GroupOverlap) -> list[Finding]:
    if evidence.rows == 0:
        return []
    return [
        SPEC.finding(
            message(evidence),
            evidence={
                "splits": list(evidence.splits),
                "column": evidence.column,
                "groups": evidence.shared,
                "groups_fraction": round(evidence.shared / max(evidence.distinct, 1), 6),
                "rows": evidence.rows,
                "fraction": round(evidence.rows / evidence.total, 6),
                "example_groups": evidence.examples[:10],
            },
        )
    ]
