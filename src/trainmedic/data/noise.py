"""Label noise (DAT012): out-of-fold predictions of a fast model + confident learning.

A `HistGradientBoostingClassifier` predicts every training row from folds that
did not see it. Confident learning (Northcutt et al., 2021) then gives each
class j a threshold t_j, the mean predicted probability of j over the rows
labelled j; a row labelled i is suspicious when another class j is confidently
predicted (p_j >= t_j, the most probable such j) *and* the row's own label gets
less than half of t_i. The second condition keeps an uninformative model (one
that predicts the prior everywhere) from flagging half the data; and when the
out-of-fold model barely beats the majority class (random labels, features that
do not carry the label) labels are not judged at all, and the summary says so.

Above `NOISE_MAX_ROWS` training rows a seeded sample is scored and the count is
extrapolated; the evidence says so. Regression targets are not checked.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data.context import Dataset
from trainmedic.data.parity import kind
from trainmedic.data.predictability import is_classification
from trainmedic.findings import Finding
from trainmedic.lazyclass import lazy_dataclass
from trainmedic.rules.data import LABEL_NOISE, LABEL_NOISE_FRACTION

NOISE_MAX_ROWS = 50_000
FOLDS = 3
SELF_CONFIDENCE_MARGIN = 0.5
MIN_INFORMATIVENESS = 0.2  # (oof accuracy - majority) / (1 - majority) needed to judge labels
_MAX_CATEGORIES = 250
_SEED = 0


@lazy_dataclass(frozen=True, slots=True)
class NoiseScores:
    """Per scored row: its position in train, given and suspected label, self-confidence."""

    positions: npt.NDArray[np.intp]
    suspicious: npt.NDArray[np.bool_]
    given: npt.NDArray[np.object_]
    suspected: npt.NDArray[np.object_]
    self_confidence: npt.NDArray[np.float64]
    oof_accuracy: float
    baseline: float

    @property
    def informativeness(self) -> float:
        """0 when the model is no better than the majority class, 1 when perfect."""
        return (self.oof_accuracy - self.baseline) / (1 - self.baseline) if self.baseline < 1 else 0.0


def label_noise(data: Dataset) -> list[Finding]:
    label = data.roles.label
    train = data.train
    if label is None or not train.features:
        return []
    target = train.frame[label]
    if not is_classification(target.dropna()):
        return []
    scores = score_label_noise(train.frame, train.features, label)
    if scores is None:
        return []
    if scores.informativeness < MIN_INFORMATIVENESS:
        data.notes.append(
            f"label noise not judged: out-of-fold accuracy {scores.oof_accuracy:.3f} is barely above "
            f"the majority baseline {scores.baseline:.3f} (the features hardly predict the label)"
        )
        return []
    flagged = int(scores.suspicious.sum())
    scored = len(scores.positions)
    fraction = flagged / scored if scored else 0.0
    if fraction < LABEL_NOISE_FRACTION:
        return []
    order = np.argsort(scores.self_confidence[scores.suspicious])[:10]
    rows = scores.positions[scores.suspicious][order]
    ids = train.row_ids(rows)
    examples = [
        {
            "row": row_id,
            "label": _plain(scores.given[scores.suspicious][k]),
            "predicted": _plain(scores.suspected[scores.suspicious][k]),
            "label_probability": round(float(scores.self_confidence[scores.suspicious][k]), 4),
        }
        for row_id, k in zip(ids, order, strict=True)
    ]
    evidence: dict[str, object] = {
        "split": "train",
        "suspicious_rows": flagged,
        "rows_scored": scored,
        "fraction": round(fraction, 6),
        "threshold": LABEL_NOISE_FRACTION,
        "model": f"HistGradientBoostingClassifier, {FOLDS}-fold out-of-fold",
        "out_of_fold_accuracy": round(scores.oof_accuracy, 4),
        "most_suspicious": examples,
    }
    message = (
        f"{flagged:,} of {scored:,} training labels ({fraction:.1%}) are contradicted by "
        "out-of-fold predictions"
    )
    if scored < len(train):
        evidence["sampled"] = f"seeded sample of {scored:,} of {len(train):,} rows"
        evidence["estimated_rows"] = round(fraction * len(train))
        message += f" (sample; about {round(fraction * len(train)):,} rows in all)"
    return [LABEL_NOISE.finding(message, evidence=evidence)]


def score_label_noise(frame: pd.DataFrame, features: list[str], label: str) -> NoiseScores | None:
    """Out-of-fold probabilities and the confident-learning verdict per scored row."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from threadpoolctl import threadpool_limits

    known = np.flatnonzero(frame[label].notna().to_numpy())
    if len(known) > NOISE_MAX_ROWS:
        known = np.sort(np.random.default_rng(_SEED).choice(known, NOISE_MAX_ROWS, replace=False))
    subset = frame.iloc[known]
    classes, uniques = pd.factorize(subset[label])
    counts = np.bincount(classes)
    judged = counts[classes] >= FOLDS * 2  # a class needs a few rows in every fold to be judged
    if len(np.unique(classes[judged])) < 2:
        return None
    known, subset = known[judged], subset[judged]
    classes, uniques = pd.factorize(subset[label])
    model = HistGradientBoostingClassifier(
        max_iter=50,
        learning_rate=0.2,
        max_leaf_nodes=15,
        min_samples_leaf=40,  # smooth probabilities: a leaf of a few rows memorises their labels
        l2_regularization=1.0,
        early_stopping=False,
        categorical_features="from_dtype",
        random_state=_SEED,
    )
    folds = StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=_SEED)
    # One OpenMP thread: on a busy or small machine (CI, a training box already at work) the
    # default busy-waiting threads cost 10x the CPU time for the same result.
    with threadpool_limits(limits=1):
        probs = cross_val_predict(
            model, model_matrix(subset, features), classes, cv=folds, method="predict_proba"
        )
    suspicious, suspected, self_conf = confident_learning(np.asarray(probs, dtype=np.float64), classes)
    labels = np.asarray(uniques, dtype=object)
    return NoiseScores(
        positions=known,
        suspicious=suspicious,
        given=labels[classes],
        suspected=labels[suspected],
        self_confidence=self_conf,
        oof_accuracy=float(np.mean(np.argmax(probs, axis=1) == classes)),
        baseline=float(np.bincount(classes).max() / len(classes)),
    )


