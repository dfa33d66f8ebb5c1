"""DAT009 `class-imbalance`: the minority/majority class ratio is below the threshold, or a
class has only a handful of training rows.

Collectors:
- `trainmedic check data` (`trainmedic.data._quality`, and the engines through
  `trainmedic.data.engines`) counts the training label's classes, most frequent first: it
  sends `ClassCounts`.
- the scikit-learn audit (`trainmedic.sklearn`) counts the classes a classifier's
  cross-validation is scored on, with the scoring it was given: it sends `ScoredClasses`; a
  scorer that stays informative under imbalance (`SUITABLE_IMBALANCE_SCORERS`) is no finding.
- the boosters (`trainmedic._boosting`: XGBoost, LightGBM, CatBoost) count the target's classes
  before training and send a `boosting_imbalance` observation (`BOOSTING_OBSERVATION`) with whether
  class or sample weights are set; `class_weights_missing` reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

CLASS_IMBALANCE_RATIO = 0.1  # minority / majority class count (`check data` and the sklearn audit)
# `check data`: a class with fewer training rows is reported whatever the ratio (when a larger
# class has at least as many). Stratified k-fold cross-validation (k = 5, scikit-learn's
# default) spreads a class over k held-out folds: below 2k rows some fold holds a single
# example of it, whose per-class recall is then 0 % or 100 % and whose precision is often
# undefined, and below k some fold holds none (scikit-learn warns). A table in which every
# class is that small is small, not imbalanced: that is not this finding.
CV_FOLDS = 5
MIN_CLASS_ROWS = 2 * CV_FOLDS
_MAX_LISTED = 20
# Classes the audit judges: a label with more is not a class label worth counting.
AUDIT_MIN_CLASSES, AUDIT_MAX_CLASSES = 2, 1000
# scorers that stay informative under class imbalance (sklearn scorer names)
SUITABLE_IMBALANCE_SCORERS = frozenset(
    {
        "balanced_accuracy",
        "average_precision",
        "roc_auc",
        "roc_auc_ovr",
        "roc_auc_ovo",
        "roc_auc_ovr_weighted",
        "roc_auc_ovo_weighted",
        "f1",
        "f1_macro",
        "f1_weighted",
        "f1_micro",
        "precision",
        "recall",
        "precision_macro",
        "recall_macro",
        "jaccard",
        "matthews_corrcoef",
        "neg_log_loss",
        "neg_brier_score",
    }
)


def _example() -> TablesExample:
    """3 % positives."""
    train = rows(400, seed=0)
    train["y"] = [int(i % 33 == 0) for i in range(400)]
    return tables(train=train)


SPEC = FindingSpec(
    code="DAT009",
    slug="class-imbalance",
    severity=Severity.WARNING,
    title="Class imbalance",
    what=(
        "The minority/majority class ratio is below the threshold, or a class has fewer than "
        "10 training rows while another has at least 10 (too few for per-class metrics in 5-fold "
        "cross-validation, whatever the ratio)."
    ),
    why=(
        "Accuracy looks high while the minority class is ignored, and the default 0.5 threshold "
        "of a probabilistic classifier is wrong for the rare class."
    ),
    example=(
        "99% negatives: predicting 'no' everywhere scores 99% accuracy. Reported when the "
        "minority/majority count ratio of the training labels is below 0.1. Six classes whose "
        "smallest has 6 of 149 rows (11% of the largest): each fold of 5-fold stratified "
        "cross-validation holds one or two of them."
    ),
    fix=(
        "Report PR-AUC, balanced accuracy or F1; use class weights or threshold tuning; "
        "never oversample before splitting."
    ),
    decided_in=("run events", "boosters", "data check", "data engine", "sklearn audit"),
    measured="minority/majority count of training labels; rows per class",
    reported_when="ratio < 0.1, or a class of fewer than 10 rows while another has 10 or more",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class ClassCounts:
    """`check data`: the training label's (class, rows), most frequent first."""

    counts: Sequence[tuple[Any, int]]


@dataclass(frozen=True, slots=True)
class ScoredClasses:
    """The scikit-learn audit: (class, rows) in sorted class order, and the `scoring` given
    (None: the classifier's default, accuracy)."""

    counts: Sequence[tuple[Any, int]]
    scoring: Any


def rare_classes(evidence: ClassCounts) -> list[tuple[Any, int]]:
    """Classes of fewer than `MIN_CLASS_ROWS` rows, fewest first, when a larger class has that many."""
    counts = evidence.counts
    if len(counts) < 2 or max(n for _, n in counts) < MIN_CLASS_ROWS:
        return []
    return sorted(((c, n) for c, n in counts if n < MIN_CLASS_ROWS), key=lambda cn: cn[1])


def _ratio(evidence: ClassCounts | ScoredClasses) -> tuple[tuple[Any, int], tuple[Any, int], float]:
    """(majority, minority, minority/majority): the first most and the last least frequent."""
    if isinstance(evidence, ClassCounts):
        majority, minority = evidence.counts[0], evidence.counts[-1]
    else:  # a stable sort by count, most first
        ordered = sorted(evidence.counts, key=lambda cn: -cn[1])
        majority, minority = ordered[0], ordered[-1]
    return majority, minority, minority[1] / majority[1]


def suitable(scoring: Any) -> bool:
    """The audit's scoring stays informative under imbalance (a callable: the user chose it)."""
    if scoring is None:
        return False
    if isinstance(scoring, str):
        return scoring in SUITABLE_IMBALANCE_SCORERS
    if isinstance(scoring, (list, tuple, set, dict)):
        names = scoring.keys() if isinstance(scoring, dict) else scoring
        return any(isinstance(n, str) and n in SUITABLE_IMBALANCE_SCORERS for n in names) or isinstance(
            scoring, dict
        )
    return True


