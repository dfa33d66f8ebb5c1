"""TRN002 on short runs and explosions, TRN003 at chance level, curves of several ranks.

The shapes are those of runs of foreign training code (benchmarks/foreign/): the guard keeps
one loss point per 10 steps, so a 28-step run gives four points; Keras gives one per epoch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainmedic.events import Epoch, Event, GuardObservation, Step
from trainmedic.record import RunRecord
from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
from trainmedic.rules.trn import trn002_loss_divergence as trn002
from trainmedic.rules.trn import trn003_not_learning as trn003

from .test_trn001_004_curves import CURVE_RULES, epochs, healthy_steps, steps


def sampled(values: list[float], every: int = 10) -> RunRecord:
    """Loss points as the torch guard sends them: step 1, then one per `every` steps."""
    xs = [1] + [every * i for i in range(1, len(values))]
    return RunRecord.of(
        Step(step=x, epoch=0, metrics={"loss": v}, t=float(x)) for x, v in zip(xs, values, strict=False)
    )


def test_a_loss_that_jumps_100x_in_a_short_run_diverged() -> None:
    """28 steps of an LSTM LM at 16x its learning rate, unclipped (word_lm_overflow.py)."""
    [finding] = trn002.loss_divergence(sampled([3.918, 4943.5, 11325.5, 11197.6]))
    assert finding.code == "TRN002"
    assert finding.step == 10
    assert finding.evidence["factor_over_start"] > 100
    assert "3.918" in finding.message


def test_a_finite_loss_rising_for_six_epochs_diverged() -> None:
    """0.01 -> 4.8e7 over 6 epochs, all finite: a rise no noise estimate may excuse."""
    [finding] = trn002.loss_divergence(epochs(loss=[0.01, 0.4, 30.0, 2.1e3, 9e5, 4.8e7]))
    assert finding.epoch == 2
    assert finding.evidence["end_loss"] > 1e7


def test_a_rise_that_passes_the_start_only_at_the_last_point_is_not_an_explosion() -> None:
    """'Stays high': one last point above 10x the start is a spike, not a divergence."""
    assert trn002.loss_divergence(sampled([2.3, 1.9, 1.7, 1.6, 40.0])) == []


@pytest.mark.parametrize("seed", range(10))
def test_healthy_losses_near_zero_with_large_relative_scatter_are_not_explosions(seed: int) -> None:
    """Late per-batch losses of a good classifier scatter 10x around 0.01: far below the start."""
    rng = np.random.default_rng(seed)
    clean = 0.01 + 2.3 * np.exp(-np.arange(40) / 4)
    values = clean * np.exp(rng.normal(0, 1.0, 40))
    assert trn002.loss_divergence(sampled(values.tolist())) == []


def test_loss_falling_to_chance_and_staying_there_is_not_learning() -> None:
    """Random logits start above ln 10; learning the bias brings the loss to ln 10, no lower."""
    values = [2.45, 2.36, 2.31] + [math.log(10)] * 30
    [finding] = trn003.not_learning(sampled(values))
    assert finding.evidence["classes"] == 10
    assert finding.evidence["chance_level"] == pytest.approx(2.3026, abs=1e-4)
    assert "chance level" in finding.message
    assert "inferred" in str(finding.evidence["classes_from"])


def test_chance_level_from_a_stated_class_count_allows_batch_scatter() -> None:
    rng = np.random.default_rng(0)
    values = [2.5, 2.38, *(math.log(10) + 0.03 * rng.standard_normal(30)).tolist()]
    stated = GuardObservation(
        check=trn003.LOSS_FUNCTION_OBSERVATION,
        data={"classes": 10, "source": "output layer of width 10"},
        t=0.0,
    )
    record = RunRecord.of([stated, *sampled(values).events])
    [finding] = trn003.not_learning(record)
    assert finding.evidence["classes_from"] == "output layer of width 10"
    assert trn003.not_learning(sampled(values)) == []  # that scatter alone proves nothing


def test_three_epochs_at_chance_with_the_classes_stated() -> None:
    stated = GuardObservation(check=trn003.LOSS_FUNCTION_OBSERVATION, data={"classes": 10}, t=-1.0)
    record = RunRecord.of([stated, *epochs(loss=[2.3314, 2.3014, 2.3024]).events])
    [finding] = trn003.not_learning(record)
    assert "over 3 epochs" in finding.message


def test_a_slow_start_at_chance_that_then_learns_is_healthy() -> None:
    stated = GuardObservation(check=trn003.LOSS_FUNCTION_OBSERVATION, data={"classes": 10}, t=-1.0)
    values = [2.35] + [2.30] * 15 + np.linspace(2.28, 1.2, 20).tolist()
    record = RunRecord.of([stated, *sampled(values).events])
    assert trn003.not_learning(record) == []


def test_a_regression_loss_that_settles_near_2_30_is_not_chance() -> None:
    rng = np.random.default_rng(1)
    values = np.linspace(6.0, 2.3, 10).tolist() + (2.3 + 0.05 * rng.standard_normal(30)).tolist()
    assert trn003.not_learning(sampled(values)) == []


@pytest.mark.parametrize("seed", range(10))
def test_healthy_classifier_curves_with_the_classes_stated_fire_nothing(seed: int) -> None:
    stated = GuardObservation(check=trn003.LOSS_FUNCTION_OBSERVATION, data={"classes": 10}, t=-1.0)
    record = RunRecord.of([stated, *steps(healthy_steps(seed)).events])
    assert [f.code for rule in CURVE_RULES for f in rule(record)] == []


def test_epochs_of_two_ranks_count_once() -> None:
    events: list[Event] = [
        Epoch(epoch=e, rank=r, metrics={"loss": 1.7 + 0.001 * r}, t=float(e) + 0.1 * r)
        for e in range(5)
        for r in (0, 1)
    ]
    [finding] = trn003.not_learning(RunRecord.of(events))
    assert "over 5 epochs" in finding.message
    assert finding.evidence["epochs"] == 5


def test_a_nan_on_one_rank_stays_a_nan() -> None:
    events: list[Event] = [
        Step(step=s, rank=r, metrics={"loss": math.nan if (s, r) == (3, 1) else 1.0}, t=float(s))
        for s in range(5)
        for r in (0, 1)
    ]
    [finding] = trn001.nonfinite_loss(RunRecord.of(events))
    assert finding.step == 3


def test_a_loss_still_falling_through_chance_level_is_learning() -> None:
    """Binary cross-entropy of a slow learner: 0.73, 0.71, 0.69 passes ln 2 on its way down
    (a sharded PyDataset that saw 8 batches an epoch); and a long slow descent through ln 10."""
    stated = GuardObservation(check=trn003.LOSS_FUNCTION_OBSERVATION, data={"classes": 2}, t=-1.0)
    record = RunRecord.of([stated, *epochs(loss=[0.7346, 0.7080, 0.6851]).events])
    assert trn003.not_learning(record) == []
    ten = GuardObservation(check=trn003.LOSS_FUNCTION_OBSERVATION, data={"classes": 10}, t=-1.0)
    descent = np.linspace(2.349, 2.262, 40).tolist()
    assert trn003.not_learning(RunRecord.of([ten, *sampled(descent).events])) == []


def test_an_explosion_inside_the_first_epoch_is_measured_from_the_first_step() -> None:
    """Keras logs step 1, then epoch means: a regression on an unscaled target explodes within
    epoch 0 and falls back slowly, every epoch mean ~10^22x the first step's loss
    (keras/custom_train_step.py --bug raw-target)."""
    record = RunRecord.of(
        [
            Step(step=1, epoch=0, metrics={"loss": 3.99e4}, t=0.0),
            *epochs(loss=[2.1e33, 1.0e31, 9.1e29, 8.0e28, 7.1e27, 6.2e26]).events,
        ]
    )
    [finding] = trn002.loss_divergence(record)
    assert finding.evidence["start_loss"] == 3.99e4
    assert finding.epoch == 1  # 1-based, as "Epoch 1/6" in the log
    assert "at its first step" in finding.message


def test_a_first_step_above_the_epoch_means_changes_nothing() -> None:
    """The usual shape: the first batch's loss is the highest; the epoch means fall."""
    record = RunRecord.of(
        [Step(step=1, epoch=0, metrics={"loss": 2.4}, t=0.0), *epochs(loss=[1.2, 0.8, 0.6, 0.5, 0.45]).events]
    )
    assert trn002.loss_divergence(record) == []


