"""TRN002 on a blow-up episode that recovers, and the shapes that must stay quiet: spikes, a
warm-up bump, heavy-tailed noise, a new training in the same process, the rise before a NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainmedic.events import Epoch, Event, GuardObservation, Step, TrainingPlan
from trainmedic.record import RunRecord
from trainmedic.rules.trn import trn002_loss_divergence as trn002

from .test_trn001_004_curves import RNG_SEEDS, codes, healthy_steps, steps


def gpt_at_lr_one(seed: int = 0) -> np.ndarray:
    """A GPT at learning rate 1.0: 4.16 -> 3.38 in warm-up, 12.4 at iteration 64, 10-24 until 150,
    back to 3.3 as the cosine schedule lowers the rate (300 iterations, one point each)."""
    rng = np.random.default_rng(seed)
    warm = np.linspace(4.16, 3.38, 64)
    blown = rng.uniform(10.0, 24.0, 86)
    blown[0] = 12.4
    back = 3.3 + 3.0 * np.exp(-np.arange(150) / 10)
    return np.concatenate([warm, blown, back]) * (1 + 0.02 * rng.standard_normal(300))


@pytest.mark.parametrize("seed", range(5))
def test_a_blow_up_that_recovers_is_an_episode_with_its_steps(seed: int) -> None:
    values = gpt_at_lr_one(seed)
    [found] = trn002.loss_divergence(steps(values))
    ev = found.evidence
    assert found.code == "TRN002"
    assert 60 <= ev["episode_start_step"] <= 68
    assert 145 <= ev["episode_end_step"] <= 153
    assert 64 <= ev["peak_step"] <= 149
    assert ev["peak_loss"] == pytest.approx(float(np.max(values[64:150])), rel=0.05)
    assert 3.2 < ev["min_before"] < 4.0
    assert ev["recovered"] is True
    assert found.step == ev["episode_start_step"]
    assert "blew up" in found.message
    assert f"peaking at step {ev['peak_step']}" in found.message
    assert codes(steps(values)) == ["TRN002"]


def test_a_fine_tune_blow_up_is_an_episode() -> None:
    """7.9 -> 6.0 by step 29, 20.7 at step 30, above 12 until step 45, 7 by step 60, 100 steps."""
    values = np.concatenate(
        [
            np.linspace(7.9, 6.0, 30),
            [20.7, 19.0, 18.2, 17.5, 16.8, 16.0, 15.1, 14.7, 14.0, 13.5, 13.1, 12.8, 12.6, 12.4, 12.2, 12.1],
            np.linspace(11.0, 7.0, 14),
            np.linspace(7.0, 6.5, 40),
        ]
    )
    [found] = trn002.loss_divergence(steps(values))
    assert (found.evidence["episode_start_step"], found.evidence["peak_step"]) == (30, 30)
    assert 38 <= found.evidence["episode_end_step"] <= 45


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_spikes_of_one_or_two_steps_are_not_episodes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = healthy_steps(seed)
    for at in rng.choice(np.arange(50, 590), 12, replace=False):
        values[at : at + int(rng.integers(1, 3))] *= 20.0
    assert trn002.loss_divergence(steps(values)) == []


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_a_warm_up_bump_and_heavy_tailed_noise_are_not_episodes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    bump = 2.3 + 0.6 * np.sin(np.linspace(0, np.pi, 40))  # Adam's first steps at a rising rate
    values = np.concatenate([bump, 0.3 + 2.0 * np.exp(-np.arange(560) / 100)])
    assert trn002.loss_divergence(steps(values * (1 + 0.1 * rng.standard_normal(600)))) == []
    noisy = (0.5 + np.exp(-np.arange(600) / 200)) * rng.lognormal(0.0, 0.6, 600)  # an RL-style loss
    assert trn002.loss_divergence(steps(noisy)) == []


def test_a_second_training_after_an_optimizer_handover_is_not_an_episode() -> None:
    """A teacher trained first (cross-entropy down to 0.5), then a student taught by it (a
    distillation loss starting at 2.9): the epoch curve runs through both, the step curve starts
    at the handover."""
    teacher = np.linspace(1.5, 0.5, 80)
    student = 0.5 + 2.5 * np.exp(-np.arange(120) / 40)
    values = np.concatenate([teacher, student])
    events: list[Event] = [
        Step(step=i, epoch=i // 10, metrics={"loss": float(v)}, t=float(i)) for i, v in enumerate(values)
    ]
    events += [
        Epoch(epoch=e, metrics={"loss": float(values[10 * e : 10 * e + 10].mean())}, t=10.0 * e)
        for e in range(20)
    ]
    events.append(GuardObservation(check="optimizer_handover", data={}, step=80, t=80.0))
    assert trn002.loss_divergence(RunRecord.of(events)) == []


def keras_on_torch_second_fit(plan: bool) -> RunRecord:
    """Keras 3 on torch, a second model fit in the process that trained a first one (a notebook,
    a driver running examples one after the other). Keras' own step events are its running mean
    of the epoch, numbered from 1 per fit; the torch guard sees Keras' manual updates and numbers
    its steps on from the first model's (its last window, at 0.03, is sent after the new `fit`
    began). The new model starts at its untrained loss, 0.75, twenty times the first one's end."""
    rng = np.random.default_rng(0)
    events: list[Event] = [
        Step(step=s, epoch=3, metrics={"loss": 0.03}, t=float(s - 3230)) for s in (3210, 3220)
    ]
    t0 = 1.0
    if plan:
        events.append(TrainingPlan(framework="keras", epochs=3, t=t0))
    events.append(Step(step=3230, epoch=3, metrics={"loss": 0.032}, t=t0 + 0.5))
    for e in range(3):  # Keras: the running mean of each epoch, restarting at every epoch
        per_batch = 0.1 + 0.65 * np.exp(-(np.arange(224) + 224 * e) / 120) * (
            1 + 0.2 * rng.standard_normal(224)
        )
        running = np.cumsum(per_batch) / np.arange(1, 225)
        for b in (0, 60, 120, 200):
            t = t0 + 1 + e * 224 + b
            events.append(Step(step=224 * e + b + 1, epoch=e, metrics={"loss": float(running[b])}, t=t))
    for i, s in enumerate(range(3240, 3910, 10)):  # the guard: the new model's window means
        loss = 0.1 + 0.65 * math.exp(-i * 10 / 120) * (1 + 0.05 * float(rng.standard_normal()))
        events.append(Step(step=s, epoch=3, metrics={"loss": loss}, t=t0 + 1 + i * 10))
    events += [Epoch(epoch=e, metrics={"loss": 0.44 / (e + 1)}, t=t0 + 224 * (e + 1)) for e in range(3)]
    return RunRecord.of(sorted(events, key=lambda e: e.t))


@pytest.mark.parametrize("plan", [True, False])
def test_a_new_model_trained_in_the_same_process_is_not_an_episode(plan: bool) -> None:
    assert trn002.loss_divergence(keras_on_torch_second_fit(plan)) == []


def test_the_rise_before_a_nan_is_left_to_trn001() -> None:
    """A warm-up that never stops (tests/report/trainer.py nan): the loss falls from 21 to 0.01 by
    step 30, grows about 4x a step from step 38 and is Inf from step 64 on; 25 steps an epoch,
    the epoch means beside. TRN001 reports it with its step; the rise is no episode of its own."""
    down = 21.0 * np.exp(-np.arange(38) / 4) + 0.01
    up = 0.014 * 4.0 ** np.arange(1, 27)
    values = np.array([*down, *up, *[math.inf] * 11])
    events: list[Event] = [
        Step(step=i, epoch=i // 25, metrics={"loss": float(v)}, t=float(i)) for i, v in enumerate(values)
    ]
    events += [
        Epoch(epoch=e, metrics={"loss": float(values[25 * e : 25 * e + 25].mean())}, t=25.0 * e + 24.5)
        for e in range(3)
    ]
    assert codes(RunRecord.of(events)) == ["TRN001"]
