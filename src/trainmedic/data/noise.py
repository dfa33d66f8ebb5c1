"""Label noise (DAT012): out-of-fold probabilities + confident learning, judged against the
model's own uncertainty.

A hard example and a wrong label look alike to any single rule: both are rows the model
gets wrong. Three things separate them here:

1. **An accurate model, or no verdict.** Labels are judged only when the out-of-fold
   model is clearly better than the majority class (normalised accuracy
   `(acc - majority) / (1 - majority)` at least `dat012.MIN_INFORMATIVENESS`). On a hard table
   (a survey where the best model reaches 0.6) every mistake looks like noise, so
   instead of guessing the check says, as an info finding, that label quality cannot be
   judged.
2. **A model fitted to the table's size.** Small tables (under `SMALL_TABLE_ROWS`) get
   10-fold (5-fold up to `MEDIUM_TABLE_ROWS`) predictions from both a regularised
   logistic regression and a gradient-boosted model, and keep the one with the lower
   out-of-fold log loss (the better calibrated); large tables get the gradient-boosted
   model alone on 3 folds.
3. **Confident learning** (Northcutt et al., 2021): class j's threshold t_j is the mean
   probability of j over rows labelled j; a row labelled i is flagged when another class
   clears its threshold and its own label gets under half of t_i. A row is flagged too
   when the model rules its label out (under a tenth of chance, `EXCLUDED_SHARE_OF_CHANCE`)
   though no other class clears its threshold: in a table with a few classes whose
   boundaries overlap, the class a wrong label hides in is rarely confident, but the given
   label is plainly not it. The model's own probabilities, temperature-scaled on the
   rows it trusts (an under-confident model spreads mass into the tails and would excuse
   real errors), then say how many rows it would flag if every label were drawn from them.
   That count underestimates hard, honest labels: the refit leaves out the rows it flags,
   so it no longer knows how often a label like theirs occurs. The first-pass model, fitted
   on every label and temperature-scaled on every judged row, does know, but it absorbs
   planted errors as well. The yardstick (`expected_from_uncertainty`) is the refitted
   count where the model is strong (normalised accuracy from `dat012.STRONG_MODEL`: clean
   labels of a real table are near-deterministic, and 5 % flips leave such a model there)
   and moves to the first-pass count as it weakens to `dat012.WEAK_MODEL`: a
   warning needs the flagged rows to exceed 1 % of the table *and* that yardstick by
   `dat012.UNCERTAINTY_MARGIN` times. And the flagged rows must be errors by the model's own
   calibration on every judged label (`flipped_share`): a temperature beside a share of labels
   flipped at random must put that share on the same bar, or the disagreement is an honest
   outcome the features predict imperfectly (a note says so).
4. **Only rows a model could tell apart.** A row whose feature values, as the model sees
   them, also occur with another label is left out of both counts: on a table of a few
   banded or categorical columns, whole groups of people share one feature row, and no
   label in such a group can be judged wrong from the features. `conflicting-labels`
   (DAT006) asks whether such conflicts exceed chance.

Above `NOISE_MAX_ROWS` training rows a seeded sample is scored and the count is
extrapolated; the evidence says so. Regression targets are not checked. The verdict, its
thresholds and its words are `trainmedic.rules.dat.dat012_label_noise`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._context import Dataset, Split
from trainmedic.data._parity import kind
from trainmedic.data._predictability import is_classification
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat012_label_noise as dat012

NOISE_MAX_ROWS = 25_000  # two model passes (fit, refit without flagged rows) on this sample
SMALL_TABLE_ROWS = 1_000
MEDIUM_TABLE_ROWS = 10_000
SELF_CONFIDENCE_MARGIN = 0.5
EXCLUDED_SHARE_OF_CHANCE = 0.1  # a label under a tenth of 1/k is one the model rules out
MAX_FLIPPED_SHARE = 0.5  # `flipped_share`'s estimate, at most
_STARTS = ((0.0, 0.0), (0.0, 0.05))  # (log temperature, flipped share): none, and some
_MAX_CATEGORIES = 250
_SEED = 0


@dataclass(frozen=True, slots=True)
class NoiseScores:
    """Per scored row: its position in train, given and suspected label, self-confidence."""

    positions: npt.NDArray[np.intp]
    suspicious: npt.NDArray[np.bool_]
    given: npt.NDArray[np.object_]
    suspected: npt.NDArray[np.object_]
    self_confidence: npt.NDArray[np.float64]
    oof_accuracy: float
    baseline: float
    expected: float  # rows flagged if every label were drawn from the model's probabilities
    model: str
    ambiguous: int = 0  # rows whose features, as the model sees them, also carry another label
    expected_honest: float = 0.0  # the same, from the first-pass model (fitted on every label)
    flipped_share: float = 0.0  # share of judged labels flipped at random, by the calibration

    @property
    def informativeness(self) -> float:
        """0 when the model is no better than the majority class, 1 when perfect."""
        return (self.oof_accuracy - self.baseline) / (1 - self.baseline) if self.baseline < 1 else 0.0


def label_noise(data: Dataset) -> list[Finding]:
    label = data.roles.label
    train = data.train
    if label is None or not train.features:
        return []
    target = train.frame[label].dropna()
    if target.empty or not is_classification(target):
        return []
    scores = score_label_noise(train.frame, train.features, label)
    if scores is None:
        data.notes.append("label noise not judged: fewer than two classes with enough rows")
        return []
    evidence = noise_score(scores, train)
    note = dat012.note(evidence)
    if note is not None:
        data.notes.append(note)
    return dat012.judge(evidence)


def noise_score(scores: NoiseScores, train: Split) -> dat012.NoiseScore:
    """DAT012's evidence: the counts, and the ten most suspicious rows (lowest given-label probability)."""
    flagged = int(scores.suspicious.sum())
    order = np.argsort(scores.self_confidence[scores.suspicious])[:10]
    ids = train.row_ids(scores.positions[scores.suspicious][order])
    examples: list[dict[str, object]] = [
        {
            "row": row_id,
            "label": _plain(scores.given[scores.suspicious][k]),
            "predicted": _plain(scores.suspected[scores.suspicious][k]),
            "label_probability": round(float(scores.self_confidence[scores.suspicious][k]), 4),
        }
        for row_id, k in zip(ids, order, strict=True)
    ]
    return dat012.NoiseScore(
        oof_accuracy=scores.oof_accuracy,
        baseline=scores.baseline,
        informativeness=scores.informativeness,
        model=scores.model,
        flagged=flagged,
        scored=len(scores.positions),
        total_rows=len(train),
        expected=scores.expected,
        expected_honest=scores.expected_honest,
        flipped_share=scores.flipped_share,
        ambiguous=scores.ambiguous,
        most_suspicious=examples,
    )


