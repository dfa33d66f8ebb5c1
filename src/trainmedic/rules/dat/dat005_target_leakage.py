"""DAT005 `target-leakage`: a feature, or a few numeric features together, give the label away.

Collector: `trainmedic check data` (`trainmedic.data._predictability`, called by
`trainmedic.data._leakage`) fits a histogram "tree" per feature on half of the training rows
and scores it on the other half; it sends the label and every feature's `FeatureScore`,
best first, the near-deterministic features measured against the rest of the table
(`AgainstRest`, classes) and the least-squares fits of a few numeric features (`LinearFit`,
regression), as `Predictability`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

# One feature alone: held-out normalised accuracy (classes) or R² (numbers). At COPY_SCORE
# (classes) or COPY_R2 (numbers, binned or linear: residuals 1 % of the label's spread, where
# a quarterly series that trends with the label stays near 0.999), a copy or a code of the
# label, whatever the rest of the table says.
COPY_SCORE = 0.99
COPY_R2 = 0.9999
TARGET_LEAKAGE_SCORE = 0.95
# A feature from TARGET_LEAKAGE_SCORE up, or one that ranks the classes almost without error
# (a threshold rule, a code that implies the outcome), is reported when the rest of the table
# does far worse: at most REST_CEILING (AUC, or the best other feature's R²) and
# REST_ERROR_RATIO times its errors or more. A relation nothing else in the table
# corroborates is a definition, not a finding; a legitimately strong feature has company:
# iris' petal width (accuracy 0.96 on 56 held-out rows, AUC 0.995) is matched by its petal
# length (AUC 0.988), a trending series (GDP against consumption, R² 0.99) by every other.
NEAR_DETERMINISTIC_AUC = 0.975
REST_CEILING = 0.95
REST_ERROR_RATIO = 4.0
# The same holds for one class against the others: a lab value that ranks positives against
# negatives and invalids almost without error leaks the positives, however little it says
# about negatives against invalids (its weighted AUC then stays low).
# A column filled after the outcome holds one value (0, a default, missing) where the outcome
# did not happen: one value for DEFAULT_SHARE or more of a class's rows, where a measurement
# varies. Columns recorded with it or computed from it (spending over income beside
# spending) rank the classes as well and cannot vouch for it: such a feature is measured
# against the rest of the table without the other near-deterministic features. A class of
# fewer than DEFAULT_MIN_ROWS rows can share a value by chance (a feature at 90 % on one
# value takes it on all of 50 rows in 0.5 % of draws).
DEFAULT_SHARE = 0.99
DEFAULT_MIN_ROWS = 50
# A few numeric features whose least-squares fit leaves under 1 % of the label's variance
# (residuals a tenth of its spread) on held-out rows: the label is computed from them (a
# mean, a sum, a difference). A measured quantity carries its own noise: scikit-learn's
# diabetes table reaches 0.53 with three features (benchmarks/data_real_tables.py). And
# together they leave a LINEAR_GAIN-th or less of what the best feature alone leaves: series
# that trend together (GDP against consumption and population, 0.9993, consumption alone
# 0.998) fit each other closely without one being computed from the others.
LINEAR_R2 = 0.99
LINEAR_GAIN = 10.0


def _example() -> TablesExample:
    """A 'refund_issued' column in a churn data set: it is the label, written after the outcome."""
    train = rows(400, seed=0)
    train["refund_issued"] = ["yes" if y else "no" for y in train["y"]]
    return tables(train=train)


SPEC = FindingSpec(
    code="DAT005",
    slug="target-leakage",
    severity=Severity.ERROR,
    title="A feature gives the label away",
    what=(
        "A single feature predicts the label almost perfectly, or a few numeric features "
        "reconstruct a numeric label."
    ),
    why=(
        "Such a feature usually encodes the label (a post-outcome field, a label-derived code, "
        "the quantity the label was cut from, the parts the label was summed from) and will not "
        "exist, or not mean the same, at serving time: the validation score is a mirage."
    ),
    example=(
        "A 'refund_issued' column in a churn data set. Measured per feature with a histogram "
        "'tree' (up to 128 ordered bins for numbers, at least 5 fit rows a bin; a bin per value "
        "for text and codes) fitted on half of the training rows and scored on the other half: "
        "normalised accuracy (acc - majority) / (1 - majority) and the ranking AUC of the bins' "
        "class rates (or of the number itself) for classes, R² for numbers. A unique ID scores "
        "0. Reported: a copy or a code of the label (normalised accuracy 0.99 or more, R² 0.9999 "
        "or more); a feature at 0.95 or more, or a class feature at AUC 0.975 or more, when the "
        "rest of the table does far worse (a naive Bayes over every other feature or the best "
        "other feature: AUC or R² 0.95 at most, and 4 times the feature's errors or more): a "
        "label cut from the feature at a threshold (birth weight < 2,500 g => 'low'), a code "
        "recorded with the outcome (injury severity 'killed' => 'dead'); the same for one class "
        "against the others (a lab value that sets positive tests apart from negative and invalid "
        "ones); a feature that holds one value for 99 % or more of a class's rows (card spending, "
        "0 for every refused application) is measured against the rest without the other "
        "near-deterministic features (spending over income); for a numeric label, "
        "up to three numeric features chosen by orthogonal matching pursuit whose least-squares "
        "fit reaches a held-out R² of 0.99 and leaves a tenth or less of what the best single "
        "feature leaves (minimum and maximum price => price)."
    ),
    fix="Remove the feature, or confirm it is available at prediction time before keeping it.",
    decided_in=("data check",),
    measured=(
        'one-feature histogram "tree" (≤128 bins; numbers in ordered bins of ≥ 5 fit rows, codes '
        "and text a bin per value) fitted on half of train, scored on the other half: normalised "
        "accuracy and ranking AUC (classes), R² (numbers); the rest of the table beside it; for a"
        " numeric label, least-squares fits of up to 3 numeric features (docs/data.md, 'Target leakage')"
    ),
    reported_when=(
        "a copy or code of the label (normalised accuracy ≥ 0.99, R² ≥ 0.999); a feature ≥ 0.95 "
        "(or a class feature at AUC ≥ 0.975, over the classes or for one class against the "
        "others) while the rest of the table reaches ≤ 0.95 with ≥ 4× its errors (without the "  # noqa: RUF001 (a multiplication sign)
        "other near-deterministic features when it holds one value for ≥ 99 % of a class); ≤ 3 "
        "features whose linear fit reaches R² ≥ 0.99 and leaves ≤ 1/10 of what the best single "
        "feature leaves"
    ),
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
    auc: float | None = None  # classes: held-out ranking AUC of the bins' class rates
    class_auc: float | None = None  # classes: the best held-out AUC of one class against the rest
    auc_class: str | None = None  # that class


@dataclass(frozen=True, slots=True)
class ClassDefault:
    """One value (`value`, as text) held by `share` of the rows of class `label_class`."""

    label_class: str
    value: str
    share: float


@dataclass(frozen=True, slots=True)
class AgainstRest:
    """A feature's held-out AUC beside that of a naive Bayes over every other feature (or the
    best other feature): weighted over the classes, and for `label_class`, the class the
    feature ranks best against the others. With a `default`, the other near-deterministic
    features (`left_out`) are not counted in the rest."""

    feature: str
    auc: float
    rest_auc: float
    rest_features: int
    rows: int
    label_class: str | None = None
    class_auc: float | None = None
    rest_class_auc: float | None = None
    default: ClassDefault | None = None
    left_out: list[str] = field(default_factory=list)

    def class_leak(self) -> bool:
        """One class stands apart almost without error, and the rest of the table does far worse."""
        if self.class_auc is None or self.rest_class_auc is None:
            return False
        return self.class_auc >= NEAR_DETERMINISTIC_AUC and far_worse(self.class_auc, self.rest_class_auc)


@dataclass(frozen=True, slots=True)
class LinearFit:
    """Held-out R² of a least-squares fit of the label on `features`."""

    features: tuple[str, ...]
    r2: float
    rows: int


@dataclass(frozen=True, slots=True)
class Predictability:
    """Every feature's held-out score against `label`, best first, and the joint measurements."""

    label: str
    scores: list[FeatureScore]
    alone: list[AgainstRest] = field(default_factory=list)
    linear: list[LinearFit] = field(default_factory=list)


