"""DAT015 `identifier-column`: a column is a key, not a feature.

Collector: `trainmedic check data` (`trainmedic.data._identifiers`; the engines count the
distinct fraction exactly through `trainmedic.data.engines`) takes a train column for an
identifier when it is nearly unique per row (`IDENTIFIER_UNIQUE_FRACTION`) and named like a
key, or short text unique per row, or a row counter, and leaves it out of the features. It
sends an `Identifier` per such column, with its values that recur in a later split counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

IDENTIFIER_UNIQUE_FRACTION = 0.95  # distinct values per non-missing row for a key-like column


def _example() -> TablesExample:
    """A 'customer_id' column, unique per row."""
    train = rows(300, seed=0)
    train["customer_id"] = [f"C{100_000 + 7 * i}" for i in range(300)]
    return tables(train=train)


SPEC = FindingSpec(
    code="DAT015",
    slug="identifier-column",
    severity=Severity.INFO,
    title="An identifier among the columns",
    what=(
        "A column is a key, not a feature: nearly unique per row (95 % or more distinct values) "
        "and named like one (`id`, `customer_id`, `key`, `uuid`), or short text unique per row "
        "(a name, a code), or a row counter. It is left out of the features, as `--id` would be; "
        "its values that recur in a later split are counted (warning)."
    ),
    why=(
        "A key cannot generalise: a model that uses it memorises rows. Read as a category, every "
        "new key looks like an unseen category, which is not schema drift. A key that recurs in "
        "another split names the same entity twice: a leak to check."
    ),
    example=(
        "A 'passenger_name' column, unique per row: 'passenger_name' is an identifier (100% "
        "distinct values in train), not a feature: left out of the features."
    ),
    fix="Pass it as --id COL (it then names rows in findings), or drop it; split by it when it recurs.",
    decided_in=("data check", "data engine"),
    measured=(
        "a column 95 %+ distinct per row and named like a key (`id`, `customer_id`, `key`, "
        "`uuid`), short text unique per row, or a row counter; left out of the features"
    ),
    reported_when="always (info); its values recurring in a later split (warning)",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class Identifier:
    """An identifier column of train: its distinct fraction, its values recurring per split
    pair ('train/val' -> values), and whether its name reads as a key."""

    column: str
    distinct: float
    shared: dict[str, int]
    key_name: bool


def message(evidence: Identifier) -> str:
    text = (
        f"{evidence.column!r} is an identifier ({evidence.distinct:.0%} distinct values in train), "
        "not a feature: left out of the features"
    )
    if evidence.shared:
        text += f"; {sum(evidence.shared.values()):,} of its values recur in a later split (the same entity twice?)"
    return text


def judge(evidence: Identifier) -> list[Finding]:
    """Always an info finding; a warning when its values recur in a later split."""
    return [
        SPEC.finding(
            message(evidence),
            severity=Severity.WARNING if evidence.shared else Severity.INFO,
            evidence={
                "column": evidence.column,
                "distinct_fraction": evidence.distinct,
                "shared_values": evidence.shared,
                "key_name": evidence.key_name,
            },
        )
    ]