def message(evidence: ClassCounts | ScoredClasses) -> str:
    (major, most), (minor, least), ratio = _ratio(evidence)
    if isinstance(evidence, ClassCounts):
        rare = rare_classes(evidence)
        if ratio >= CLASS_IMBALANCE_RATIO and rare:
            return _rare_message(evidence, rare, ratio)
        return (
            f"Minority class {minor!r} has {least:,} training rows, "
            f"{ratio:.1%} of the majority class {major!r} ({most:,})"
        )
    scoring = evidence.scoring
    scorer = "accuracy (the default of a classifier)" if scoring is None else repr(scoring)
    total = sum(n for _, n in evidence.counts)
    return (
        f"Minority class {minor!r} has {least:,} rows, "
        f"{ratio:.1%} of the majority class ({most:,}), and the score is {scorer}: "
        f"always predicting {major!r} scores {most / total:.1%}"
    )


def _rare_message(evidence: ClassCounts, rare: list[tuple[Any, int]], ratio: float) -> str:
    total = sum(n for _, n in evidence.counts)
    held = "none or one" if rare[0][1] < CV_FOLDS else "one or two"
    folds = f"stratified {CV_FOLDS}-fold cross-validation holds {held} of them in a held-out fold"
    if len(rare) == 1:
        (cls, n), major = rare[0], evidence.counts[0][0]
        return (
            f"Class {cls!r} has {n:,} training rows of {total:,} ({ratio:.1%} of the majority class "
            f"{major!r}): {folds}, too few for its recall or precision"
        )
    listed = ", ".join(f"{c!r} ({n})" for c, n in rare[:_MAX_LISTED])
    return (
        f"{len(rare)} classes have fewer than {MIN_CLASS_ROWS} training rows of {total:,}: {listed}; "
        f"{folds}, too few for their recall or precision"
    )


def fix(evidence: ClassCounts | ScoredClasses) -> str:
    if isinstance(evidence, ClassCounts):
        _, _, ratio = _ratio(evidence)
        if ratio >= CLASS_IMBALANCE_RATIO and rare_classes(evidence):
            return (
                "Collect more rows of the rare class or merge it with a related one; report its "
                "per-class recall over repeated stratified cross-validation, not one split; use class weights."
            )
        return SPEC.fix
    return (
        "Score with scoring='average_precision' (PR-AUC), 'balanced_accuracy' or 'f1'; "
        "use class_weight='balanced' or threshold tuning; never oversample before splitting."
    )


def judge(evidence: ClassCounts | ScoredClasses) -> list[Finding]:
    counts = evidence.counts
    if isinstance(evidence, ScoredClasses):
        if not AUDIT_MIN_CLASSES <= len(counts) <= AUDIT_MAX_CLASSES:
            return []
    elif len(counts) < 2:
        return []
    _, _, ratio = _ratio(evidence)
    rare = rare_classes(evidence) if isinstance(evidence, ClassCounts) else []
    if ratio >= CLASS_IMBALANCE_RATIO and not rare:
        return []
    if isinstance(evidence, ClassCounts):
        details: dict[str, object] = {
            "split": "train",
            "ratio": round(ratio, 6),
            "threshold": CLASS_IMBALANCE_RATIO,
            "class_counts": {str(k): int(v) for k, v in counts[:_MAX_LISTED]},
            "classes": len(counts),
            "metrics": ["PR-AUC", "balanced accuracy", "F1 (per class / macro)"],
        }
        if rare:
            details["rare_classes"] = {str(c): int(n) for c, n in rare[:_MAX_LISTED]}
            details["min_class_rows"] = MIN_CLASS_ROWS
    else:
        if suitable(evidence.scoring):
            return []
        scoring = evidence.scoring
        details = {
            "class_counts": {str(c): int(n) for c, n in counts},
            "ratio": round(ratio, 6),
            "threshold": CLASS_IMBALANCE_RATIO,
            "scoring": scoring if isinstance(scoring, (str, type(None))) else str(scoring),
            "suggested_scoring": ["average_precision", "balanced_accuracy", "f1"],
        }
    return [SPEC.finding(message(evidence), evidence=details, fix=fix(evidence))]


# -- the boosters (`trainmedic._boosting`): an unweighted imbalanced target ---------------------
#: The boosters' observation of a classification target: class counts, ratio, weighted or not.
BOOSTING_OBSERVATION = "boosting_imbalance"
#: minority / majority class count below which unweighted boosting mostly learns the majority
BOOSTING_IMBALANCE_RATIO = 0.1


def class_weights_missing(record: RunRecord) -> list[Finding]:
    """DAT009 (info) for a booster trained on imbalanced classes with no class or sample weights."""
    found: list[Finding] = []
    for obs in [o.data for o in record.guard_observations if o.check == BOOSTING_OBSERVATION]:
        ratio = obs.get("ratio")
        if obs.get("weighted") or not isinstance(ratio, (int, float)) or ratio >= BOOSTING_IMBALANCE_RATIO:
            continue
        parameter = obs.get("parameter", "class weights")
        found.append(
            SPEC.finding(
                f"{obs.get('framework', 'The booster')} trains on classes at a {ratio:.1%} minority/majority "
                f"ratio with no {parameter} or sample weights",
                evidence=dict(obs),
                fix=(
                    f"Set {parameter} (for binary tasks about negatives/positives = {1 / ratio:.3g}) or "
                    "pass sample weights, and evaluate with PR-AUC (aucpr / average_precision)."
                ),
                severity=Severity.INFO,
            )
        )
    return found


RULES: tuple[Rule, ...] = (class_weights_missing,)
