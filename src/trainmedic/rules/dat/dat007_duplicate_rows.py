"""DAT007 `duplicate-rows`: duplicate examples within a split.

Collector: `trainmedic check data` (`trainmedic.data._quality`, and the engines through
`trainmedic.data.engines`) counts, per split (serving left out: it repeats requests by
nature), the rows equal to an earlier row, features and label alike, and measures how many
chance gives in that feature space: it sends `RepeatedRows`. Within chance, `note` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.evidence.chance import Chance
from trainmedic.evidence.examples import Located
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, head, joined, rows, tables


def _example() -> TablesExample:
    """The same 100 rows appended twice by an export job."""
    train = rows(300, seed=0)
    return tables(train=joined(train, head(train, 100)))


SPEC = FindingSpec(
    code="DAT007",
    slug="duplicate-rows",
    severity=Severity.WARNING,
    title="Duplicate examples within a split",
    what="Duplicate examples within a split.",
    why="Duplicates weigh some examples more and, split later, leak across splits.",
    example="The same 2,000 rows appended twice by an export job.",
    fix="Drop exact duplicates (df.drop_duplicates()) unless the repetition is intended.",
    decided_in=("data check", "data engine", "fine-tune data"),
    measured="rows equal (features and label) to an earlier row of the same split",
    reported_when="beyond chance (warning)",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class RepeatedRows:
    """Rows of `split` (of `total`) equal to an earlier row of it."""

    split: str
    total: int
    extra: int  # rows that repeat an earlier row
    distinct: int  # distinct rows that repeat
    examples: list[object]  # ids of repeating rows, read order
    chance: Chance  # rows whose features and label occur more than once, against chance


def message(evidence: RepeatedRows) -> str:
    extra = evidence.extra
    return f"{extra:,} rows of {evidence.split} ({extra / evidence.total:.1%}) repeat an earlier row"


def note(evidence: RepeatedRows) -> str | None:
    """What the report says of repeats that chance explains (no finding then)."""
    if evidence.extra == 0 or evidence.chance.beyond_chance:
        return None
    return (
        f"{evidence.split}: {evidence.extra:,} rows repeat an earlier row, as chance predicts in a "
        f"feature space of ~{evidence.chance.combinations:,.0f} combinations: not reported as duplicates"
    )


def judge(evidence: RepeatedRows) -> list[Finding]:
    if evidence.extra == 0 or not evidence.chance.beyond_chance:
        return []
    return [
        SPEC.finding(
            message(evidence),
            evidence={
                "split": evidence.split,
                "duplicate_rows": evidence.extra,
                "fraction": round(evidence.extra / evidence.total, 6),
                "distinct_duplicated": evidence.distinct,
                "example_rows": evidence.examples,
                **evidence.chance.evidence(),
            },
        )
    ]


# -- fine-tuning examples (`check data` on JSONL / Parquet in TRL's formats) --------------------
@dataclass(frozen=True, slots=True)
class RepeatedExamples:
    """Examples of `split` (of `total`) whose texts equal an earlier example's; `distinct`
    examples repeat."""

    split: str
    total: int
    distinct: int
    where: Located
    noun: str = "example"  # "pair": a preference pair (prompt, chosen and rejected all repeat)


def judge_examples(evidence: RepeatedExamples) -> list[Finding]:
    count, noun = evidence.where.count, evidence.noun
    if count == 0:
        return []
    message = (
        f"{count:,} of {evidence.total:,} {evidence.split} {noun}s ({count / evidence.total:.1%}) "
        f"{'repeats' if count == 1 else 'repeat'} an earlier {noun} word for word ({evidence.where.words()})"
    )
    fix = (
        f"Remove the repeated {noun}s (keep the first of each) unless the repetition is intended: "
        f"each copy weighs its {noun} more in training, and a copy split off later is evaluated "
        f"on a {noun} the model trained on."
    )
    data = {
        "split": evidence.split,
        "repeated_examples": count,
        "fraction": round(count / evidence.total, 6),
        "distinct_repeated": evidence.distinct,
        evidence.where.key: evidence.where.numbers,
    }
    return [SPEC.finding(message, evidence=data, fix=fix)]
