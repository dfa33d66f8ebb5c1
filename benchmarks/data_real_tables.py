"""Benchmark: `trainmedic check data` on real tables, with cleanlab's label-issue figures beside.

Tables: scikit-learn's bundled data sets (real rows), split as users split them
(`train_test_split(test_size=0.25, stratify=y, random_state=0)`), plus variants with
problems planted in them (the planting is synthetic): 5 % of training labels flipped,
30 training rows copied into test, 60 training rows re-exported into test (numbers to one
decimal, text upper-cased with a trailing space), identifier columns, six classes in the
glass table's proportions (the smallest 7 of 160 training rows). `titanic_like` (sex,
class, an age in years) is generated in the Titanic table's shape: nothing is downloaded.

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


def flip_rows(seeds: int, with_cleanlab: bool) -> list[str]:
    lines = [
        "| table (5 % flips) | trainmedic verdict | trainmedic recall / precision | "
        "cleanlab (HGB 3-fold) recall / precision |",
        "|---|---|---|---|",
    ]
    for name in ACCURATE:
        train, test = user_split(table(name))
        totals = {"ours": [0, 0, 0], "theirs": [0, 0, 0]}  # hits, flagged, planted
        verdicts = []
        for seed in range(seeds):
            noisy, flipped = flip_labels(train, 0.05, seed=seed)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=8, help="flip draws per table (iris: 6 a draw)")
    parser.add_argument("--skip-cleanlab", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    with_cleanlab = not args.skip_cleanlab
    for block in (clean_rows(with_cleanlab), flip_rows(args.seeds, with_cleanlab), planted_rows()):
        print("\n".join(block) + "\n", flush=True)


if __name__ == "__main__":
    main()
