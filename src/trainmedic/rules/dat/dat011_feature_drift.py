"""DAT011 `feature-drift`: a feature's distribution differs between train and another split.

Collector: `trainmedic check data` (`trainmedic.data._parity`) tests each common feature of
train against every later split: the KS test and PSI over train-quantile bins for numbers,
chi-square, PSI and Cramér's V for categories (on seeded samples of at most 100,000 rows
per split). It sends a `Drift` per feature, as `Comparison`.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

DRIFT_P_VALUE = 0.001  # drift must be significant ...
DRIFT_PSI = 0.2  # ... and large: PSI at least this,
DRIFT_EFFECT = 0.2  # or KS statistic / Cramér's V at least this
_MAX_LISTED = 20


def _example() -> TablesExample:
    """'x1' moved by 3 standard deviations between train and serving."""
    serving = rows(300, seed=1)
    serving["x1"] = [float(v) + 3 for v in serving["x1"]]
    return tables(train=rows(300, seed=0), serving=serving)


SPEC = FindingSpec(
    code="DAT011",
    slug="feature-drift",
    severity=Severity.WARNING,
    title="Feature distribution drifted",
    what="A feature's distribution differs between splits or between training and serving (statistic, p-value, PSI).",
    why="The model is evaluated or served on a different population than it learned.",
    example=(
        "'price' PSI 0.41 between train and serving after a currency change. Numbers: KS test + "
        "PSI over 10 train-quantile bins; categories: chi-square + PSI + Cramér's V. Reported "
        "when p < 0.001 and PSI >= 0.2 or the effect size >= 0.2 (seeded samples of 100,000 "
        "rows per split above that), worst feature first."
    ),
    fix="Find the cause (pipeline change, new population); retrain on representative data or fix the pipeline.",
    decided_in=("data check",),
    measured=("KS + PSI (numbers), chi-square + PSI + Cramér's V (categories), train vs every other split"),
    reported_when="p < 0.001 and (PSI ≥ 0.2 or effect ≥ 0.2)",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class Drift:
    """One feature's distribution shift between two splits: the test used, its p-value and effect size."""

    feature: str
    test: str
    statistic: float
    p_value: float
    psi: float
    effect: float
    effect_name: str

    @property
    def drifted(self) -> bool:
        return self.p_value < DRIFT_P_VALUE and (self.psi >= DRIFT_PSI or self.effect >= DRIFT_EFFECT)

    def as_evidence(self) -> dict[str, object]:
        return {
            "feature": self.feature,
            "test": self.test,
            "statistic": round(self.statistic, 6),
            "p_value": float(f"{self.p_value:.3g}"),
            "psi": round(self.psi, 4),
            self.effect_name: round(self.effect, 4),
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every measured feature of train against `split`; `sampled_rows` when either side was
    sampled to that many rows."""

    split: str
    drifts: list[Drift]
    sampled_rows: int | None = None


def _drifted(evidence: Comparison) -> list[Drift]:
    """The drifted features, largest PSI first."""
    return sorted((d for d in evidence.drifts if d.drifted), key=lambda d: -d.psi)


def message(evidence: Comparison) -> str:
    drifted = _drifted(evidence)
    worst = drifted[0]
    return (
        f"{len(drifted)} of {len(evidence.drifts)} features drifted between train and {evidence.split} "
        f"(worst: {worst.feature!r} PSI {worst.psi:.2f}, {worst.effect_name} {worst.effect:.2f})"
    )


def judge(evidence: Comparison) -> list[Finding]:
    drifted = _drifted(evidence)
    if not drifted:
        return []
    details: dict[str, object] = {
        "splits": ["train", evidence.split],
        "features": [d.as_evidence() for d in drifted[:_MAX_LISTED]],
        "drifted": len(drifted),
        "compared": len(evidence.drifts),
        "thresholds": {"p_value": DRIFT_P_VALUE, "psi": DRIFT_PSI, "effect": DRIFT_EFFECT},
    }
    if evidence.sampled_rows is not None:
        details["sampled_rows"] = evidence.sampled_rows
    return [SPEC.finding(message(evidence), evidence=details)]