# The loss points (one per 10 episodes) of three runs of a REINFORCE policy gradient on a
# pole-balancing task: -sum(log pi(a|s) x normalised return) per episode, one update each. All
# three solved the task; the loss grows with the episodes' length, as the policy improves.
REINFORCE_RUNS = [
    [float(v) for v in text.split()]
    for text in (
        """-0.39 1.11 0.53 0.04 1.63 0.78 0.23 0.17 -1.06 0.48 1.77 0.48 -0.98 0.66 -0.59 0.23 0.54
        0.28 2.02 3.52 0.16 -1.46 -0.91 -0.92 -0.64 1.33 3.15 2.67 1.8 5.01 2.16 2.33 4.67 5.39 4.98
        5.13 5.15 9.31 6.5 2.65 6.73 8.32 7.08 7.26 6.15 2.16""",
        """1.17 -0.02 -0.27 -0.12 0.31 0.08 -0.75 1.25 -0.85 0.31 3.04 1.18 1.93 0.15 1.46 1.48 -0.51
        4.87 0.35 3.87 4.87 1.43 7.36 5.47 5.56 6.87 3.82 1.89 -0.38 0.21 2.06 3.44 -0.83 -1.26 0.67
        2.94 4.96""",
        """-0.8 0.46 1.12 0.32 0.19 0.49 -1.18 1.73 2.52 2.94 1.39 3.97 2.47 1.42 -2.75 -0.36 2.08 0.34
        -1.15 -0.51 3.42 3.81 2.5 5.21 -0.05 -0.96 0.53 2.05""",
    )
]