def score_label_noise(frame: pd.DataFrame, features: list[str], label: str) -> NoiseScores | None:
    """Out-of-fold probabilities and the confident-learning verdict per scored row."""
    known = np.flatnonzero(frame[label].notna().to_numpy())
    if len(known) > NOISE_MAX_ROWS:
        known = np.sort(np.random.default_rng(_SEED).choice(known, NOISE_MAX_ROWS, replace=False))
    subset = frame.iloc[known]
    classes, _ = pd.factorize(subset[label])
    folds = _folds(len(known))
    judged = np.bincount(classes)[classes] >= folds  # a class needs a row in every fold
    if len(np.unique(classes[judged])) < 2:
        return None
    known, subset = known[judged], subset[judged]
    classes, uniques = pd.factorize(subset[label])
    matrix = model_matrix(subset, features)
    probs, first_pass, model = out_of_fold_probabilities(matrix, classes, folds)
    suspicious, suspected, self_conf = confident_learning(probs, classes)
    ambiguous = _ambiguous(matrix, classes)
    suspicious &= ~ambiguous
    calibrated_probs = calibrated(probs, classes, trusted=~suspicious & ~ambiguous)
    honest_probs = calibrated(first_pass, classes, trusted=~ambiguous)
    labels = np.asarray(uniques, dtype=object)
    return NoiseScores(
        positions=known,
        suspicious=suspicious,
        given=labels[classes],
        suspected=labels[suspected],
        self_confidence=self_conf,
        oof_accuracy=float(np.mean(np.argmax(probs, axis=1) == classes)),
        baseline=float(np.bincount(classes).max() / len(classes)),
        expected=expected_flags(calibrated_probs, classes, judged=~ambiguous),
        expected_honest=expected_flags(honest_probs, classes, judged=~ambiguous),
        flipped_share=flipped_share(probs, classes, judged=~ambiguous),
        model=model,
        ambiguous=int(ambiguous.sum()),
    )


