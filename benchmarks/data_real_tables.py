"""Benchmark: `trainmedic check data` on real tables, with cleanlab's label-issue figures beside.

Tables: scikit-learn's bundled data sets (real rows), split as users split them
(`train_test_split(test_size=0.25, stratify=y, random_state=0)`), plus variants with
problems planted in them (the planting is synthetic): 5 % of training labels flipped,
30 training rows copied into test, 60 training rows re-exported into test (numbers to one
decimal, text upper-cased with a trailing space), identifier columns, six classes in the
glass table's proportions (the smallest 7 of 160 training rows). `titanic_like` (sex,
class, an age in years) is generated in the Titanic table's shape: nothing is downloaded.

Target leaks (`tests/data/leaks.py`, DAT005): a label cut from a feature at a threshold
(birth weight < 2,500 g, synthetic in the birth-weight table's shape; bmi >= 30 on the real
diabetes rows), a code recorded with the outcome (injury severity 4 = killed, synthetic in
the 26,217-row crash table's shape), a feature that sets one class of three apart (a PCR
cycle threshold, synthetic), a column filled after the outcome beside a ratio computed from it
(card spending and spending over income, synthetic in the shape of AER's credit-card
applications), a numeric label that is the mean of two features
(minimum and maximum price, synthetic in the 93-car table's shape; a planted range on the
real diabetes rows), and the healthy twins without the leaking columns. Last, a column
numeric in train with one text value in val (DAT010, never a traceback).

Ordinary tables (`tests/data/ordinary.py`, synthetic shapes): seizure counts and a score
out of 10 as labels (regression targets: no DAT009), a clock time as text split at random
(unseen times as many as chance gives: DAT010 info at most).

Hard, honest labels (`tests/data/hard_labels.py`, synthetic tables in the shapes of public
ones, every label drawn from a known distribution, so none is wrong): a 6-class glass table
of 214 rows with overlapping classes, a 3-class survival status of 418 rows, a churn table
of 5,000 rows (3,500 for training) with a few risk regions over a base rate. Healthy: no
label-noise warning expected.

Label noise, side by side on the same training split:
- trainmedic: `trainmedic.data.noise.score_label_noise` (its flagged rows) and whether
  `check` warns (DAT012 warning) or says labels cannot be judged (info);
- cleanlab 2.9 `find_label_issues(labels, probs, filter_by="prune_by_noise_rate")` with
  3-fold HistGradientBoosting out-of-fold probabilities (its documented recipe).
Recall and precision are against the planted flips, pooled over `--seeds` flip draws.

    python benchmarks/data_real_tables.py              # needs cleanlab (the dev extra)
    python benchmarks/data_real_tables.py --seeds 1 --skip-cleanlab   # a quick look
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.data.real: the table builders

from tests.data.hard_labels import HARD_LABELS
from tests.data.leaks import (
    birthweight_like,
    cars_like,
    crashes_like,
    credit_cards_like,
    diabetes_obese,
    diabetes_range,
    lab_tests_like,
)
from tests.data.ordinary import flights_like, seizures_like, vocabulary_like
from tests.data.real import (
    ACCURATE,
    ALL_CLEAN,
    CLASSIFICATION,
    LABEL,
    exact_copies,
    flip_labels,
    near_copies,
    table,
    user_split,
)

from trainmedic.data import check
from trainmedic.data.noise import model_matrix, score_label_noise
from trainmedic.findings import Finding, Severity


def summary(findings: list[Finding]) -> str:
    serious = sorted(
        {f"{f.code} {f.severity.value}" for f in findings if f.severity.at_least(Severity.WARNING)}
    )
    infos = sorted({f.code for f in findings if f.severity is Severity.INFO})
    return (", ".join(serious) or "none") + (f" (info: {', '.join(infos)})" if infos else "")


def cleanlab_flags(frame: pd.DataFrame) -> npt.NDArray[np.intp]:
    """Rows cleanlab flags, with 3-fold HistGradientBoosting out-of-fold probabilities."""
    from cleanlab.filter import find_label_issues
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from threadpoolctl import threadpool_limits

    labels, _ = pd.factorize(frame[LABEL])
    features = model_matrix(frame, [c for c in frame.columns if c != LABEL])
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    model = HistGradientBoostingClassifier(random_state=0, categorical_features="from_dtype")
    with threadpool_limits(limits=1):  # as trainmedic's own model runs: same CPU conditions
        probs = cross_val_predict(model, features, labels, cv=folds, method="predict_proba")
    issues = find_label_issues(labels, probs, filter_by="prune_by_noise_rate")
    return np.flatnonzero(issues)


def trainmedic_flags(frame: pd.DataFrame) -> npt.NDArray[np.intp]:
    scores = score_label_noise(frame, [c for c in frame.columns if c != LABEL], LABEL)
    if scores is None:
        return np.array([], dtype=np.intp)
    return np.asarray(scores.positions[scores.suspicious], dtype=np.intp)


def clean_rows(with_cleanlab: bool) -> list[str]:
    lines = [
        "| table | train rows | trainmedic warnings/errors | trainmedic flags (%) | cleanlab flags (%) "
        "| seconds |",
        "|---|---|---|---|---|---|",
    ]
    for name in ALL_CLEAN:
        train, test = user_split(table(name))
        start = time.perf_counter()
        findings = check(train, test, label=LABEL)
        seconds = time.perf_counter() - start
        ours = theirs = "-"
        if name in CLASSIFICATION:
            flagged = trainmedic_flags(train)
            ours = f"{len(flagged) / len(train):.1%}"
            if with_cleanlab:
                theirs = f"{len(cleanlab_flags(train)) / len(train):.1%}"
        lines.append(f"| {name} | {len(train)} | {summary(findings)} | {ours} | {theirs} | {seconds:.1f} |")
    return lines


def flip_rows(seeds: int, with_cleanlab: bool, rate: float = 0.05) -> list[str]:
    lines = [
        f"| table ({rate:.0%} flips) | trainmedic verdict | trainmedic recall / precision | "
        "cleanlab (HGB 3-fold) recall / precision |",
        "|---|---|---|---|",
    ]
    for name in ACCURATE:
        train, test = user_split(table(name))
        totals = {"ours": [0, 0, 0], "theirs": [0, 0, 0]}  # hits, flagged, planted
        verdicts = []
        for seed in range(seeds):
            noisy, flipped = flip_labels(train, rate, seed=seed)
            verdicts.append(summary([f for f in check(noisy, test, label=LABEL) if f.code == "DAT012"]))
            runs = {"ours": trainmedic_flags(noisy)}
            if with_cleanlab:
                runs["theirs"] = cleanlab_flags(noisy)
            for key, flagged in runs.items():
                totals[key][0] += len(np.intersect1d(flagged, flipped))
                totals[key][1] += len(flagged)
                totals[key][2] += len(flipped)

        ours, theirs = _rates(totals["ours"]), _rates(totals["theirs"])
        tally = "; ".join(f"{verdict} ({n} of {seeds})" for verdict, n in Counter(verdicts).most_common())
        lines.append(f"| {name} | {tally} | {ours} | {theirs} |")
    return lines


HARD_SPLITS = {
    "glass_like": 0.375,
    "survival_like": 0.3,
    "churn_like": 0.3,
    "votes_like": 0.25,
}  # 133, 292, 3,500, 2,250 rows


def hard_label_rows(seeds: int) -> list[str]:
    """The hard-label shapes over `seeds` draws of the table: DAT012's verdict and its counts."""
    lines = [
        "| table (synthetic shape) | train rows | DAT012 verdict | flagged (median) | refitted / first-pass "
        "expectation (median) | normalised accuracy (range) |",
        "|---|---|---|---|---|---|",
    ]
    for name, build in HARD_LABELS.items():
        verdicts, flagged, refitted, first, accuracy, rows = [], [], [], [], [], 0
        for seed in range(seeds):
            train, test = user_split(build(seed=seed), test_size=HARD_SPLITS[name])
            verdicts.append(summary([f for f in check(train, test, label=LABEL) if f.code == "DAT012"]))
            scores = score_label_noise(train, [c for c in train.columns if c != LABEL], LABEL)
            assert scores is not None
            rows = len(train)
            flagged.append(int(scores.suspicious.sum()))
            refitted.append(scores.expected)
            first.append(scores.expected_honest)
            accuracy.append(scores.informativeness)
        tally = "; ".join(f"{verdict} ({n} of {seeds})" for verdict, n in Counter(verdicts).most_common())
        lines.append(
            f"| {name} | {rows:,} | {tally} | {np.median(flagged):.0f} | {np.median(refitted):.1f} / "
            f"{np.median(first):.1f} | {min(accuracy):.2f}-{max(accuracy):.2f} |"
        )
    return lines


