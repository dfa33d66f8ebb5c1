"""DAT008 `missing-values`: missing values above threshold in a feature, or any missing label.

Collector: `trainmedic check data` (`trainmedic.data._quality`, and the engines through
`trainmedic.data.engines`) counts, per split, the rows without a label (`MissingLabels`) and
each feature's missing fraction (`MissingFeatures`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.evidence.examples import Located
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

MISSING_FRACTION = 0.05  # a feature missing in more rows than this is reported
_MAX_LISTED = 20


def _example() -> TablesExample:
    """'income' is empty in 40 % of rows."""
    train = rows(300, seed=0)
    train["income"] = [None if i % 5 < 2 else 30_000 + 100 * i for i in range(300)]
    return tables(train=train)


SPEC = FindingSpec(
    code="DAT008",
    slug="missing-values",
    severity=Severity.WARNING,
    title="Missing values",
    what="Missing values above threshold in a feature, or any missing label.",
    why="Missing labels silently drop or corrupt examples; missing features bias the model when not handled.",
    example=(
        "'income' is empty in 38% of rows (a feature over 5% is a warning); 12 rows have no "
        "label (always an error)."
    ),
    fix="Impute inside the training pipeline (fitted on train only), or drop the column; never train on missing labels.",
    decided_in=("data check", "data engine", "fine-tune data"),
    measured="per column; missing labels are errors",
    reported_when="feature > 5 % missing; any label",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class MissingLabels:
    """Rows of `split` (of `total`) with no value in the label column."""

    split: str
    column: str
    rows: int
    total: int
    examples: list[object]  # ids of those rows, read order


@dataclass(frozen=True, slots=True)
class MissingFeatures:
    """Each feature's missing fraction in `split`, in column order."""

    split: str
    fractions: dict[str, float]


def _over(evidence: MissingFeatures) -> list[tuple[str, float]]:
    """The features over the threshold, worst first (ties in column order)."""
    over = [(str(c), float(v)) for c, v in evidence.fractions.items() if v > MISSING_FRACTION]
    return sorted(over, key=lambda cv: -cv[1])


def message(evidence: MissingLabels | MissingFeatures) -> str:
    if isinstance(evidence, MissingLabels):
        count = evidence.rows
        return (
            f"{count:,} rows of {evidence.split} ({count / evidence.total:.1%}) have no label "
            f"in {evidence.column!r}"
        )
    over = _over(evidence)
    worst, fraction = over[0]
    return (
        f"{len(over)} feature(s) of {evidence.split} are missing in more than "
        f"{MISSING_FRACTION:.0%} of rows (worst: {worst!r} {fraction:.1%})"
    )


def fix(evidence: MissingLabels | MissingFeatures) -> str:
    if isinstance(evidence, MissingLabels):
        return "Drop or label these rows before training; never train on missing labels."
    return SPEC.fix


def judge(evidence: MissingLabels | MissingFeatures) -> list[Finding]:
    if isinstance(evidence, MissingLabels):
        if evidence.rows == 0:
            return []
        return [
            SPEC.finding(
                message(evidence),
                severity=Severity.ERROR,
                evidence={
                    "split": evidence.split,
                    "column": evidence.column,
                    "rows": evidence.rows,
                    "fraction": round(evidence.rows / evidence.total, 6),
                    "example_rows": evidence.examples,
                },
                fix=fix(evidence),
            )
        ]
    over = _over(evidence)
    if not over:
        return []
    return [
        SPEC.finding(
            message(evidence),
            evidence={
                "split": evidence.split,
                "columns": {c: round(v, 6) for c, v in over[:_MAX_LISTED]},
                "threshold": MISSING_FRACTION,
            },
        )
    ]


# -- fine-tuning examples (`check data` on JSONL / Parquet in TRL's formats) --------------------
@dataclass(frozen=True, slots=True)
class EmptyCompletions:
    """Examples of `split` (of `total`) whose `part` is blank: "completion", "assistant turn"
    (the last one of a conversation), "text", or either response of a preference pair."""

    split: str
    part: str
    total: int
    where: Located
    noun: str = "example"  # "pair" for preference pairs (part: EITHER_RESPONSE)


#: The part of a preference pair that is blank: either response.
EITHER_RESPONSE = "chosen or rejected response"


def judge_examples(evidence: EmptyCompletions) -> list[Finding]:
    count, part = evidence.where.count, evidence.part
    if count == 0:
        return []
    message = (
        f"{count:,} of {evidence.total:,} {evidence.split} {evidence.noun}s ({count / evidence.total:.1%}) "
        f"{'has' if count == 1 else 'have'} an empty {part} ({evidence.where.words()})"
    )
    data = {
        "split": evidence.split,
        "part": part,
        "examples": count,
        "fraction": round(count / evidence.total, 6),
        evidence.where.key: evidence.where.numbers,
    }
    return [SPEC.finding(message, severity=Severity.WARNING, evidence=data, fix=_fix(part))]


def _fix(part: str) -> str:
    """What to do about an empty `part`, and what it teaches left as it is."""
    if part == EITHER_RESPONSE:
        return (
            "Write the missing responses or remove these pairs before training: an empty chosen "
            "response teaches the policy to answer with nothing, and an empty rejected one makes a "
            "pair that any answer wins, teaching nothing about quality."
        )
    if part == "text":
        lesson = "an empty text holds nothing to learn"
    else:
        lesson = f"an empty {part} teaches the model to answer with nothing (only its end of turn is left)"
    return f"Write the missing {part}s or remove these examples before training: {lesson}."
