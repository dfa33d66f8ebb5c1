"""DAT012 `label-noise`: labels confidently contradicted by out-of-fold predictions.

Collector: `trainmedic check data` (`trainmedic.data.noise`) fits out-of-fold models on the
training rows (a seeded sample above 25,000), flags rows by confident learning, and counts
what the model's own temperature-scaled probabilities would flag by themselves, both for the
refitted model and for the first pass fitted on every label: it sends `NoiseScore`, with the
most suspicious rows. A model too weak to tell a hard example from a
wrong label gives an info finding: label quality cannot be judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

LABEL_NOISE_FRACTION = 0.01  # share of training labels contradicted by out-of-fold predictions
MIN_INFORMATIVENESS = 0.5  # normalised out-of-fold accuracy needed to judge labels at all
UNCERTAINTY_MARGIN = 2.0  # flagged rows must exceed what the model's own uncertainty predicts this many times
MIN_FLAGGED = 3
# Where the model is weak, honest labels are hard: between these normalised accuracies the
# yardstick moves from the first-pass model's expectation (labels as hard as the model fitted
# on all of them says) to the refitted model's (labels near-deterministic, as on a clean table).
# Flips at rate e cost a near-perfect model about e / (1 - majority) of normalised accuracy: 5-10 %
# flips leave 0.70-0.91 on real tables whose clean labels a model gets 0.92-0.97 right
# (benchmarks/label_noise_yardstick.py); honest labels that leave a model under 0.65 are hard.
WEAK_MODEL = 0.65
STRONG_MODEL = 0.75
# The flagged rows must also be wrong labels by the model's own calibration: fitted to every
# judged label, a temperature (honest outcomes the features predict imperfectly, rarer where
# the model is surer) beside a share of labels flipped at random whatever the features (an
# annotation bug), the flipped share must reach the same bar as the flagged rows
# (LABEL_NOISE_FRACTION of the rows, MIN_FLAGGED rows). A strong model that disagrees with a
# few percent of a real outcome (a self-reported vote) finds no flipped share there.


def _example() -> TablesExample:
    """A clean label (x1 > 0) with 5 % of it flipped by an annotation bug."""
    train = rows(600, seed=0)
    train["y"] = [int((float(v) > 0) != (i % 20 == 0)) for i, v in enumerate(train["x1"])]
    return tables(train=train)


SPEC = FindingSpec(
    code="DAT012",
    slug="label-noise",
    severity=Severity.WARNING,
    title="Likely label errors",
    what=(
        "Examples whose given label is confidently contradicted by out-of-fold predictions, more "
        "of them than the model's own uncertainty explains. When the model is too weak to tell a "
        "hard example from a wrong label, an info finding says that label quality cannot be judged."
    ),
    why="Wrong labels cap accuracy, teach the model the errors and mislead evaluation.",
    example=(
        "5% of labels flipped by an annotation tool bug. Out-of-fold probabilities (logistic "
        "regression or gradient boosting, whichever has the lower log loss; 10, 5 or 3 folds by "
        "size; a seeded 25,000-row sample above that), refitted without the rows they flag; "
        "confident learning flags a row when another class clears its per-class threshold and "
        "the given label gets under half of its own. Reported (warning) above 1% of rows, at "
        "least 3, and at least twice the rows the model's probabilities would flag by "
        "themselves (the refitted model's count, widened toward the first pass's, fitted on every "
        "label, as normalised out-of-fold accuracy falls from 0.75 to 0.65: where the model is weak, "
        "honest labels are hard), and when the model's calibration on every label, a temperature "
        "beside a share of labels flipped at random, puts 1% of the rows or more (at least 3) in "
        "that share: a strong model that disagrees with a few percent of a real outcome (a "
        "self-reported vote) widens its temperature instead, and gets a note; under 0.5, labels "
        "are not judged (info)."
    ),
    fix="Review the listed rows first (most suspicious first) and relabel or drop them.",
    decided_in=("data check",),
    measured=(
        "out-of-fold probabilities (logistic regression or gradient boosting, whichever has the "
        "lower log loss; 10/5/3 folds by table size), refitted without the rows they flag, + "
        "confident learning (another class confident, or the given label under a tenth of "
        "chance); rows whose features also carry another label left to DAT006"
    ),
    reported_when=(
        "> 1 % of training labels, at least 3, and at least twice what the model's own "
        "(temperature-scaled) uncertainty predicts: the refitted model's count, widened toward "
        "the first pass's as normalised accuracy falls from 0.75 to 0.65 (warning); model too "
        "weak to judge (info)"
    ),
    example_input=_example,
)

NOT_JUDGED_FIX = (
    "Check labels by hand on a sample (double annotation), or add features that predict the label."
)


@dataclass(frozen=True, slots=True)
class NoiseScore:
    """What the out-of-fold model says of the training labels."""

    oof_accuracy: float
    baseline: float  # majority-class accuracy
    informativeness: float  # (accuracy - baseline) / (1 - baseline)
    model: str
    flagged: int  # rows flagged by confident learning
    scored: int  # rows scored (a sample of `total_rows` above the limit)
    total_rows: int  # rows of train
    expected: float  # rows flagged if every label were drawn from the refitted model's probabilities
    ambiguous: int  # rows whose features, as the model sees them, also carry another label
    most_suspicious: list[dict[str, object]] = field(default_factory=list)  # up to 10, most first
    expected_honest: float = 0.0  # the same from the first-pass model, fitted on every label
    flipped_share: float | None = None  # share of judged labels flipped at random (None: not measured)

    @property
    def fraction(self) -> float:
        return self.flagged / self.scored if self.scored else 0.0

    @property
    def flipped_rows(self) -> float | None:
        """Rows flipped at random by the calibration's estimate (of the judged, unambiguous rows)."""
        if self.flipped_share is None:
            return None
        return self.flipped_share * (self.scored - self.ambiguous)

    def flips_found(self) -> bool:
        """The calibration finds random flips on the same bar as the flagged rows."""
        flips = self.flipped_rows
        if flips is None:
            return True
        return flips >= MIN_FLAGGED and flips >= LABEL_NOISE_FRACTION * self.scored

    @property
    def weakness(self) -> float:
        """0 for a model strong enough that its refitted probabilities are the yardstick, 1 for
        one weak enough that its first-pass probabilities are."""
        return min(max((STRONG_MODEL - self.informativeness) / (STRONG_MODEL - WEAK_MODEL), 0.0), 1.0)

    @property
    def yardstick(self) -> float:
        """Rows honest labels would have flagged: the refitted model's expectation, widened
        toward the first-pass model's as the model weakens.

        The refit leaves out the rows it flags, so on a table whose labels are hard, not
        wrong, it no longer knows how often such labels occur and underestimates them; the
        first pass, fitted on every label, does not, but it absorbs planted errors as well."""
        return self.expected + self.weakness * max(self.expected_honest - self.expected, 0.0)


