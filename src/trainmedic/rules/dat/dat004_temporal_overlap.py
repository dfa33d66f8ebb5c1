"""DAT004 `temporal-overlap`: a later split holds times earlier than the latest training time.

Collector: `trainmedic check data` with `--time COL` (`trainmedic.data._leakage`, and the
engines through `trainmedic.data.engines`) counts the rows of a later split timed before the
latest time of an earlier one: it sends a `TemporalOverlap`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows


def _example() -> TablesExample:
    """A random split of a time series: test days fall inside the training period."""
    train, test = rows(300, seed=0), rows(100, seed=1)
    train["day"] = list(range(300))
    test["day"] = [3 * i for i in range(100)]
    return TablesExample({"train": train, "test": test}, time="day")


SPEC = FindingSpec(
    code="DAT004",
    slug="temporal-overlap",
    severity=Severity.ERROR,
    title="Later split holds earlier times",
    what="A later split contains timestamps earlier than the latest training timestamp.",
    why="The model is trained on the future of what it is evaluated on: a forecast score it cannot reach.",
    example="A random split of a time series.",
    fix="Split by time: everything in validation/test after the last training timestamp.",
    decided_in=("data check", "data engine"),
    measured="rows of a later split before the latest time of an earlier one",
    reported_when="any row",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class TemporalOverlap:
    """Rows of `splits[1]` (of `total`) timed before `latest`, the latest time of `splits[0]`;
    `earliest` is the later split's earliest time."""

    splits: tuple[str, str]
    column: str
    total: int
    rows: int
    examples: list[object]  # ids of those rows, read order
    latest: object
    earliest: object


def message(evidence: TemporalOverlap) -> str:
    earlier, later = evidence.splits
    rows = evidence.rows
    return (
        f"{rows:,} {later} rows ({rows / evidence.total:.1%}) are timed before the latest "
        f"{earlier} time {evidence.latest}"
    )


def judge(evidence: TemporalOverlap) -> list[Finding]:
    if evidence.rows == 0:
        return []
    earlier, later = evidence.splits
    return [
        SPEC.finding(
            message(evidence),
            evidence={
                "splits": [earlier, later],
                "column": evidence.column,
                "rows": evidence.rows,
                "fraction": round(evidence.rows / evidence.total, 6),
                f"{earlier}_latest": str(evidence.latest),
                f"{later}_earliest": str(evidence.earliest),
                "example_rows": {later: evidence.examples},
            },
        )
    ]