def message(label: str, score: FeatureScore) -> str:
    return (
        f"Feature {score.feature!r} alone predicts {label!r} on held-out rows "
        f"({score.metric} {score.value:.4f}, baseline {score.baseline:.4f})"
    )


def alone_message(label: str, alone: AgainstRest) -> str:
    if far_worse(alone.auc, alone.rest_auc):
        ranked, auc, rest = f"{label!r}", alone.auc, alone.rest_auc
    else:
        ranked, auc = f"{label!r} = {alone.label_class!r} against the other classes", alone.class_auc or 0.0
        rest = alone.rest_class_auc or 0.0
    return (
        f"Feature {alone.feature!r} ranks {ranked} almost without error on held-out rows "
        f"(AUC {auc:.4f}) while the {alone.rest_features} other features together reach "
        f"AUC {rest:.4f}{_default_text(alone)}: the label looks defined from it (a threshold, or a "
        "code recorded with the outcome)"
    )


def _default_text(alone: AgainstRest) -> str:
    default = alone.default
    if default is None:
        return ""
    text = f"; it is {default.value} for {default.share:.0%} of {default.label_class!r} rows"
    if alone.left_out:
        text += f" ({', '.join(repr(f) for f in alone.left_out)}, ranking as well, left out of the rest)"
    return text


