"""DAT014 `preprocessing-before-split`: features scaled with statistics of all the data before the split.

Collectors:
- `trainmedic check data` (`trainmedic.data._preprocessing`, and the engines through
  `trainmedic.data.engines`) sums each numeric feature per split (count, sum, sum of
  squares, range): it sends `SplitMoments`. A StandardScaler fitted on train leaves *train*
  at mean 0 and std 1 to floating-point precision; one fitted on everything leaves the
  *union* of the splits there and train only close to it (min-max alike: the union spans
  exactly [0, 1]). An exact 0/1 is no accident in real data.
- the scikit-learn audit (`trainmedic.sklearn`) finds, among the continuous columns of the
  data a cross-validation receives, those jointly standardised, min-max scaled or
  mean-imputed, and the first training and validation folds' means: it sends `FoldScaling`.
- Spark MLlib (`trainmedic.spark._mllib`, under `trainmedic run`) observes every fit of a
  preprocessing estimator and every `randomSplit`/tuner split, each DataFrame as the hashes of
  its logical plan (`trainmedic.evidence.mllib`); `mllib_preprocessing_before_split`
  pairs a fit with a split of the same DataFrame.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from trainmedic.evidence.mllib import (
    FIT_OBSERVATION,
    FRAMEWORK,
    PREPROCESSING_ROLES,
    SPLIT_OBSERVATION,
    STATISTICS,
    by_pid,
    plan,
)
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

# `check data`: how exactly a union of splits is standardised or spans [0, 1]
MEAN_TOLERANCE = 1e-6
STD_TOLERANCE = 1e-4
RANGE_TOLERANCE = 1e-9
_MAX_LISTED = 20
# the audit: too few rows to tell; a signature needs half of the continuous columns (min-max
# two: one [0, 1] column can be a raw probability)
AUDIT_MIN_ROWS = 10
AUDIT_MIN_MIN_MAX_COLUMNS = 2
STANDARDISED, MIN_MAX, MEAN_IMPUTED = "standardised", "min-max", "mean-imputed"
_SIGNATURE_WORDS = {
    STANDARDISED: "standardised (mean 0, std 1)",
    MIN_MAX: "min-max scaled to [0, 1]",
    MEAN_IMPUTED: "mean-imputed",
}


def _example() -> TablesExample:
    """X = StandardScaler().fit_transform(X) before train_test_split: train + test together
    have mean 0 and std 1 exactly, train alone does not."""
    import random  # examples only: a clean run does not load it

    rng = random.Random(0)
    raw = [rng.gauss(50, 10) for _ in range(400)]
    mean = sum(raw) / len(raw)
    std = (sum((v - mean) ** 2 for v in raw) / len(raw)) ** 0.5
    scaled = [(v - mean) / std for v in raw]
    train, test = rows(300, seed=0), rows(100, seed=1)
    train["x1"], test["x1"] = scaled[:300], scaled[300:]
    return tables(train=train, test=test)


SPEC = FindingSpec(
    code="DAT014",
    slug="preprocessing-before-split",
    severity=Severity.ERROR,
    title="Preprocessing fitted before the split",
    what=(
        "Features were scaled/imputed/encoded with statistics of all the data before the "
        "split, so the validation part was standardised with its own statistics. With Spark "
        "MLlib: a pyspark.ml.feature estimator (a scaler, Imputer, IDF...) fitted on the DataFrame "
        "that randomSplit or a CrossValidator then splits; one that learns categories only "
        "(StringIndexer, OneHotEncoder) is info."
    ),
    why="Information from the validation data leaks into training: the validation score is optimistic.",
    example=(
        "X = StandardScaler().fit_transform(X); X_train, X_test = train_test_split(X). "
        "Seen in the data: the union of train and test has mean 0 and std 1 to floating-point "
        "precision (or spans exactly [0, 1]) while train alone does not; a scaler fitted on "
        "train leaves train itself exactly standardised."
    ),
    fix="Put preprocessing inside a Pipeline/ColumnTransformer fitted on the training fold.",
    decided_in=("run events", "data check", "data engine", "sklearn audit"),
    measured=(
        "per numeric feature, from per-split sums: the union of train with val/test is "
        "standardised exactly (mean 0 ± 1e-6, std 1 ± 1e-4) or spans exactly [0, 1], train alone "
        "is not"
    ),
    reported_when="any feature",
    example_input=_example,
)

AUDIT_FIX = (
    "Pass the raw features and put the transform in the model: "
    "make_pipeline(StandardScaler(), model) (or SimpleImputer / a ColumnTransformer) so "
    "each training fold fits it alone."
)


@dataclass(frozen=True, slots=True)
class Moments:
    """Count, sum, sum of squares and range of a numeric column: enough to compare scaling across splits."""

    n: int
    total: float
    squares: float
    low: float
    high: float
    fractional: bool  # a value that is not a whole number (a 0/1 flag also spans [0, 1])

    def __add__(self, other: Moments) -> Moments:
        return Moments(
            self.n + other.n,
            self.total + other.total,
            self.squares + other.squares,
            min(self.low, other.low),
            max(self.high, other.high),
            self.fractional or other.fractional,
        )

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else float("nan")

    @property
    def std(self) -> float:  # ddof=0, as StandardScaler
        return math.sqrt(max(self.squares / self.n - self.mean**2, 0.0)) if self.n else float("nan")

    def standardised(self) -> bool:
        return self.n > 1 and abs(self.mean) < MEAN_TOLERANCE and abs(self.std - 1) < STD_TOLERANCE

    def unit_range(self) -> bool:
        return abs(self.low) < RANGE_TOLERANCE and abs(self.high - 1) < RANGE_TOLERANCE


@dataclass(frozen=True, slots=True)
class SplitMoments:
    """`check data`: the evaluation splits (train first), train's numeric features, and the
    `Moments` of each split's numeric columns (split -> column -> moments)."""

    splits: Sequence[str]
    numeric: Sequence[str]
    moments: dict[str, dict[str, Moments]]


