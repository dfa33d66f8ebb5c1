"""DAT012's yardstick: hard, honest labels (synthetic tables in the shape of public ones) give no
warning where the model is weak; planted flips are still found where it is strong."""

from __future__ import annotations

import numpy as np
import pytest

from trainmedic.data import check, check_report
from trainmedic.data.noise import score_label_noise
from trainmedic.findings import Severity
from trainmedic.rules.dat import dat012_label_noise as dat012

from .hard_labels import HARD_LABELS, LABEL, votes_like
from .real import flip_labels, table, user_split

# (table, seed, test share): the glass shape splits 214 rows into 133 for training (the report's
# "18 of 134"), the survival shape 418 into 292, the churn shape 5,000 into 3,500.
HARD = [("glass_like", 6, 0.375), ("survival_like", 0, 0.3), ("churn_like", 0, 0.3)]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "seed", "test_size"), HARD)
def test_hard_honest_labels_give_no_label_noise_warning(name: str, seed: int, test_size: float) -> None:
    train, test = user_split(HARD_LABELS[name](seed=seed), test_size=test_size)
    scores = score_label_noise(train, [c for c in train.columns if c != LABEL], LABEL)
    assert scores is not None
    flagged = int(scores.suspicious.sum())
    # the shape of the report: the labels are judged, and the refitted model alone would warn
    assert scores.informativeness >= dat012.MIN_INFORMATIVENESS
    assert flagged >= dat012.UNCERTAINTY_MARGIN * scores.expected
    assert flagged / len(scores.positions) >= dat012.LABEL_NOISE_FRACTION
    findings = [f for f in check(train, test, label=LABEL) if f.code == "DAT012"]
    assert findings == []


def test_a_strong_model_disagreeing_with_a_real_outcome_is_no_label_noise() -> None:
    """A self-reported vote: the model is strong and the flagged rows pass the refitted
    count, but they grow rarer where the model is surer (honest outcomes), so its calibration
    on every label finds no share flipped at random: a note, no warning."""
    train, _ = user_split(votes_like(rows=1_500), test_size=0.25)
    report = check_report(train, label=LABEL)
    assert [f for f in report.findings if f.code == "DAT012"] == []
    (note,) = [n for n in report.summary.notes if n.startswith("label noise:")]
    assert "flipped at random" in note


def test_random_flips_are_the_share_the_calibration_finds() -> None:
    """5 % flips into a clean table: the calibration's flipped share is about 5 %."""
    train, _ = user_split(table("wine"))
    noisy, flipped = flip_labels(train, 0.05, seed=0)
    scores = score_label_noise(noisy, [c for c in noisy.columns if c != LABEL], LABEL)
    assert scores is not None
    assert scores.flipped_share == pytest.approx(len(flipped) / len(noisy), abs=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["breast_cancer", "wine"])
def test_ten_percent_flips_still_warned_where_the_model_weakens(name: str) -> None:
    """10 % flips cost a near-perfect model 0.2-0.3 of normalised accuracy: the yardstick
    widens, and the flips still clear it."""
    train, test = user_split(table(name))
    noisy, flipped = flip_labels(train, 0.10, seed=0)
    (finding,) = [f for f in check(noisy, test, label=LABEL) if f.code == "DAT012"]
    assert finding.severity is Severity.WARNING
    scores = score_label_noise(noisy, [c for c in noisy.columns if c != LABEL], LABEL)
    assert scores is not None
    flagged = scores.positions[scores.suspicious]
    assert len(np.intersect1d(flagged, flipped)) / len(flipped) >= 0.8


def _evidence(informativeness: float) -> dat012.NoiseScore:
    """The churn report's counts: 98 of 3,500 flagged; the refitted model expects 19.4, the
    first pass (fitted on every label) 90."""
    return dat012.NoiseScore(
        oof_accuracy=0.94,
        baseline=0.86,
        informativeness=informativeness,
        model="HistGradientBoostingClassifier",
        flagged=98,
        scored=3_500,
        total_rows=3_500,
        expected=19.4,
        ambiguous=0,
        expected_honest=90.0,
    )


def test_a_weak_model_is_judged_against_the_first_pass_expectation() -> None:
    assert dat012.judge(_evidence(0.6)) == []
    (finding,) = dat012.judge(_evidence(0.9))  # a strong model: the refitted expectation
    assert finding.severity is Severity.WARNING
    assert "accounts for 19.4" in finding.message
    between = _evidence((dat012.WEAK_MODEL + dat012.STRONG_MODEL) / 2)
    assert between.yardstick == pytest.approx(19.4 + 0.5 * (90.0 - 19.4))
    assert finding.evidence["expected_from_first_pass_model"] == 90.0
