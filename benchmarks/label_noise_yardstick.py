"""Benchmark: DAT012's yardstick on hard, honest labels and on planted flips, before and after
the yardstick widens where the model is weak.

"before" judges the flagged rows against the refitted model's expectation alone (the
yardstick up to issue #41 item 15), "after" against the widened one (`NoiseScore.yardstick`)
with the calibration's flipped share on the same bar (`NoiseScore.flips_found`); both on the
same flagged rows (`trainmedic.data.noise.score_label_noise`) and through
`dat012.judge`, the verdict `trainmedic check data` gives.

Tables: the hard-label shapes of `tests/data/hard_labels.py` (synthetic, every label drawn
from a known distribution, so none is wrong), each over `--draws` draws of the table and two
splits (25 % held out, and the public table's own: 133 of 214 glass rows, 292 of 418, 3,500
of 5,000; the vote shape has none: 2,250 of 3,000 only); scikit-learn's real tables with
5 % and 10 % of training labels flipped at random (`--flip-draws` flip draws each); and the
same flips planted in the hard-label shapes.

    python benchmarks/label_noise_yardstick.py              # 10 table draws, 4 flip draws
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.data: the table builders

from tests.data.hard_labels import HARD_LABELS
from tests.data.real import ACCURATE, LABEL, flip_labels, table, user_split

from trainmedic.data._columns import Roles
from trainmedic.data._context import Split
from trainmedic.data.noise import NoiseScores, noise_score, score_label_noise
from trainmedic.findings import Severity
from trainmedic.rules.dat import dat012_label_noise as dat012

PUBLIC_SPLIT = {"glass_like": 0.375, "survival_like": 0.3, "churn_like": 0.3, "votes_like": 0.25}


def scored(frame: pd.DataFrame) -> tuple[NoiseScores | None, Split]:
    """`check`'s label-noise scoring of a training frame whose label is `LABEL`."""
    features = [c for c in frame.columns if c != LABEL]
    return score_label_noise(frame, features, LABEL), Split("train", frame, Roles(label=LABEL), features)


def verdicts(scores: NoiseScores | None, train: Split) -> tuple[bool, bool, dat012.NoiseScore]:
    """(warned before, warned after, the evidence `check` gives) for one scored table."""
    assert scores is not None
    after = noise_score(scores, train)
    # the refitted count alone, without the calibration's flipped share
    before = dataclasses.replace(after, expected_honest=scores.expected, flipped_share=None)
    warned = [any(f.severity is Severity.WARNING for f in dat012.judge(e)) for e in (before, after)]
    return warned[0], warned[1], after


def hard_rows(draws: int) -> list[str]:
    lines = [
        "| table (synthetic shape) | held out | train rows | warned before | warned after | flagged "
        "(median) | refitted / first-pass / yardstick (median) | normalised accuracy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, build in HARD_LABELS.items():
        for held in sorted({0.25, PUBLIC_SPLIT[name]}):
            before = after = rows = 0
            flagged, refitted, first, yardstick, accuracy = [], [], [], [], []
            for seed in range(draws):
                train, _ = user_split(build(seed=seed), test_size=held)
                scores, split = scored(train)
                was, now, evidence = verdicts(scores, split)
                before, after, rows = before + was, after + now, len(train)
                flagged.append(evidence.flagged)
                refitted.append(evidence.expected)
                first.append(evidence.expected_honest)
                yardstick.append(evidence.yardstick)
                accuracy.append(evidence.informativeness)
            lines.append(
                f"| {name} | {held:.1%} | {rows:,} | {before} of {draws} | {after} of {draws} | "
                f"{np.median(flagged):.0f} | {np.median(refitted):.1f} / {np.median(first):.1f} / "
                f"{np.median(yardstick):.1f} | {min(accuracy):.2f}-{max(accuracy):.2f} |"
            )
    return lines


def flip_rows(draws: int) -> list[str]:
    lines = [
        "| table | flips | warned before | warned after | recall / precision | normalised accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for name in ACCURATE:
        train, _ = user_split(table(name))
        for rate in (0.05, 0.10):
            before = after = hits = flagged_rows = planted = 0
            accuracy = []
            for seed in range(draws):
                noisy, flipped = flip_labels(train, rate, seed=seed)
                scores, split = scored(noisy)
                was, now, evidence = verdicts(scores, split)
                assert scores is not None
                flagged = scores.positions[scores.suspicious]
                before, after = before + was, after + now
                hits += len(np.intersect1d(flagged, flipped))
                flagged_rows += len(flagged)
                planted += len(flipped)
                accuracy.append(evidence.informativeness)
            lines.append(
                f"| {name} | {rate:.0%} | {before} of {draws} | {after} of {draws} | "
                f"{hits / planted:.2f} / {hits / max(flagged_rows, 1):.2f} | "
                f"{min(accuracy):.2f}-{max(accuracy):.2f} |"
            )
    return lines


def hard_flip_rows(draws: int) -> list[str]:
    """Flips planted in the hard-label shapes (first draw, the public split): what the wider
    yardstick gives up."""
    lines = [
        "| table (synthetic shape) | flips | warned before | warned after | labels not judged | "
        "normalised accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for name, build in HARD_LABELS.items():
        train, _ = user_split(build(seed=0), test_size=PUBLIC_SPLIT[name])
        for rate in (0.05, 0.10):
            before = after = unjudged = 0
            accuracy = []
            for seed in range(draws):
                noisy, _ = flip_labels(train, rate, seed=seed)
                scores, split = scored(noisy)
                was, now, evidence = verdicts(scores, split)
                before, after = before + was, after + now
                unjudged += not dat012.judged(evidence)
                accuracy.append(evidence.informativeness)
            lines.append(
                f"| {name} | {rate:.0%} | {before} of {draws} | {after} of {draws} | {unjudged} of {draws} | "
                f"{min(accuracy):.2f}-{max(accuracy):.2f} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=10, help="table draws of each hard-label shape")
    parser.add_argument("--flip-draws", type=int, default=4, help="flip draws per real table and rate")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    for block in (hard_rows(args.draws), flip_rows(args.flip_draws), hard_flip_rows(args.flip_draws)):
        print("\n".join(block) + "\n", flush=True)


if __name__ == "__main__":
    main()