def _rates(counts: list[int]) -> str:
    hits, flagged, planted = counts
    return f"{hits / planted:.2f} / {hits / max(flagged, 1):.2f}" if planted else "-"


def planted_rows() -> list[str]:
    lines = ["| planted problem | table | expected | found |", "|---|---|---|---|"]
    train, test = user_split(table("breast_cancer"))
    found = check(train, exact_copies(train, test, rows=30), label=LABEL, label_noise=False)
    lines.append(_planted("30 rows copied into test", "breast_cancer", "DAT001 30 rows", found, "DAT001", 30))
    train, test = user_split(table("diabetes_text"))
    found = check(train, near_copies(train, test, rows=60), label=LABEL, label_noise=False)
    what = "60 rows re-exported (1 decimal, 'MALE ')"
    lines.append(_planted(what, "diabetes", "DAT002 60 rows", found, "DAT002", 60))
    encoding = [f for f in found if f.code == "DAT010" and "encoding_variants" in f.evidence]
    lines.append(
        f"| case/whitespace variants of 'sex' | diabetes | DAT010 encoding inconsistency | "
        f"{'found' if encoding else 'MISSED'} |"
    )
    rare_train, rare_test = user_split(table("digits_rare"))
    found = check(rare_train, rare_test, label=LABEL, label_noise=False)
    rare = [f for f in found if f.code == "DAT009" and "rare_classes" in f.evidence]
    lines.append(
        "| six classes, the smallest 7 of 160 rows (12 % of the largest) | digits (glass proportions) | "
        f"DAT009 naming the class | {'found' if rare else 'MISSED'} |"
    )
    train["name"] = [f"Name {i:04d}" for i in range(len(train))]
    test["name"] = [f"Name {i:04d}" for i in range(5_000, 5_000 + len(test))]
    found = check(train, test, label=LABEL, label_noise=False)
    named = [f for f in found if f.code == "DAT015"]
    schema = [f for f in found if f.code == "DAT010"]
    lines.append(
        f"| a unique name per row | diabetes | DAT015, no DAT010 | "
        f"{'found' if named and not schema else 'MISSED'} |"
    )
    return lines