def judged(evidence: NoiseScore) -> bool:
    """The model is good enough to tell a wrong label from a hard example."""
    return evidence.informativeness >= MIN_INFORMATIVENESS


def message(evidence: NoiseScore) -> str:
    if not judged(evidence):
        return (
            f"Label quality cannot be judged: the best out-of-fold model reaches accuracy "
            f"{evidence.oof_accuracy:.3f} against a majority baseline of {evidence.baseline:.3f}, so its "
            "mistakes are hard examples as much as wrong labels"
        )
    fraction = evidence.fraction
    text = (
        f"{evidence.flagged:,} of {evidence.scored:,} training labels ({fraction:.1%}) are confidently "
        f"contradicted by out-of-fold predictions (the model's own uncertainty accounts for "
        f"{evidence.yardstick:.1f})"
    )
    if evidence.scored < evidence.total_rows:
        text += f" (sample; about {round(fraction * evidence.total_rows):,} rows in all)"
    return text


def note(evidence: NoiseScore) -> str | None:
    """What the report says of flagged rows that pass the count but that no share of random
    flips explains (no finding then): honest outcomes the features predict imperfectly."""
    if not judged(evidence) or evidence.flips_found() or evidence.flagged < MIN_FLAGGED:
        return None
    if evidence.fraction < LABEL_NOISE_FRACTION or evidence.flagged < UNCERTAINTY_MARGIN * evidence.yardstick:
        return None
    return (
        f"label noise: {evidence.flagged:,} of {evidence.scored:,} labels disagree with a confident model, "
        f"but its calibration on every label finds {evidence.flipped_rows or 0.0:.1f} flipped at random: "
        "disagreement that grows rarer where the model is surer is an honest outcome, not an error"
    )


def fix(evidence: NoiseScore) -> str:
    return SPEC.fix if judged(evidence) else NOT_JUDGED_FIX


def judge(evidence: NoiseScore) -> list[Finding]:
    if not judged(evidence):
        return [
            SPEC.finding(
                message(evidence),
                severity=Severity.INFO,
                evidence={
                    "split": "train",
                    "out_of_fold_accuracy": round(evidence.oof_accuracy, 4),
                    "majority_baseline": round(evidence.baseline, 4),
                    "normalised_accuracy": round(evidence.informativeness, 4),
                    "needed": MIN_INFORMATIVENESS,
                    "model": evidence.model,
                },
                fix=fix(evidence),
            )
        ]
    flagged, fraction = evidence.flagged, evidence.fraction
    if (
        fraction < LABEL_NOISE_FRACTION
        or flagged < MIN_FLAGGED
        or flagged < UNCERTAINTY_MARGIN * evidence.yardstick
        or not evidence.flips_found()
    ):
        return []
    details: dict[str, object] = {
        "split": "train",
        "suspicious_rows": flagged,
        "rows_scored": evidence.scored,
        "fraction": round(fraction, 6),
        "threshold": LABEL_NOISE_FRACTION,
        "expected_from_uncertainty": round(evidence.yardstick, 2),
        "expected_from_refitted_model": round(evidence.expected, 2),
        "expected_from_first_pass_model": round(evidence.expected_honest, 2),
        "flipped_at_random_by_calibration": round(evidence.flipped_rows or 0.0, 2),
        "rows_sharing_features_with_another_label": evidence.ambiguous,
        "model": evidence.model,
        "out_of_fold_accuracy": round(evidence.oof_accuracy, 4),
        "most_suspicious": evidence.most_suspicious,
    }
    if evidence.scored < evidence.total_rows:
        details["sampled"] = f"seeded sample of {evidence.scored:,} of {evidence.total_rows:,} rows"
        details["estimated_rows"] = round(fraction * evidence.total_rows)
    return [SPEC.finding(message(evidence), evidence=details)]