def linear_message(label: str, fit: LinearFit) -> str:
    names = " and ".join(repr(f) for f in fit.features)
    return (
        f"{'Features' if len(fit.features) > 1 else 'Feature'} {names} reconstruct {label!r} "
        f"linearly on held-out rows (R² {fit.r2:.5f}): the label looks computed from them "
        "(a mean, a sum or a difference)"
    )


def needs_the_rest(score: FeatureScore) -> bool:
    """A class feature reported only if the rest of the table does far worse (`AgainstRest`)."""
    if score.auc is None or score.score >= COPY_SCORE:
        return False
    best = max(score.auc, score.class_auc or 0.0)
    return score.score >= TARGET_LEAKAGE_SCORE or best >= NEAR_DETERMINISTIC_AUC


def far_worse(own: float, rest: float) -> bool:
    """The rest of the table (AUC or R²) does far worse than the feature alone (`own`)."""
    return rest <= REST_CEILING and 1 - rest >= REST_ERROR_RATIO * (1 - own)


def alone_reported(score: FeatureScore) -> bool:
    """Reported on its own score: a copy or a code of the label."""
    return score.score >= (COPY_R2 if score.auc is None else COPY_SCORE)


def regression_rest(score: FeatureScore, scores: list[FeatureScore]) -> float | None:
    """A numeric label's feature from TARGET_LEAKAGE_SCORE up: the best other feature's R²."""
    if score.auc is not None or score.score < TARGET_LEAKAGE_SCORE or alone_reported(score):
        return None
    return max((s.score for s in scores if s.feature != score.feature), default=0.0)


def reconstructing(fits: list[LinearFit], scores: list[FeatureScore]) -> LinearFit | None:
    """The smallest set of features whose fit reaches `LINEAR_R2` and leaves a `LINEAR_GAIN`-th
    of what the best single feature leaves (one feature: `COPY_R2`, an affine copy); the best
    R² among equals."""
    alone = max([s.score for s in scores] + [f.r2 for f in fits if len(f.features) == 1], default=0.0)
    passing = [
        f
        for f in fits
        if (len(f.features) == 1 and f.r2 >= COPY_R2)
        or (f.r2 >= LINEAR_R2 and LINEAR_GAIN * (1 - f.r2) <= 1 - alone)
    ]
    return min(passing, key=lambda f: (len(f.features), -f.r2)) if passing else None