@dataclass(frozen=True, slots=True)
class ScaledTogether:
    """What `check data` reports: the union of splits scaled together (train first), its
    jointly scaled columns (column -> how), and how many numeric columns were compared."""

    splits: list[str]
    joint: dict[str, dict[str, object]]
    compared: int


@dataclass(frozen=True, slots=True)
class FoldScaling:
    """The scikit-learn audit: continuous columns (`hit`, of `columns`) that carry a
    `signature` (STANDARDISED, MIN_MAX or MEAN_IMPUTED) over `where`, the data before the split.

    `constant_scale`: the min-max columns lie on one lattice k/d (pixels / 255), a constant,
    not fitted statistics. `details` are the signature's own measurements (evidence).
    `estimator` is the class name of the model the folds train, None where the audit was
    given none (a `train_test_split` splits data, not a model's training); `folds` is how
    many train/validation splits were compared (1: a training and a validation set)."""

    signature: str
    hit: list[int]
    columns: int
    where: str
    estimator: str | None
    pipeline: bool
    train_fold_mean: list[float]
    validation_fold_mean: list[float]
    details: dict[str, Any]
    constant_scale: bool = False
    folds: int = 1


# -- check data -----------------------------------------------------------------------------------
def _subsets(others: Sequence[str]) -> list[tuple[str, ...]]:
    """Larger unions first: train+val+test, then train+val, train+test."""
    return [c for size in range(len(others), 0, -1) for c in combinations(others, size)]


def _jointly_scaled(
    group: Sequence[str], columns: Sequence[str], moments: dict[str, dict[str, Moments]]
) -> dict[str, dict[str, object]]:
    joint: dict[str, dict[str, object]] = {}
    for column in columns:
        parts = [moments[s][column] for s in group]
        union = parts[0]
        for part in parts[1:]:
            union = union + part
        train = parts[0]
        if union.standardised() and not train.standardised():
            joint[column] = {
                "scaling": "standard",
                "union_mean": float(f"{union.mean:.3g}"),
                "union_std": round(union.std, 6),
                "train_mean": round(train.mean, 6),
                "train_std": round(train.std, 6),
            }
        elif union.unit_range() and not train.unit_range() and union.fractional:
            joint[column] = {
                "scaling": "min-max",
                "union_range": [union.low, union.high],
                "train_range": [round(train.low, 6), round(train.high, 6)],
            }
    return joint


def message(evidence: FoldScaling | ScaledTogether) -> str:
    if isinstance(evidence, FoldScaling):
        outside = "" if evidence.pipeline else "; the preprocessing sits outside a Pipeline"
        scored = (
            "every validation fold helped fit the transform it was scored through"
            if evidence.folds > 1
            else "the validation rows helped fit the transform they are scored through"
        )
        return (
            f"{len(evidence.hit)} of {evidence.columns} numeric columns were "
            f"{_SIGNATURE_WORDS[evidence.signature]} with statistics of {evidence.where}: {scored}{outside}"
        )
    names, joint = evidence.splits, evidence.joint
    first = next(iter(joint))
    detail = joint[first]
    union = " + ".join(names)
    how = (
        f"mean {detail['union_mean']}, std {detail['union_std']} over {union}; "
        f"train alone mean {detail['train_mean']}, std {detail['train_std']}"
        if detail["scaling"] == "standard"
        else f"range {detail['union_range']} over {union}; train alone {detail['train_range']}"
    )
    return (
        f"{len(joint)} of {evidence.compared} numeric features were scaled on {union} together, "
        f"not on train alone (e.g. {first!r}: {how})"
    )


def fix(evidence: FoldScaling | SplitMoments) -> str:
    return AUDIT_FIX if isinstance(evidence, FoldScaling) else SPEC.fix


