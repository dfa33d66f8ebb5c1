"""DAT006 `conflicting-labels`: identical features carry different labels.

Collector: `trainmedic check data` (`trainmedic.data._quality`, and the engines through
`trainmedic.data.engines`) counts, per split, the distinct feature rows that carry more than
one label and the rows holding them, and measures how many rows chance makes share features
in that feature space: it sends `LabelConflicts`. Within chance, `note` says so instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.evidence.chance import Chance
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, head, joined, rows, tables


def _example() -> TablesExample:
    """Twenty rows appear twice, once with each label."""
    train = rows(300, seed=0)
    twins = head(train, 20)
    twins["y"] = [1 - int(str(y)) for y in twins["y"]]
    return tables(train=joined(train, twins))


SPEC = FindingSpec(
    code="DAT006",
    slug="conflicting-labels",
    severity=Severity.WARNING,
    title="Identical features, different labels",
    what="Identical features carry different labels.",
    why="The examples contradict each other: a ceiling on accuracy and a sign of labelling errors.",
    example="Two identical rows labelled 'cat' and 'dog'.",
    fix="Review the conflicting rows; relabel or drop them, or add the feature that separates them.",
    decided_in=("data check", "data engine"),
    measured="feature hashes carrying more than one label within a split",
    reported_when="rows sharing features beyond chance",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class LabelConflicts:
    """Feature rows of `split` (of `total` rows) that carry more than one label."""

    split: str
    total: int
    hashes: int  # distinct feature rows with more than one (known) label
    rows: int  # rows with a known label among them
    examples: list[object]  # ids of those rows, read order
    chance: Chance  # rows sharing their features with another row, against chance


def message(evidence: LabelConflicts) -> str:
    rows = evidence.rows
    return (
        f"{evidence.hashes:,} distinct feature rows in {evidence.split} carry more than one "
        f"label ({rows:,} rows, {rows / evidence.total:.1%})"
    )


def note(evidence: LabelConflicts) -> str | None:
    """What the report says of conflicts that chance explains (no finding then)."""
    if evidence.hashes == 0 or evidence.chance.beyond_chance:
        return None
    chance = evidence.chance
    return (
        f"{evidence.split}: {evidence.rows:,} rows share their features with rows of another label, "
        f"where chance makes ~{chance.expected_text} rows share features (a feature space of "
        f"~{chance.combinations:,.0f} combinations): the label is uncertain given these "
        "features, not conflicting"
    )


def judge(evidence: LabelConflicts) -> list[Finding]:
    if evidence.hashes == 0 or not evidence.chance.beyond_chance:
        return []
    return [
        SPEC.finding(
            message(evidence),
            evidence={
                "split": evidence.split,
                "examples": evidence.hashes,
                "rows": evidence.rows,
                "fraction": round(evidence.rows / evidence.total, 6),
                "example_rows": evidence.examples,
                **evidence.chance.evidence(),
            },
        )
    ]