def _score_evidence(
    score: FeatureScore, top: list[dict[str, object]], threshold: float = TARGET_LEAKAGE_SCORE
) -> dict[str, object]:
    return {
        "feature": score.feature,
        "score": round(score.score, 6),
        "metric": score.metric,
        "value": round(score.value, 6),
        "baseline": round(score.baseline, 6),
        "threshold": threshold,
        "rows_scored": score.rows,
        "top_features": top,
    }


def _class_evidence(alone: AgainstRest) -> dict[str, object]:
    """The one-class view and the class default, where there are some."""
    found: dict[str, object] = {}
    if alone.class_auc is not None and alone.rest_class_auc is not None:
        found["class"] = alone.label_class
        found["class_auc"] = round(alone.class_auc, 6)
        found["rest_class_auc"] = round(alone.rest_class_auc, 6)
    if alone.default is not None:
        found["class_default"] = {
            "class": alone.default.label_class,
            "value": alone.default.value,
            "share": round(alone.default.share, 6),
        }
        found["left_out_of_rest"] = alone.left_out
    return found


def judge(evidence: Predictability) -> list[Finding]:
    """One finding per feature at or above a threshold, and one for a reconstructing set."""
    top: list[dict[str, object]] = [
        {"feature": s.feature, "score": round(s.score, 4)} for s in evidence.scores[:5]
    ]
    found = []
    for score in evidence.scores:
        if not alone_reported(score):
            continue
        copy = COPY_R2 if score.auc is None else COPY_SCORE
        found.append(SPEC.finding(message(evidence.label, score), evidence=_score_evidence(score, top, copy)))
    for score in evidence.scores:
        rest = regression_rest(score, evidence.scores)
        if rest is not None and far_worse(score.score, rest):
            found.append(
                SPEC.finding(
                    message(evidence.label, score) + f"; no other feature reaches R² {rest:.4f}",
                    evidence={**_score_evidence(score, top), "rest_r2": round(rest, 6)},
                )
            )
    named = {f.evidence["feature"] for f in found}
    scores = {s.feature: s for s in evidence.scores}
    for alone in evidence.alone:
        weighted = far_worse(alone.auc, alone.rest_auc)
        if alone.feature in named or not (weighted or alone.class_leak()):
            continue
        own = scores.get(alone.feature)
        if weighted and own is not None and own.score >= TARGET_LEAKAGE_SCORE:
            found.append(  # right on almost every row, and nothing else in the table says so
                SPEC.finding(
                    message(evidence.label, own)
                    + f"; the rest of the table reaches AUC {alone.rest_auc:.4f}",
                    evidence={
                        **_score_evidence(own, top),
                        "auc": round(alone.auc, 6),
                        "rest_auc": round(alone.rest_auc, 6),
                        "rest_features": alone.rest_features,
                    },
                )
            )
            continue
        found.append(
            SPEC.finding(
                alone_message(evidence.label, alone),
                evidence={
                    "feature": alone.feature,
                    "metric": "held-out AUC",
                    "auc": round(alone.auc, 6),
                    "rest_auc": round(alone.rest_auc, 6),
                    **_class_evidence(alone),
                    "rest_features": alone.rest_features,
                    "threshold": NEAR_DETERMINISTIC_AUC,
                    "rest_error_ratio": REST_ERROR_RATIO,
                    "rows_scored": alone.rows,
                    "top_features": top,
                },
            )
        )
    fit = reconstructing(evidence.linear, evidence.scores)
    if fit is not None and not (len(fit.features) == 1 and fit.features[0] in named):
        found.append(
            SPEC.finding(
                linear_message(evidence.label, fit),
                evidence={
                    "feature": fit.features[0],
                    "features": list(fit.features),
                    "metric": "held-out R² of a least-squares fit",
                    "r2": round(fit.r2, 6),
                    "threshold": LINEAR_R2,
                    "rows_scored": fit.rows,
                    "top_features": top,
                },
            )
        )
    return found
