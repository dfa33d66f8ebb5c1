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
from trainmedic.rules import dynamics

from .test_dynamics_rules import epochs, healthy_steps, steps


def sampled(values: list[float], every: int = 10) -> RunRecord:
    """Loss points as the torch guard sends them: step 1, then one per `every` steps."""
    xs = [1] + [every * i for i in range(1, len(values))]
    return RunRecord.of(
        Step(step=x, epoch=0, metrics={"loss": v}, t=float(x)) for x, v in zip(xs, values, strict=False)
    )


def test_a_loss_that_jumps_100x_in_a_short_run_diverged() -> None:
    """28 steps of an LSTM LM at 16x its learning rate, unclipped (word_lm_overflow.py)."""
    [finding] = dynamics.loss_divergence(sampled([3.918, 4943.5, 11325.5, 11197.6]))
    assert finding.code == "TRN002"
    assert finding.step == 10
    assert finding.evidence["factor_over_start"] > 100
    assert "3.918" in finding.message


def test_a_finite_loss_rising_for_six_epochs_diverged() -> None:
    """0.01 -> 4.8e7 over 6 epochs, all finite: a rise no noise estimate may excuse."""
    [finding] = dynamics.loss_divergence(epochs(loss=[0.01, 0.4, 30.0, 2.1e3, 9e5, 4.8e7]))
    assert finding.epoch == 2
    assert finding.evidence["end_loss"] > 1e7


def test_a_rise_that_passes_the_start_only_at_the_last_point_is_not_an_explosion() -> None:
    """'Stays high': one last point above 10x the start is a spike, not a divergence."""
    assert dynamics.loss_divergence(sampled([2.3, 1.9, 1.7, 1.6, 40.0])) == []


@pytest.mark.parametrize("seed", range(10))
def test_healthy_losses_near_zero_with_large_relative_scatter_are_not_explosions(seed: int) -> None:
    """Late per-batch losses of a good classifier scatter 10x around 0.01: far below the start."""
    rng = np.random.default_rng(seed)
    clean = 0.01 + 2.3 * np.exp(-np.arange(40) / 4)
    values = clean * np.exp(rng.normal(0, 1.0, 40))
    assert dynamics.loss_divergence(sampled(values.tolist())) == []


def test_loss_falling_to_chance_and_staying_there_is_not_learning() -> None:
    """Random logits start above ln 10; learning the bias brings the loss to ln 10, no lower."""
    values = [2.45, 2.36, 2.31] + [math.log(10)] * 30
    [finding] = dynamics.not_learning(sampled(values))
    assert finding.evidence["classes"] == 10
    assert finding.evidence["chance_level"] == pytest.approx(2.3026, abs=1e-4)
    assert "chance level" in finding.message
    assert "inferred" in str(finding.evidence["classes_from"])


def test_chance_level_from_a_stated_class_count_allows_batch_scatter() -> None:
    rng = np.random.default_rng(0)
    values = [2.5, 2.38, *(math.log(10) + 0.03 * rng.standard_normal(30)).tolist()]
    stated = GuardObservation(
        check=dynamics.LOSS_FUNCTION_CHECK, data={"classes": 10, "source": "output layer of width 10"}, t=0.0
    )
    record = RunRecord.of([stated, *sampled(values).events])
    [finding] = dynamics.not_learning(record)
    assert finding.evidence["classes_from"] == "output layer of width 10"
    assert dynamics.not_learning(sampled(values)) == []  # that scatter alone proves nothing


def test_three_epochs_at_chance_with_the_classes_stated() -> None:
    stated = GuardObservation(check=dynamics.LOSS_FUNCTION_CHECK, data={"classes": 10}, t=-1.0)
    record = RunRecord.of([stated, *epochs(loss=[2.3314, 2.3014, 2.3024]).events])
    [finding] = dynamics.not_learning(record)
    assert "over 3 epochs" in finding.message


def test_a_slow_start_at_chance_that_then_learns_is_healthy() -> None:
    stated = GuardObservation(check=dynamics.LOSS_FUNCTION_CHECK, data={"classes": 10}, t=-1.0)
    values = [2.35] + [2.30] * 15 + np.linspace(2.28, 1.2, 20).tolist()
    record = RunRecord.of([stated, *sampled(values).events])
    assert dynamics.not_learning(record) == []


def test_a_regression_loss_that_settles_near_2_30_is_not_chance() -> None:
    rng = np.random.default_rng(1)
    values = np.linspace(6.0, 2.3, 10).tolist() + (2.3 + 0.05 * rng.standard_normal(30)).tolist()
    assert dynamics.not_learning(sampled(values)) == []


@pytest.mark.parametrize("seed", range(10))
def test_healthy_classifier_curves_with_the_classes_stated_fire_nothing(seed: int) -> None:
    stated = GuardObservation(check=dynamics.LOSS_FUNCTION_CHECK, data={"classes": 10}, t=-1.0)
    record = RunRecord.of([stated, *steps(healthy_steps(seed)).events])
    assert [f.code for rule in dynamics.RULES for f in rule(record)] == []


def test_epochs_of_two_ranks_count_once() -> None:
    events: list[Event] = [
        Epoch(epoch=e, rank=r, metrics={"loss": 1.7 + 0.001 * r}, t=float(e) + 0.1 * r)
        for e in range(5)
        for r in (0, 1)
    ]
    [finding] = dynamics.not_learning(RunRecord.of(events))
    assert "over 5 epochs" in finding.message
    assert finding.evidence["epochs"] == 5


def test_a_nan_on_one_rank_stays_a_nan() -> None:
    events: list[Event] = [
        Step(step=s, rank=r, metrics={"loss": math.nan if (s, r) == (3, 1) else 1.0}, t=float(s))
        for s in range(5)
        for r in (0, 1)
    ]
    [finding] = dynamics.nonfinite_loss(RunRecord.of(events))
    assert finding.step == 3


def test_a_loss_still_falling_through_chance_level_is_learning() -> None:
    """Binary cross-entropy of a slow learner: 0.73, 0.71, 0.69 passes ln 2 on its way down
    (a sharded PyDataset that saw 8 batches an epoch); and a long slow descent through ln 10."""
    stated = GuardObservation(check=dynamics.LOSS_FUNCTION_CHECK, data={"classes": 2}, t=-1.0)
    record = RunRecord.of([stated, *epochs(loss=[0.7346, 0.7080, 0.6851]).events])
    assert dynamics.not_learning(record) == []
    ten = GuardObservation(check=dynamics.LOSS_FUNCTION_CHECK, data={"classes": 10}, t=-1.0)
    descent = np.linspace(2.349, 2.262, 40).tolist()
    assert dynamics.not_learning(RunRecord.of([ten, *sampled(descent).events])) == []


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
    [finding] = dynamics.loss_divergence(record)
    assert finding.evidence["start_loss"] == 3.99e4
    assert finding.epoch == 1  # 1-based, as "Epoch 1/6" in the log
    assert "at its first step" in finding.message


def test_a_first_step_above_the_epoch_means_changes_nothing() -> None:
    """The usual shape: the first batch's loss is the highest; the epoch means fall."""
    record = RunRecord.of(
        [Step(step=1, epoch=0, metrics={"loss": 2.4}, t=0.0), *epochs(loss=[1.2, 0.8, 0.6, 0.5, 0.45]).events]
    )
    assert dynamics.loss_divergence(record) == []
