"""DAT: data readiness before training (`trainmedic check data`).

The catalogue entries and the thresholds the checks use. The checks themselves
run over DataFrames in `trainmedic.data` (they need pandas, scipy and
scikit-learn); this module stays pure: no I/O, no framework.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainmedic.findings import FindingSpec, Severity

# Thresholds (the defaults of `trainmedic.data.check`; documented in docs/data.md).
TARGET_LEAKAGE_SCORE = 0.95  # held-out normalised accuracy (or R²) of one feature alone
MISSING_FRACTION = 0.05  # a feature missing in more rows than this is reported
CLASS_IMBALANCE_RATIO = 0.1  # minority / majority class count
UNSEEN_CATEGORY_FRACTION = 0.01  # rows of a split holding categories never seen in train
DRIFT_P_VALUE = 0.001  # drift must be significant ...
DRIFT_PSI = 0.2  # ... and large: PSI at least this,
DRIFT_EFFECT = 0.2  # or KS statistic / Cramér's V at least this
LABEL_NOISE_FRACTION = 0.01  # share of training labels contradicted by out-of-fold predictions
IDENTIFIER_UNIQUE_FRACTION = 0.95  # distinct values per non-missing row for a key-like column
CHANCE_P_VALUE = 1e-3  # identical rows beyond what chance gives: Poisson tail below this
NEAR_DUPLICATE_HAMMING = 4  # bits of a 64-bit perceptual hash two near-identical images may differ by

Columns = Mapping[str, Sequence[Any]]


@dataclass(frozen=True, slots=True)
class TablesExample:
    """The input of a DAT example: splits as plain columns (`train`, `val`, `test`, `serving`
    -> column -> values) and the roles `check data` is given. Plain data, so this module stays
    free of pandas; the caller makes the DataFrames."""

    splits: Mapping[str, Columns]
    label: str | None = "y"
    group: str | None = None
    time: str | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ContractExample:
    """The input of the DAT013 example: the table an input contract is captured from, and the
    batch served to the model at inference."""

    trained_on: Columns
    served: Columns


def _rows(n: int, seed: int) -> dict[str, list[Any]]:
    """A small, healthy classification table: two numbers, a city, and a noisy label of them."""
    import random  # examples only: a clean run does not load it

    rng = random.Random(seed)
    x1 = [round(rng.gauss(0, 1), 4) for _ in range(n)]
    x2 = [round(rng.gauss(0, 1), 4) for _ in range(n)]
    city = [rng.choice(["paris", "oslo", "rome", "lima"]) for _ in range(n)]
    y = [int(a + b + rng.gauss(0, 1.5) > 0) for a, b in zip(x1, x2, strict=True)]
    return {"x1": x1, "x2": x2, "city": city, "y": y}


def _head(columns: Columns, k: int) -> dict[str, list[Any]]:
    return {name: list(values[:k]) for name, values in columns.items()}


def _joined(*tables: Columns) -> dict[str, list[Any]]:
    return {name: [v for t in tables for v in t[name]] for name in tables[0]}


def _tables(**splits: Columns) -> TablesExample:
    return TablesExample(splits)


def _split_overlap_example() -> TablesExample:
    """A row duplicated before train_test_split: 20 test rows are train rows."""
    train = _rows(300, seed=0)
    return _tables(train=train, test=_joined(_rows(100, seed=1), _head(train, 20)))


def _near_duplicate_overlap_example() -> TablesExample:
    """Train rows again in test, their numbers off in the 9th digit and the city as ' Paris '."""
    train = _rows(300, seed=0)
    again = _head(train, 20)
    again["x1"] = [float(v) * (1 + 1e-9) + 1e-9 for v in again["x1"]]
    again["city"] = [f" {str(c).title()} " for c in again["city"]]
    return _tables(train=train, test=_joined(_rows(100, seed=1), again))


def _group_overlap_example() -> TablesExample:
    """Scans of the same patient in train and test."""
    train, test = _rows(300, seed=0), _rows(100, seed=1)
    train["patient"] = [f"p{i % 100}" for i in range(300)]
    test["patient"] = [f"p{i}" for i in range(100)]
    return TablesExample({"train": train, "test": test}, group="patient")


def _temporal_overlap_example() -> TablesExample:
    """A random split of a time series: test days fall inside the training period."""
    train, test = _rows(300, seed=0), _rows(100, seed=1)
    train["day"] = list(range(300))
    test["day"] = [3 * i for i in range(100)]
    return TablesExample({"train": train, "test": test}, time="day")


def _target_leakage_example() -> TablesExample:
    """A 'refund_issued' column in a churn data set: it is the label, written after the outcome."""
    train = _rows(400, seed=0)
    train["refund_issued"] = ["yes" if y else "no" for y in train["y"]]
    return _tables(train=train)


def _conflicting_labels_example() -> TablesExample:
    """Twenty rows appear twice, once with each label."""
    train = _rows(300, seed=0)
    twins = _head(train, 20)
    twins["y"] = [1 - int(str(y)) for y in twins["y"]]
    return _tables(train=_joined(train, twins))


def _duplicate_rows_example() -> TablesExample:
    """The same 100 rows appended twice by an export job."""
    train = _rows(300, seed=0)
    return _tables(train=_joined(train, _head(train, 100)))


def _missing_values_example() -> TablesExample:
    """'income' is empty in 40 % of rows."""
    train = _rows(300, seed=0)
    train["income"] = [None if i % 5 < 2 else 30_000 + 100 * i for i in range(300)]
    return _tables(train=train)


def _class_imbalance_example() -> TablesExample:
    """3 % positives."""
    train = _rows(400, seed=0)
    train["y"] = [int(i % 33 == 0) for i in range(400)]
    return _tables(train=train)


def _schema_mismatch_example() -> TablesExample:
    """Serving data has 'x1' as text."""
    serving = _rows(100, seed=1)
    serving["x1"] = [str(v) for v in serving["x1"]]
    return _tables(train=_rows(300, seed=0), serving=serving)


def _feature_drift_example() -> TablesExample:
    """'x1' moved by 3 standard deviations between train and serving."""
    serving = _rows(300, seed=1)
    serving["x1"] = [float(v) + 3 for v in serving["x1"]]
    return _tables(train=_rows(300, seed=0), serving=serving)


def _label_noise_example() -> TablesExample:
    """A clean label (x1 > 0) with 5 % of it flipped by an annotation bug."""
    train = _rows(600, seed=0)
    train["y"] = [int((float(v) > 0) != (i % 20 == 0)) for i, v in enumerate(train["x1"])]
    return _tables(train=train)


def _preprocessing_mismatch_example() -> ContractExample:
    """Trained on (age, income); served (income, age): the features come reordered."""
    trained_on: Columns = {"age": [23, 35, 47, 52, 61], "income": [21_000, 38_000, 52_000, 61_000, 58_000]}
    return ContractExample(trained_on, {"income": [40_000, 55_000], "age": [30, 44]})


def _preprocessing_before_split_example() -> TablesExample:
    """X = StandardScaler().fit_transform(X) before train_test_split: train + test together
    have mean 0 and std 1 exactly, train alone does not."""
    import random

    rng = random.Random(0)
    raw = [rng.gauss(50, 10) for _ in range(400)]
    mean = sum(raw) / len(raw)
    std = (sum((v - mean) ** 2 for v in raw) / len(raw)) ** 0.5
    scaled = [(v - mean) / std for v in raw]
    train, test = _rows(300, seed=0), _rows(100, seed=1)
    train["x1"], test["x1"] = scaled[:300], scaled[300:]
    return _tables(train=train, test=test)


def _identifier_column_example() -> TablesExample:
    """A 'customer_id' column, unique per row."""
    train = _rows(300, seed=0)
    train["customer_id"] = [f"C{100_000 + 7 * i}" for i in range(300)]
    return _tables(train=train)


SPLIT_OVERLAP = FindingSpec(
    code="DAT001",
    slug="split-overlap",
    severity=Severity.ERROR,
    title="Identical examples in more than one split",
    what=(
        "Identical examples (features, ignoring the label) occur in more than one split. Each row "
        "is hashed over its feature columns (label, group, time, id and ignored columns left out); "
        "rows of a later split whose hash occurs in an earlier split are counted."
    ),
    why=(
        "The model is evaluated on examples it trained on: the validation/test score is inflated, "
        "and early stopping or model selection on that split picks the model that memorises best."
    ),
    example=(
        "A row duplicated before train_test_split lands in both train and test:\n"
        "  trainmedic check data train.csv --test test.csv --label y\n"
        "  ERROR DAT001 split-overlap: 1,204 of 20,000 test rows (6.0%) have features identical to a train row"
    ),
    fix="Deduplicate before splitting, then split again (by group when examples are related).",
    example_input=_split_overlap_example,
)

NEAR_DUPLICATE_OVERLAP = FindingSpec(
    code="DAT002",
    slug="near-duplicate-overlap",
    severity=Severity.WARNING,
    title="Near-duplicates across splits",
    what=(
        "Near-duplicate examples (perceptually identical images, rows equal up to rounding, "
        "case or whitespace) occur across splits."
    ),
    why="Like exact overlap, it leaks: the model is scored on what it has practically seen.",
    example=(
        "'New York ' in train and 'new york' in test with the same other features; a price of "
        "19.990001 in train and 19.99 in test; the same photo resized from 512 to 256 pixels "
        "(tables: floats rounded to ~6 significant digits, text stripped and lower-cased; images: "
        "a 64-bit dHash within 4 bits)."
    ),
    fix="Normalise and deduplicate (or group near-duplicates) before splitting.",
    example_input=_near_duplicate_overlap_example,
)

GROUP_OVERLAP = FindingSpec(
    code="DAT003",
    slug="group-overlap",
    severity=Severity.ERROR,
    title="A group spans several splits",
    what="A group (patient, user, session...) has examples in more than one split.",
    why="The model learns the group, not the task: the score does not hold for new groups.",
    example="Scans of the same patient in train and test.",
    fix="Split by group: GroupKFold / GroupShuffleSplit or trainmedic.data.split(strategy='group').",
    example_input=_group_overlap_example,
)

TEMPORAL_OVERLAP = FindingSpec(
    code="DAT004",
    slug="temporal-overlap",
    severity=Severity.ERROR,
    title="Later split holds earlier times",
    what="A later split contains timestamps earlier than the latest training timestamp.",
    why="The model is trained on the future of what it is evaluated on: a forecast score it cannot reach.",
    example="A random split of a time series.",
    fix="Split by time: everything in validation/test after the last training timestamp.",
    example_input=_temporal_overlap_example,
)

TARGET_LEAKAGE = FindingSpec(
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
    example_input=_target_leakage_example,
)

CONFLICTING_LABELS = FindingSpec(
    code="DAT006",
    slug="conflicting-labels",
    severity=Severity.WARNING,
    title="Identical features, different labels",
    what="Identical features carry different labels.",
    why="The examples contradict each other: a ceiling on accuracy and a sign of labelling errors.",
    example="Two identical rows labelled 'cat' and 'dog'.",
    fix="Review the conflicting rows; relabel or drop them, or add the feature that separates them.",
    example_input=_conflicting_labels_example,
)

DUPLICATE_ROWS = FindingSpec(
    code="DAT007",
    slug="duplicate-rows",
    severity=Severity.WARNING,
    title="Duplicate examples within a split",
    what="Duplicate examples within a split.",
    why="Duplicates weigh some examples more and, split later, leak across splits.",
    example="The same 2,000 rows appended twice by an export job.",
    fix="Drop exact duplicates (df.drop_duplicates()) unless the repetition is intended.",
    example_input=_duplicate_rows_example,
)

MISSING_VALUES = FindingSpec(
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
    example_input=_missing_values_example,
)

CLASS_IMBALANCE = FindingSpec(
    code="DAT009",
    slug="class-imbalance",
    severity=Severity.WARNING,
    title="Class imbalance",
    what="The minority/majority class ratio is below the threshold.",
    why=(
        "Accuracy looks high while the minority class is ignored, and the default 0.5 threshold "
        "of a probabilistic classifier is wrong for the rare class."
    ),
    example=(
        "99% negatives: predicting 'no' everywhere scores 99% accuracy. Reported when the "
        "minority/majority count ratio of the training labels is below 0.1."
    ),
    fix=(
        "Report PR-AUC, balanced accuracy or F1; use class weights or threshold tuning; "
        "never oversample before splitting."
    ),
    example_input=_class_imbalance_example,
)

SCHEMA_MISMATCH = FindingSpec(
    code="DAT010",
    slug="schema-mismatch",
    severity=Severity.ERROR,
    title="Schema differs between splits",
    what="Splits or serving data differ in columns, order or dtypes (or hold categories unseen in training).",
    why="The model receives features it was not trained on, in the wrong place or type.",
    example=(
        "Serving data has 'age' as string and 'zip' before 'city' (error); 3% of test rows "
        "hold a 'country' never seen in train (warning, over 1% of rows)."
    ),
    fix="Align the columns, order and dtypes to the training schema (save it with trainmedic.contract).",
    example_input=_schema_mismatch_example,
)

FEATURE_DRIFT = FindingSpec(
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
    example_input=_feature_drift_example,
)

LABEL_NOISE = FindingSpec(
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
        "themselves; with normalised out-of-fold accuracy under 0.5, labels are not judged (info)."
    ),
    fix="Review the listed rows first (most suspicious first) and relabel or drop them.",
    example_input=_label_noise_example,
)

PREPROCESSING_MISMATCH = FindingSpec(
    code="DAT013",
    slug="preprocessing-mismatch",
    severity=Severity.ERROR,
    title="Inference input breaks the training contract",
    what=(
        "Inference inputs do not match the training input contract (image size, channels, "
        "feature order, dtypes, normalisation)."
    ),
    why="The model silently predicts on inputs unlike those it learned: accuracy collapses in production.",
    example=(
        "Trained at 400x400 RGB, served at 224x224:\n"
        "  trainmedic.contract.capture(x_train).save('model/contract.json')   # at training\n"
        "  trainmedic.contract.check(trainmedic.contract.load('model/contract.json'), batch)\n"
        "  ERROR DAT013: Inputs are 224x224, the model was trained at 400x400"
    ),
    fix="Apply the training preprocessing at inference; load it from the saved contract.",
    example_input=_preprocessing_mismatch_example,
)

PREPROCESSING_BEFORE_SPLIT = FindingSpec(
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
    example_input=_preprocessing_before_split_example,
)

IDENTIFIER_COLUMN = FindingSpec(
    code="DAT015",
    slug="identifier-column",
    severity=Severity.INFO,
    title="An identifier among the columns",
    what=(
        "A column is a key, not a feature: nearly unique per row (95 % or more distinct values) "
        "and named like one (`id`, `customer_id`, `key`, `uuid`), or short text unique per row "
        "(a name, a code), or a row counter. It is left out of the features, as `--id` would be; "
        "its values that recur in a later split are counted (warning)."
    ),
    why=(
        "A key cannot generalise: a model that uses it memorises rows. Read as a category, every "
        "new key looks like an unseen category, which is not schema drift. A key that recurs in "
        "another split names the same entity twice: a leak to check."
    ),
    example=(
        "A 'passenger_name' column, unique per row: 'passenger_name' is an identifier (100% "
        "distinct values in train), not a feature: left out of the features."
    ),
    fix="Pass it as --id COL (it then names rows in findings), or drop it; split by it when it recurs.",
    example_input=_identifier_column_example,
)

SPECS: tuple[FindingSpec, ...] = (
    SPLIT_OVERLAP,
    NEAR_DUPLICATE_OVERLAP,
    GROUP_OVERLAP,
    TEMPORAL_OVERLAP,
    TARGET_LEAKAGE,
    CONFLICTING_LABELS,
    DUPLICATE_ROWS,
    MISSING_VALUES,
    CLASS_IMBALANCE,
    SCHEMA_MISMATCH,
    FEATURE_DRIFT,
    LABEL_NOISE,
    PREPROCESSING_MISMATCH,
    PREPROCESSING_BEFORE_SPLIT,
    IDENTIFIER_COLUMN,
)
