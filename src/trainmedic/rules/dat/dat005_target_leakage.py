"""DAT005 `target-leakage`: a single feature predicts the label almost perfectly.

Collector: `trainmedic check data` (`trainmedic.data._predictability`, called by
`trainmedic.data._leakage`) fits a histogram "tree" per feature on half of the training rows
and scores it on the other half; it sends the label and every feature's `FeatureScore`,
best first, as `Predictability`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

TARGET_LEAKAGE_SCORE = 0.95  # held-out normalised accuracy (or R²) of one feature alone


def _example() -> TablesExample:
    """A 'refund_issued' column in a churn data set: it is the label, written after the outcome."""
    train = rows(400, seed=0)
    train["refund_issued"] = ["yes" if y else "no" for y in train["y"]]
    return tables(train=train)


SPEC = FindingSpec(
    code="DAT005",
    slug="target-leakage",
    severity=Severity.ERROR,
    title="A single feature predicts the label",
    what="A single feature predicts the label almost perfectly.",
    why=(
        "Such a feature usually encodes the label (a post-outcome field, a label-derived code) and "
        "will not exist, or not mean the same, at serving time: the validation score is a mirage."
    ),
    example=(
        "A 'refund_issued' column in a churn data set. Measured per feature with a histogram "
        "'tree' (up to 128 bins) fitted on half of the training rows and scored on the other "
        "half: normalised accuracy (acc - majority) / (1 - majority) for classes, R² for "
        "numbers; 0.95 or more is reported. A unique ID column scores 0 on the held-out half."
    ),
    fix="Remove the feature, or confirm it is available at prediction time before keeping it.",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class FeatureScore:
    """How well one feature alone predicts the label (0 = no better than the baseline)."""

    feature: str
    score: float  # 0 = no better than the baseline, 1 = perfect
    metric: str
    value: float
    baseline: float
    rows: int


@dataclass(frozen=True, slots=True)
class Predictability:
    """Every feature's held-out score against `label`, best first."""

    label: str
    scores: list[FeatureScore]


def message(label: str, score: FeatureScore) -> str:
    return (
        f"Feature {score.feature!r} alone predicts {label!r} on held-out rows "
        f"({score.metric} {score.value:.4f}, baseline {score.baseline:.4f})"
    )


def judge(evidence: Predictability) -> list[Finding]:
    """One finding per feature at or above the threshold."""
    top = [{"feature": s.feature, "score": round(s.score, 4)} for s in evidence.scores[:5]]
    found = []
    for score in evidence.scores:
        if score.score < TARGET_LEAKAGE_SCORE:
            break
        found.append(
            SPEC.finding(
                message(evidence.label, score),
                evidence={
                    "feature": score.feature,
                    "score": round(score.score, 6),
                    "metric": score.metric,
                    "value": round(score.value, 6),
                    "baseline": round(score.baseline, 6),
                    "threshold": TARGET_LEAKAGE_SCORE,
                    "rows_scored": score.rows,
                    "top_features": top,
                },
            )
        )
    return found