def _planted(what: str, name: str, expected: str, found: list[Finding], code: str, rows: int) -> str:
    hits = [f for f in found if f.code == code]
    got = hits[0].evidence.get("rows") if hits else None
    return f"| {what} | {name} | {expected} | {'found' if got == rows else f'MISSED ({got})'} |"


BIRTH = "birth weight (synthetic shape, 189 rows)"
CRASHES = "crashes (synthetic shape, 26,217 rows)"
CARS = "cars (synthetic shape, 93 rows)"
LAB = "PCR tests (synthetic, 3,000 rows, 3 classes)"
CARDS = "credit-card applications (synthetic shape, 1,319 rows)"
RANGE = {"progression_low", "progression_high"}
LEAKS = (  # what, table, builder, the features DAT005 must name (none: a healthy twin)
    ("label `low` = birth weight < 2,500 g", BIRTH, birthweight_like, {"bwt"}),
    ("label `obese` = bmi >= 30", "diabetes (real rows)", diabetes_obese, {"bmi"}),
    ("injury severity 4 = killed => `dead`", CRASHES, crashes_like, {"injSeverity"}),
    ("price = mean of min and max price", CARS, cars_like, {"Min.Price", "Max.Price"}),
    ("progression = mean of a planted range", "diabetes (real rows)", diabetes_range, RANGE),
    ("cycle threshold < 45 => `positive` (one class of 3)", LAB, lab_tests_like, {"ct_value"}),
    ("card spending 0 for every refused application", CARDS, credit_cards_like, {"expenditure"}),
    ("healthy twin: no severity code", CRASHES, lambda: crashes_like(with_severity=False), set()),
    ("healthy twin: no price range", CARS, lambda: cars_like(with_range=False), set()),
    ("healthy twin: no cycle threshold", LAB, lambda: lab_tests_like(with_ct=False), set()),
    ("healthy twin: no spending, no share", CARDS, lambda: credit_cards_like(with_spending=False), set()),
)