def confident_learning(
    probs: npt.NDArray[np.float64], labels: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """(suspicious, confidently predicted class, probability of the given label) per row."""
    n, k = probs.shape
    thresholds = np.array([probs[labels == j, j].mean() if np.any(labels == j) else 1.0 for j in range(k)])
    above = probs >= thresholds[None, :]
    candidate = np.where(above, probs, -1.0)
    suspected = np.argmax(candidate, axis=1)
    has_confident = candidate[np.arange(n), suspected] >= 0
    self_conf = probs[np.arange(n), labels]
    suspicious = (
        has_confident & (suspected != labels) & (self_conf < SELF_CONFIDENCE_MARGIN * thresholds[labels])
    )
    return suspicious, suspected.astype(np.intp), self_conf


def model_matrix(frame: pd.DataFrame, features: list[str]) -> pd.DataFrame:
    """Numbers as floats, low-cardinality text as categories; other columns dropped."""
    columns: dict[str, pd.Series] = {}
    for column in features:
        series = frame[column]
        family = kind(series)
        if family in ("number", "bool"):
            columns[column] = pd.Series(series.to_numpy(dtype=np.float64, na_value=np.nan), index=frame.index)
        elif family == "datetime":
            columns[column] = pd.Series(series.astype("int64").to_numpy(dtype=np.float64), index=frame.index)
        elif series.nunique() <= _MAX_CATEGORIES:
            columns[column] = series.astype(str).where(series.notna()).astype("category")
    if not columns:
        return pd.DataFrame({"_constant": np.zeros(len(frame))}, index=frame.index)
    return pd.DataFrame(columns, index=frame.index)


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