def _folds(rows: int) -> int:
    """More folds on small tables: each fold's model then sees 90 % of the rows, not 67 %."""
    if rows < SMALL_TABLE_ROWS:
        return 10
    return 5 if rows < MEDIUM_TABLE_ROWS else 3


def out_of_fold_probabilities(
    matrix: pd.DataFrame, classes: npt.NDArray[np.intp], folds: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], str]:
    """Out-of-fold probabilities of the better calibrated candidate (lower log loss), refitted
    once without the rows it flagged; and the first pass's (fitted on every label).

    The refit matters: a model fitted on wrong labels learns to hedge everywhere (a 5 %
    flip rate puts ~5 % probability on the other class in every confident region), which
    makes clean rows look uncertain. Refitted without the flagged rows, its probabilities
    say what the rest of the table supports."""
    candidates = {"HistGradientBoostingClassifier": _boosting}
    if len(classes) < MEDIUM_TABLE_ROWS:
        candidates["LogisticRegression"] = _linear
    best: tuple[float, npt.NDArray[np.float64], str] | None = None
    for name, make in candidates.items():
        probs = _cross_val_probs(make, matrix, classes, folds, np.ones(len(classes), dtype=bool))
        loss = float(-np.mean(np.log(np.clip(probs[np.arange(len(classes)), classes], 1e-6, 1))))
        if best is None or loss < best[0]:
            best = (loss, probs, name)
    assert best is not None
    _, first_pass, name = best
    suspicious, _, _ = confident_learning(first_pass, classes)
    probs = first_pass
    if suspicious.any():
        probs = _cross_val_probs(candidates[name], matrix, classes, folds, ~suspicious)
    return probs, first_pass, f"{name}, {folds}-fold out-of-fold, refitted without flagged rows"


def _cross_val_probs(
    make: Callable[[pd.DataFrame, int], Any],
    matrix: pd.DataFrame,
    classes: npt.NDArray[np.intp],
    folds: int,
    trusted: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """Every row predicted by a model fitted on the other folds' trusted rows."""
    from sklearn.model_selection import StratifiedKFold
    from threadpoolctl import threadpool_limits

    n_classes = int(classes.max()) + 1
    probs = np.zeros((len(classes), n_classes))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=_SEED)
    # One OpenMP/BLAS thread: on a busy or small machine (CI, a training box already at work)
    # the default busy-waiting threads cost 10x the CPU time for the same result.
    with threadpool_limits(limits=1):
        for others, held in splitter.split(matrix, classes):
            fit = others[trusted[others]]
            model = make(matrix, len(fit))
            model.fit(matrix.iloc[fit], classes[fit])
            probs[np.ix_(held, model.classes_)] = model.predict_proba(matrix.iloc[held])
    return probs


