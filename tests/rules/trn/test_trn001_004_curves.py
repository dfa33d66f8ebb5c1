"""TRN001-TRN004 on hand-checked curves: each broken shape fires once, healthy noisy ones never do.

The curves are formulas, on purpose (a rule's unit test needs a known shape); none is a
failure-benchmark case, whose curves all come from real trainings.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainmedic.events import Epoch, Event, MetricSeries, Step
from trainmedic.record import RunRecord
from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
from trainmedic.rules.trn import trn002_loss_divergence as trn002
from trainmedic.rules.trn import trn003_not_learning as trn003
from trainmedic.rules.trn import trn004_overfitting as trn004

RNG_SEEDS = range(20)
#: The loss-curve rules (TRN004's boosting rule reads observations, not curves).
CURVE_RULES = (trn001.nonfinite_loss, trn002.loss_divergence, trn003.not_learning, trn004.overfitting)


def epochs(**series: list[float]) -> RunRecord:
    n = len(next(iter(series.values())))
    return RunRecord.of(
        Epoch(epoch=i, metrics={k: v[i] for k, v in series.items()}, t=float(i)) for i in range(n)
    )


def steps(values: list[float] | np.ndarray, name: str = "loss", per_epoch: int = 0) -> RunRecord:
    events: list[Event] = [
        Step(step=i, epoch=(i // per_epoch if per_epoch else None), metrics={name: float(v)}, t=float(i))
        for i, v in enumerate(values)
    ]
    return RunRecord.of(events)


def series(name: str, values: np.ndarray) -> MetricSeries:
    """A log curve as the TensorBoard reader hands it over: numpy arrays, not Python lists."""
    return MetricSeries(name=name, steps=np.arange(len(values)), values=values.copy())


def codes(record: RunRecord) -> list[str]:
    return [f.code for rule in CURVE_RULES for f in rule(record)]


def healthy_steps(seed: int, n: int = 600, noise: float = 0.15) -> np.ndarray:
    rng = np.random.default_rng(seed)
    clean = 0.3 + 2.0 * np.exp(-np.arange(n) / (n / 5))
    return clean * (1 + noise * rng.standard_normal(n))


def healthy_epochs(seed: int, n: int = 30) -> tuple[list[float], list[float]]:
    """Train falls; validation falls then plateaus with noise (no overfitting)."""
    rng = np.random.default_rng(seed)
    e = np.arange(n)
    train = 0.2 + 2.0 * np.exp(-e / 5) + 0.02 * rng.standard_normal(n)
    val = 0.45 + 1.8 * np.exp(-e / 5) + 0.03 * rng.standard_normal(n)
    return train.tolist(), val.tolist()


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_healthy_noisy_curves_fire_nothing(seed: int) -> None:
    assert codes(steps(healthy_steps(seed))) == []
    train, val = healthy_epochs(seed)
    assert codes(epochs(loss=train, val_loss=val)) == []


def test_nonfinite_loss_gives_first_step_and_epoch() -> None:
    values = [2.3, 1.9, 8.1, 1e12, math.inf, math.nan, math.nan]
    [finding] = trn001.nonfinite_loss(steps(values, per_epoch=3))
    assert (finding.code, finding.step, finding.epoch) == ("TRN001", 4, 2)  # epochs count from 1
    assert finding.evidence["value"] == "+Inf"
    assert finding.evidence["last_finite_value"] == 1e12
    assert "step 4 (epoch 2)" in finding.message


def test_nonfinite_validation_loss_is_reported_too() -> None:
    [finding] = trn001.nonfinite_loss(epochs(loss=[1.0, 0.9, 0.8], val_loss=[1.1, math.nan, math.nan]))
    assert finding.evidence["metric"] == "val_loss"
    assert finding.epoch == 2


def test_divergence_after_a_minimum() -> None:
    rng = np.random.default_rng(0)
    down = 2.3 * np.exp(-np.arange(300) / 60) + 0.4
    up = np.linspace(0.4, 5.0, 300)
    values = np.concatenate([down, up]) * (1 + 0.05 * rng.standard_normal(600))
    found = trn002.loss_divergence(steps(values))
    assert [f.code for f in found] == ["TRN002"]
    ev = found[0].evidence
    assert 250 <= ev["min_step"] <= 340
    assert ev["end_loss"] > 4.0
    assert 300 < ev["departed_at_step"] < 450
    assert codes(steps(values)) == ["TRN002"]  # not also "not learning"


def test_a_single_spike_is_not_divergence() -> None:
    values = healthy_steps(1)
    values[400] = 50.0
    assert trn002.loss_divergence(steps(values)) == []


def test_divergence_that_recovers_is_an_episode() -> None:
    """A rise to 6x the best (1.5x the start) over a third of the run is a blow-up, even when the
    loss comes back by the end (tests/rules/trn/test_trn002_blowup_episode.py has the shapes)."""
    down = np.linspace(2.0, 0.5, 200)
    bump = np.concatenate([np.linspace(0.5, 3.0, 100), np.linspace(3.0, 0.4, 100)])
    [found] = trn002.loss_divergence(steps(np.concatenate([down, bump])))
    assert found.evidence["recovered"] is True
    assert 200 < found.evidence["episode_start_step"] < found.evidence["episode_end_step"] < 400


def test_flat_loss_is_not_learning() -> None:
    rng = np.random.default_rng(3)
    flat = (math.log(10) + 0.01 * rng.standard_normal(20)).tolist()
    [finding] = trn003.not_learning(epochs(loss=flat))
    assert finding.code == "TRN003"
    assert finding.evidence["epochs"] == 20
    assert abs(finding.evidence["start_loss"] - math.log(10)) < 0.05


def test_fast_drop_then_plateau_is_learning() -> None:
    values = np.concatenate([np.linspace(2.3, 0.2, 10), np.full(200, 0.2)])
    values = values * (1 + 0.1 * np.random.default_rng(4).standard_normal(len(values)))
    assert trn003.not_learning(steps(values)) == []


def test_flat_per_batch_loss_is_judged_by_epoch_means() -> None:
    """Batches differ by ±5 % (the same batches every epoch) while the run moves 0.01 %: on
    steps a noise dip reads as progress, the epoch means show the run is flat."""
    batch_difficulty = 1 + 0.05 * np.random.default_rng(5).standard_normal(50)
    values = np.concatenate([0.7080 * batch_difficulty - 1e-5 * e for e in range(8)])
    [finding] = trn003.not_learning(steps(values, per_epoch=50))
    assert finding.evidence["epochs"] == 8
    assert finding.evidence["points"] == 400
    assert "over 8 epochs (means of 400 logged steps)" in finding.message


def test_slow_but_steady_per_batch_learning_is_not_flagged() -> None:
    batch_difficulty = 1 + 0.05 * np.random.default_rng(6).standard_normal(50)
    values = np.concatenate([(0.70 - 0.01 * e) * batch_difficulty for e in range(8)])
    assert trn003.not_learning(steps(values, per_epoch=50)) == []
    fast_then_flat = np.concatenate([np.linspace(2.3, 0.2, 10), np.full(200, 0.2)])
    assert trn003.not_learning(steps(fast_then_flat, per_epoch=20)) == []


def test_flat_sampled_step_losses_with_a_low_first_batch_are_not_learning() -> None:
    """The guard's sampled step losses of a real lr=1e-6 run (benchmark case
    trn-not-learning-lr-too-small): the first batch happened to be the easiest one."""
    values = [
        0.6875,
        0.7042,
        0.7098,
        0.7162,
        0.703,
        0.7122,
        0.7119,
        0.7108,
        0.7061,
        0.7141,
        0.715,
        0.7035,
        0.7159,
    ]
    values += [0.7066, 0.7052, 0.7071, 0.7186, 0.7025, 0.7098, 0.7162, 0.703, 0.7121, 0.7119, 0.7108, 0.7061]
    values += [0.714, 0.7141]
    [finding] = trn003.not_learning(steps(values))
    assert finding.evidence["best_loss"] > 0.70  # not the first batch's 0.6875


def test_too_few_points_are_not_judged() -> None:
    assert trn003.not_learning(epochs(loss=[1.7, 1.7, 1.7])) == []  # flat, not at any chance level
    assert trn003.not_learning(epochs(loss=[2.3026, 2.3026])) == []  # at chance, but two epochs
    assert trn002.loss_divergence(epochs(loss=[0.1, 50.0])) == []


def test_overfitting_gives_the_turning_epoch() -> None:
    train = [1.0, 0.7, 0.5, 0.4, 0.33, 0.3, 0.25, 0.2, 0.16, 0.13, 0.1, 0.08, 0.07, 0.06, 0.05]
    val = [1.0, 0.8, 0.65, 0.58, 0.54, 0.52, 0.53, 0.55, 0.58, 0.61, 0.65, 0.7, 0.74, 0.77, 0.80]
    [finding] = trn004.overfitting(epochs(loss=train, val_loss=val))
    assert finding.code == "TRN004"
    assert finding.epoch == 6  # the sixth epoch, counted from 1 as in the message
    assert finding.evidence["turn_epoch"] == 6
    assert finding.evidence["val_end"] > 0.7
    assert "epoch 6" in finding.message
    assert "epoch 6" in finding.fix


def test_overfitting_on_step_logs_hf_style() -> None:
    """HF: train loss every 10 steps, eval loss every 100 steps, both as log series."""
    train_steps = list(range(10, 1001, 10))
    train = [2.0 * math.exp(-s / 300) + 0.05 for s in train_steps]
    eval_steps = list(range(100, 1001, 100))
    val = [1.5, 1.0, 0.8, 0.75, 0.78, 0.85, 0.95, 1.05, 1.15, 1.3]
    record = RunRecord.of(
        [
            MetricSeries(
                name="loss", steps=train_steps, values=train, epochs=[s // 200 for s in train_steps]
            ),
            MetricSeries(
                name="eval_loss", steps=eval_steps, values=val, epochs=[s // 200 for s in eval_steps]
            ),
        ]
    )
    [finding] = trn004.overfitting(record)
    assert finding.step == 400
    assert finding.evidence["train_end"] < finding.evidence["train_at_turn"]


def test_val_rising_with_train_rising_is_not_overfitting() -> None:
    rising = [0.5, 0.45, 0.4, 0.42, 0.5, 0.6, 0.7, 0.8]
    assert trn004.overfitting(epochs(loss=rising, val_loss=rising)) == []


@pytest.mark.slow
def test_million_point_series_is_reduced() -> None:
    values = healthy_steps(5, n=1_000_000, noise=0.3)
    record = RunRecord.of(
        [MetricSeries(name="train/loss", steps=list(range(len(values))), values=values.tolist())]
    )
    assert codes(record) == []
    values[700_000:] = np.nan
    record = RunRecord.of(
        [MetricSeries(name="train/loss", steps=list(range(len(values))), values=values.tolist())]
    )
    [finding] = trn001.nonfinite_loss(record)
    assert finding.step == 700_000


def test_nonfinite_prefers_the_step_when_steps_and_epochs_carry_the_loss() -> None:
    events: list[Event] = [Step(step=i, epoch=i // 4, metrics={"loss": 1.0}, t=float(i)) for i in range(6)]
    events.append(Step(step=6, epoch=1, metrics={"loss": math.nan}, t=6.5))
    events += [
        Epoch(epoch=0, metrics={"loss": 1.0}, t=4.0),
        Epoch(epoch=1, metrics={"loss": math.nan}, t=8.0),
    ]
    [finding] = trn001.nonfinite_loss(RunRecord.of(events))
    assert (finding.step, finding.epoch) == (6, 2)


@pytest.mark.parametrize("period", [1, 4])
def test_loss_that_converged_in_its_first_points_is_learning(period: int) -> None:
    """A linear model updated by hand at thousands of steps a second converges within the first
    1 % of the run, then its logged loss repeats the same few values to the last digit (a fixed
    point over a cycle of batches; the bucket means of a long run are one value). The median of
    the first tenth is already the floor; the first points say it learned."""
    floor = [0.0083, 0.0091, 0.0079, 0.0088][:period]
    values = [4.0 * math.exp(-i / 4) + floor[0] for i in range(20)]
    values += [floor[i % period] for i in range(2400)]
    assert trn003.not_learning(steps(values)) == []


def test_flat_loss_with_one_high_first_point_is_still_not_learning() -> None:
    """One high first batch is not a halving of the loss: the first points' median decides."""
    rng = np.random.default_rng(0)
    values = list(2.30 + 0.02 * rng.standard_normal(400))
    values[0] = 9.0
    assert [f.code for f in trn003.not_learning(steps(values))] == ["TRN003"]