@pytest.mark.parametrize("values", REINFORCE_RUNS)
def test_a_policy_gradient_surrogate_centred_on_zero_is_not_judged_by_its_level(values) -> None:
    """Its sign and size are not a fit: no divergence, no 'not learning' (each fired before)."""
    record = sampled(values)
    assert trn002.loss_divergence(record) == []
    assert trn003.not_learning(record) == []


def test_a_surrogate_positive_on_short_early_episodes_then_of_both_signs_is_not_judged() -> None:
    """REINFORCE as published (its running reward 10 -> 475): on the short early episodes the
    surrogate is small and mostly positive (no centred first half), later it scatters on both
    sides of zero. Its sign changes over the whole run say it is no learning curve; read as
    one it 'did not decrease beyond noise' (it did before)."""
    early = [0.41, 0.33, 0.36, 0.52, 0.29, 0.18, 0.44, 0.31, -0.06, 0.27]
    early += [0.39, 0.22, 0.13, 0.35, 0.48, 0.26, 0.12, 0.31, 0.21, 0.4]
    late = [0.95, -1.31, 1.62, -0.44, 2.08, -1.73, 0.71, 1.86, -0.58, 0.12]
    late += [-2.2, 1.4, 0.3, -0.9, 2.5, 0.88, -1.1, 1.2, 0.62, 0.89]
    assert trn003.not_learning(sampled(early + late)) == []


# One point per 10 episodes of a real REINFORCE run with CartPole-v1's limits (500 steps, solved
# at a running reward of 475 after 737 episodes), its surrogate mean- rather than sum-reduced:
# -mean(log pi(a|s) x normalised return) is small, mostly positive, and takes both signs.
_MEAN_SURROGATE_TEXT = """0.0432 0.0554 0.0056 -0.0302 0.019 0.034 0.1036 0.0405 -0.0318 -0.1102 0.0294 0.011
        0.0074 -0.0072 0.0341 -0.1887 0.0431 0.0325 0.0436 -0.187 0.104 -0.0085 -0.0151 0.0477
        0.0325 0.0663 0.0136 0.0129 -0.0149 0.0852 0.1135 0.11 -0.0327 0.0413 0.0279 0.0252
        0.0211 -0.0227 0.0192 -0.0005 0.0003 -0.0109 0.0663 0.0617 0.0776 0.0988 0.0791 0.0039
        0.0317 -0.0068 -0.001 0.016 0.0049 0.0459 -0.0223 0.0124 0.0041 0.0009 0.0222 -0.0094
        0.0033 0.0137 -0.0308 0.0145 0.0082 -0.0019 0.0161 0.0259 0.0075 0.031 -0.0236 0.0032
        0.0153 0.0138"""
REINFORCE_MEAN_SURROGATE = [float(v) for v in _MEAN_SURROGATE_TEXT.split()]


def test_a_real_mean_reduced_surrogate_of_a_solved_run_is_not_judged() -> None:
    """Read as a learning curve it 'did not decrease beyond noise: 0.034 at the start, best
    0.0003, last 0.0138' (it did before)."""
    assert trn003.not_learning(sampled(REINFORCE_MEAN_SURROGATE)) == []


def test_a_loss_that_stays_at_its_level_on_one_side_of_zero_is_still_not_learning() -> None:
    """A few excursions below zero in a flat positive loss are not a surrogate: still judged."""
    values = [0.3, 0.31, -0.02, 0.29, 0.3, 0.32, 0.28, 0.3, -0.01, 0.31] * 3
    [finding] = trn003.not_learning(sampled(values))
    assert finding.code == "TRN003"


def test_a_log_density_that_crosses_zero_once_and_then_explodes_still_diverged() -> None:
    """A continuous likelihood falls below zero as it fits: one crossing is not a centred loss."""
    values = [1.4, 1.1, 0.8, 0.5, 0.2, -0.1, -0.4, -0.6, -0.8, -0.9, -1.0, -1.05]
    values += [-0.9, 2.0, 30.0, 400.0, 900.0, 1500.0, 2100.0, 2600.0, 3000.0, 3200.0]
    [finding] = trn002.loss_divergence(sampled(values))
    assert finding.code == "TRN002"


def test_the_loss_rules_judge_the_training_an_optimizer_took_over_from_its_handover() -> None:
    """Layer-wise training: layer 0's loss falls to 0.25; layer 1's (another objective, from
    the handover at step 610) never leaves 1.127. Glued, the restart read as a divergence."""
    first = np.linspace(1.4, 0.25, 60).tolist()
    events: list[Event] = [
        Step(step=10 * (i + 1), epoch=0, metrics={"loss": v}, t=float(i)) for i, v in enumerate(first)
    ]
    events += [Step(step=600 + 10 * i, epoch=0, metrics={"loss": 1.127}, t=60.0 + i) for i in range(1, 56)]
    handover = GuardObservation(check="optimizer_handover", data={"optimizer": "Adam"}, step=610)
    assert [f.code for f in trn002.loss_divergence(RunRecord.of(events))] == ["TRN002"]
    record = RunRecord.of([*events, handover])
    assert trn002.loss_divergence(record) == []
    [finding] = trn003.not_learning(record)
    assert finding.evidence["start_loss"] == 1.127