def _boosting(matrix: pd.DataFrame, rows: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        max_iter=50,
        learning_rate=0.2,
        max_leaf_nodes=15,
        # smooth probabilities: a leaf of a few rows memorises their labels; small tables
        # need smaller leaves to split at all
        min_samples_leaf=int(np.clip(rows // 40, 5, 40)),
        l2_regularization=1.0,
        early_stopping=False,
        categorical_features="from_dtype",
        random_state=_SEED,
    )


def _linear(matrix: pd.DataFrame, rows: int) -> Any:
    """Standardised numbers (median-imputed, with a missing flag) and one-hot categories."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    categorical = [c for c in matrix.columns if isinstance(matrix[c].dtype, pd.CategoricalDtype)]
    numeric = [c for c in matrix.columns if c not in categorical]
    numbers = make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler())
    columns = ColumnTransformer(
        [
            ("numbers", numbers, numeric),
            ("categories", OneHotEncoder(handle_unknown="ignore"), categorical),
        ]
    )
    return make_pipeline(columns, LogisticRegression(C=1.0, max_iter=1000))


def confident_learning(
    probs: npt.NDArray[np.float64], labels: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """(suspicious, suspected class, probability of the given label) per row."""
    n = len(labels)
    thresholds = class_thresholds(probs, labels)
    suspected, has_confident = _confident_class(probs, thresholds)
    self_conf = probs[np.arange(n), labels]
    unlikely = self_conf < SELF_CONFIDENCE_MARGIN * thresholds[labels]
    confidently_other = has_confident & (suspected != labels) & unlikely
    ruled_out = _ruled_out(probs, labels) & unlikely & ~confidently_other
    suspected = np.where(ruled_out, np.argmax(probs, axis=1), suspected)
    return confidently_other | ruled_out, suspected.astype(np.intp), self_conf


def _ruled_out(probs: npt.NDArray[np.float64], labels: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Rows whose given label the model all but excludes, while preferring another class."""
    return _ruled_out_classes(probs)[np.arange(len(labels)), labels]


def _ruled_out_classes(probs: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Per row and class: a label the model would rule out (under a tenth of chance, and not
    the class it prefers)."""
    k = probs.shape[1]
    not_preferred = np.arange(k)[None, :] != np.argmax(probs, axis=1)[:, None]
    return np.asarray((probs < EXCLUDED_SHARE_OF_CHANCE / k) & not_preferred, dtype=np.bool_)


def _ambiguous(matrix: pd.DataFrame, classes: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Rows whose feature values, exactly as the model sees them, also occur with another label.

    No model can separate such rows: on a table of a few banded or categorical columns,
    whole groups of different people share one feature row, and the minority label of each
    group would read as noise. Whether such conflicts exceed chance is the conflicting-labels
    check's question (DAT006); label noise is judged on the other rows."""
    keys = pd.util.hash_pandas_object(matrix, index=False).to_numpy()
    per_key = pd.Series(classes).groupby(keys).transform("nunique").to_numpy()
    return np.asarray(per_key > 1, dtype=np.bool_)


def class_thresholds(probs: npt.NDArray[np.float64], labels: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    k = probs.shape[1]
    return np.array([probs[labels == j, j].mean() if np.any(labels == j) else 1.0 for j in range(k)])


def expected_flags(
    probs: npt.NDArray[np.float64], labels: npt.NDArray[np.intp], judged: npt.NDArray[np.bool_] | None = None
) -> float:
    """How many rows the rule would flag if each label were drawn from the model's own
    probabilities: for every row, the probability mass of the classes that, given as its
    label, would be flagged. Hard examples (probability spread over classes) raise it;
    confidently wrong labels do not."""
    n = len(probs)
    thresholds = class_thresholds(probs, labels)
    suspected, has_confident = _confident_class(probs, thresholds)
    other = np.ones_like(probs, dtype=bool)
    other[np.arange(n), suspected] = False
    unlikely = probs < SELF_CONFIDENCE_MARGIN * thresholds[None, :]
    would_flag = unlikely & ((other & has_confident[:, None]) | _ruled_out_classes(probs))
    if judged is not None:
        would_flag &= judged[:, None]
    return float(np.sum(np.where(would_flag, probs, 0.0)))


def calibrated(
    probs: npt.NDArray[np.float64], labels: npt.NDArray[np.intp], trusted: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float64]:
    """The probabilities temperature-scaled (Guo et al., 2017) to fit the labels of the
    trusted rows (those not flagged).

    Out-of-fold models on small tables are often under-confident (regularised, fitted on
    90 % of few rows); their spread-out tails would make real errors look like the model's
    own uncertainty. One temperature, fitted by log loss, keeps the ranking and corrects
    the spread; the flagged rows are left out of the fit, or a handful of wrong labels
    would dominate the log loss and widen the spread again."""
    from scipy.optimize import minimize_scalar

    logits = np.log(np.clip(probs, 1e-12, 1.0))
    rows = np.flatnonzero(trusted)
    if len(rows) < 2:
        return probs

    def scaled(log_t: float, at: npt.NDArray[np.intp] | slice) -> npt.NDArray[np.float64]:
        z = logits[at] / np.exp(log_t)
        z -= z.max(axis=1, keepdims=True)
        e: npt.NDArray[np.float64] = np.exp(z)
        return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float64)

    def log_loss(log_t: float) -> float:
        p = scaled(log_t, rows)[np.arange(len(rows)), labels[rows]]
        return float(-np.mean(np.log(np.clip(p, 1e-12, 1.0))))

    best = minimize_scalar(log_loss, bounds=(np.log(0.05), np.log(5.0)), method="bounded")
    return scaled(float(best.x), slice(None))


def flipped_share(
    probs: npt.NDArray[np.float64], labels: npt.NDArray[np.intp], judged: npt.NDArray[np.bool_]
) -> float:
    """The share e of labels flipped to another class at random, whatever the features, that
    best explains every judged label together with a temperature T (Guo et al., 2017):
    P(y) = (1 - e) s(y) + e (1 - s(y)) / (k - 1), s the probabilities scaled by T; fitted by
    log loss.

    Labels that disagree with the features come in two kinds. Random flips (an annotation
    bug) are as frequent where the model is sure as where it hesitates: only e explains
    them. Honest outcomes that the features predict imperfectly (a vote that differs from
    the voter's attitudes) grow rarer as the model grows surer: a wider temperature explains
    them, and e stays near 0. The refitted model's probabilities are used: fitted without the
    rows it flags, they have not learned the flips."""
    from scipy.optimize import minimize

    rows = np.flatnonzero(judged)
    k = probs.shape[1]
    if len(rows) < 2 or k < 2:
        return 0.0
    logits = np.log(np.clip(probs[rows], 1e-12, 1.0))
    given = labels[rows]

    def log_loss(params: npt.NDArray[np.float64]) -> float:
        z = logits / np.exp(params[0])
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        own = e[np.arange(len(rows)), given] / e.sum(axis=1)
        p = (1 - params[1]) * own + params[1] * (1 - own) / (k - 1)
        return float(-np.mean(np.log(np.clip(p, 1e-12, 1.0))))

    bounds = [(np.log(0.05), np.log(5.0)), (0.0, MAX_FLIPPED_SHARE)]
    fits = [minimize(log_loss, np.array(start), method="L-BFGS-B", bounds=bounds) for start in _STARTS]
    return float(min(fits, key=lambda fit: float(fit.fun)).x[1])


def _confident_class(
    probs: npt.NDArray[np.float64], thresholds: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
    candidate = np.where(probs >= thresholds[None, :], probs, -1.0)
    suspected = np.argmax(candidate, axis=1)
    return suspected.astype(np.intp), candidate[np.arange(len(probs)), suspected] >= 0


def model_matrix(frame: pd.DataFrame, features: list[str]) -> pd.DataFrame:
    """Numbers as floats, low-cardinality text as categories; other columns (empty ones,
    free text, identifiers) dropped."""
    columns: dict[str, pd.Series] = {}
    for column in features:
        series = frame[column]
        if isinstance(series, pd.DataFrame) or not series.notna().any():
            continue  # an all-empty column carries nothing (and breaks the binning)
        family = kind(series)
        if family in ("number", "bool"):
            values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isfinite(values).any():
                columns[column] = pd.Series(np.where(np.isfinite(values), values, np.nan), index=frame.index)
        elif family == "datetime":
            stamps = pd.to_datetime(series, utc=True)
            seconds = (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
            as_float = seconds.to_numpy(dtype=np.float64, na_value=np.nan)
            columns[column] = pd.Series(as_float, index=frame.index)
        elif series.nunique() <= _MAX_CATEGORIES:
            columns[column] = series.astype(str).where(series.notna()).astype("category")
    if not columns:
        return pd.DataFrame({"_constant": np.zeros(len(frame))}, index=frame.index)
    return pd.DataFrame(columns, index=frame.index)


def _plain(value: object) -> object:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