def leak_rows() -> list[str]:
    """DAT005 on the target-leak shapes (tests/data/leaks.py), every check on (label noise too)."""
    lines = ["| planted leak | table | expected | DAT005 | all warnings/errors |", "|---|---|---|---|---|"]
    for what, name, build, expected in LEAKS:
        train, test = user_split(build())
        found = check(train, test, label=LABEL)
        leaks = [f for f in found if f.code == "DAT005"]
        named = {str(x) for f in leaks for x in f.evidence.get("features", [f.evidence["feature"]])}
        verdict = "found" if named == expected else f"MISSED ({', '.join(sorted(named)) or 'nothing'})"
        if not expected:
            verdict = "quiet" if not named else f"FALSE ({', '.join(sorted(named))})"
        want = f"names {', '.join(sorted(expected))}" if expected else "none"
        lines.append(f"| {what} | {name} | {want} | {verdict} | {summary(found)} |")
    return lines


def ordinary_rows() -> list[str]:
    """Ordinary tables nothing is wrong with (tests/data/ordinary.py): a count or a score as
    label (no class imbalance), a clock time as text split at random (no schema warning)."""
    lines = [
        "| ordinary table (synthetic shape) | label values | expected | all findings |",
        "|---|---|---|---|",
    ]
    for what, frame, label in (
        ("seizure counts (epilepsy trial, 236 rows)", seizures_like(), "y"),
        ("words right out of 10 (vocabulary, 3,000 rows)", vocabulary_like(), "vocabulary"),
    ):
        found = check(frame, label=label)
        verdict = "FALSE" if any(f.code == "DAT009" for f in found) else "quiet"
        lines.append(f"| {what} | {frame[label].nunique()} | no DAT009: {verdict} | {summary(found)} |")
    flights = flights_like()
    train, val = flights.iloc[:1125].reset_index(drop=True), flights.iloc[1125:].reset_index(drop=True)
    found = check(train, val, label="late", label_noise=False)
    serious = [f for f in found if f.code == "DAT010" and f.severity.at_least(Severity.WARNING)]
    unseen = f"{(~val['dep_time'].isin(train['dep_time'])).mean():.0%} of val rows unseen"
    lines.append(
        f"| clock time as text, split at random (flights, 1,500 rows) | {unseen} | DAT010 info at most: "
        f"{'FALSE' if serious else 'quiet'} | {summary(found)} |"
    )
    return lines


def mixed_type_rows() -> list[str]:
    """A column numeric in train with one text value in val (issue #41 item 13): DAT010, no traceback."""
    train, val = user_split(table("wine"))
    val["magnesium"] = val["magnesium"].astype(object)
    val.loc[5, "magnesium"] = "rotary"
    try:
        found = check(train, val, label=LABEL)
    except Exception as exc:  # the benchmark reports a traceback as a miss
        return [f"| one text value in a numeric column | wine | DAT010 | MISSED ({exc!r}) |"]
    changed = [f for f in found if f.code == "DAT010" and "magnesium" in f.evidence.get("dtype_changes", {})]
    return [
        "| planted problem | table | expected | found |",
        "|---|---|---|---|",
        "| `magnesium` numeric in train, 'rotary' in one val row | wine | DAT010 schema-mismatch, "
        f"no traceback | {'found' if changed else 'MISSED'} ({summary(found)}) |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=8, help="flip draws per table (iris: 6 a draw)")
    parser.add_argument("--skip-cleanlab", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    with_cleanlab = not args.skip_cleanlab
    for block in (
        clean_rows(with_cleanlab),
        flip_rows(args.seeds, with_cleanlab),
        flip_rows(args.seeds, with_cleanlab, rate=0.10),
        hard_label_rows(args.seeds),
        planted_rows(),
        leak_rows(),
        ordinary_rows(),
        mixed_type_rows(),
    ):
        print("\n".join(block) + "\n", flush=True)


if __name__ == "__main__":
    main()