def judge(evidence: SplitMoments | FoldScaling) -> list[Finding]:
    if isinstance(evidence, FoldScaling):
        return _audit(evidence)
    splits, moments = evidence.splits, evidence.moments
    if len(splits) < 2:
        return []
    train = splits[0]
    for others in _subsets(splits[1:]):
        group = [train, *others]
        columns = [c for c in evidence.numeric if all(c in moments[s] for s in others)]
        joint = _jointly_scaled(group, columns, moments)
        if joint:  # smaller unions would repeat it
            together = ScaledTogether(list(group), joint, len(columns))
            return [
                SPEC.finding(
                    message(together),
                    evidence={
                        "splits": together.splits,
                        "features": dict(list(joint.items())[:_MAX_LISTED]),
                        "scaled_features": len(joint),
                    },
                )
            ]
    return []


# -- the scikit-learn audit -----------------------------------------------------------------------
def _enough(evidence: FoldScaling) -> bool:
    """Half of the continuous columns carry the signature (min-max: two, not a constant scale)."""
    hit, columns = evidence.hit, evidence.columns
    half = bool(hit) and len(hit) * 2 >= columns
    if evidence.signature == MIN_MAX:
        return len(hit) >= AUDIT_MIN_MIN_MAX_COLUMNS and half and not evidence.constant_scale
    if evidence.signature == MEAN_IMPUTED:
        return bool(hit)
    return half


def _audit(evidence: FoldScaling) -> list[Finding]:
    if not _enough(evidence):
        return []
    details = {
        **evidence.details,
        "columns": evidence.hit[:_MAX_LISTED],
        "columns_total": evidence.columns,
        "first_train_fold_mean": evidence.train_fold_mean,
        "first_validation_fold_mean": evidence.validation_fold_mean,
        "folds": evidence.folds,
    }
    if evidence.estimator is not None:  # a split of data alone trains no model to name
        details.update(estimator=evidence.estimator, estimator_is_pipeline=evidence.pipeline)
    return [SPEC.finding(message(evidence), evidence=details, fix=fix(evidence))]


# -- Spark MLlib ----------------------------------------------------------------------------------
def _fitted_on_split_data(fit: dict[str, Any], split: dict[str, Any]) -> bool:
    """The fit saw rows of every part: its DataFrame and the split one derive one from the other,
    and the fit's is not one of the parts (a part, or something made from one, is fine)."""
    fitted, split_plan = plan(fit), plan(split)
    if not (fitted.derives_from(split_plan) or split_plan.derives_from(fitted)):
        return False
    return not any(part in fitted.nodes for part in split.get("parts") or ())


def _name(fit: dict[str, Any]) -> str:
    within = fit.get("within")
    return f"{fit['estimator']} (a stage of {within})" if within else str(fit["estimator"])


def mllib_preprocessing_before_split(record: RunRecord) -> list[Finding]:
    """A preprocessing estimator fitted on rows that a split of the same process then sends to
    validation; one that learns categories only (indexing) is info."""
    fits = by_pid(record, FIT_OBSERVATION)
    found: list[Finding] = []
    for pid, splits in by_pid(record, SPLIT_OBSERVATION).items():
        preprocessing = [f for f in fits.get(pid, []) if f.get("role") in PREPROCESSING_ROLES]
        for split in splits:
            leaky = [f for f in preprocessing if _fitted_on_split_data(f, split)]
            if leaky:
                found.append(_mllib_finding(leaky, split, pid))
    return found


def _mllib_finding(leaky: Sequence[dict[str, Any]], split: dict[str, Any], pid: int) -> Finding:
    names = list(dict.fromkeys(_name(f) for f in leaky))
    statistics = any(f.get("role") == STATISTICS for f in leaky)
    method = str(split.get("method", "randomSplit"))
    if method == "randomSplit":
        splitter = f"randomSplit({split.get('weights')})"
        held_out = "the held-out part was transformed with statistics of its own rows"
        fix = (
            "Split first: train, test = df.randomSplit(...); fit the Pipeline (with its "
            f"{leaky[0]['estimator']}) on train only and transform test with the fitted PipelineModel."
        )
    else:
        splitter = f"{method} (its folds)"
        held_out = "each validation fold was transformed with statistics of its own rows"
        fix = (
            f"Put {leaky[0]['estimator']} inside the Pipeline that {method} fits, so each fold fits it "
            "on its training rows alone."
        )
    if not statistics:
        held_out = "the categories of the held-out rows are known to the encoding (a mild leak)"
    message = f"{', '.join(names)} fitted on the DataFrame that {splitter} then split: {held_out}"
    evidence = {
        "framework": FRAMEWORK,
        "estimators": names,
        "split": method,
        "weights": split.get("weights"),
    }
    return SPEC.finding(
        message, evidence=evidence, fix=fix, severity=None if statistics else Severity.INFO, pid=pid
    )


RULES: tuple[Rule, ...] = (mllib_preprocessing_before_split,)
