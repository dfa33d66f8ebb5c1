"""TRN003 on the curves of several jobs of one run, and on a policy-gradient surrogate.

A run restarted from a trained checkpoint folder logs, from a second process, low losses at the
same steps where the first job's were still high: sorted by step, the two interleave, and their
jumps must not read as noise (the flat-loss threshold is twice the noise).
"""

from __future__ import annotations

import numpy as np
import pytest

from trainmedic.events import Event, GuardObservation, Step
from trainmedic.evidence.curves import noise_sigma, train_loss
from trainmedic.record import RunRecord
from trainmedic.rules.trn import trn003_not_learning as trn003

STEPS = np.arange(10, 510, 10)


def two_jobs(first: np.ndarray, second: np.ndarray) -> RunRecord:
    """Two processes of one `trainmedic run`, each counting its steps from 0, a binary classifier."""
    events: list[Event] = [
        GuardObservation(check="loss_function", data={"classes": 2, "source": "the test"}, t=0.0, pid=1)
    ]
    for pid, t0, losses in ((1, 1.0, first), (2, 100.0, second)):
        events += [
            Step(step=int(s), metrics={"loss": float(v)}, t=t0 + i, pid=pid)
            for i, (s, v) in enumerate(zip(STEPS, losses, strict=True))
        ]
    return RunRecord.of(events)


def test_a_job_restarted_from_a_trained_checkpoint_does_not_make_the_run_look_flat() -> None:
    """The first job sits at ln 2 for 350 steps, then learns (0.03); the second, started from
    its checkpoint folder with a fresh step count, logs 0.022-0.03 from step 10 on."""
    rng = np.random.default_rng(0)
    first = np.where(STEPS < 350, 0.69, 0.03 + 0.66 * np.exp(-(STEPS - 350) / 30))
    first = first + 0.01 * rng.standard_normal(len(STEPS))
    second = 0.026 - 0.004 * STEPS / 500 + 0.004 * rng.standard_normal(len(STEPS))
    record = two_jobs(first, second)
    assert trn003.not_learning(record) == []
    c = train_loss(record)
    assert c is not None
    assert noise_sigma(c.y, c.source) < 0.02 < noise_sigma(c.y)  # the interleaving is no noise


def test_two_jobs_that_both_stay_at_chance_are_still_not_learning() -> None:
    rng = np.random.default_rng(1)
    first, second = (np.log(2) + 0.003 * rng.standard_normal(len(STEPS)) for _ in range(2))
    [finding] = trn003.not_learning(two_jobs(first, second))
    assert "stayed at chance level" in finding.message


def episodes(losses: np.ndarray) -> RunRecord:
    """One optimizer step per episode, a loss point every 10 (as the guard logs them)."""
    return RunRecord.of(
        Step(step=max(1, 10 * i), metrics={"loss": float(v)}, t=float(i)) for i, v in enumerate(losses)
    )


def test_a_policy_gradient_surrogate_mostly_positive_is_not_judged() -> None:
    """REINFORCE solving CartPole (680 episodes, 69 points): -sum(log pi x normalised return)
    is positive on most episodes, scatters as much as its level, and dips below zero again and
    again (about one point in ten). Its level says nothing of the fit."""
    y = 0.45 + 0.35 * np.random.default_rng(3).standard_normal(69)
    assert 3 <= int((y < 0).sum()) <= 10
    assert trn003.not_learning(episodes(y)) == []


@pytest.mark.parametrize(
    "losses",
    [
        2.3026 + 0.02 * np.random.default_rng(4).standard_normal(69),  # cross-entropy at ln 10
        np.abs(0.1 + 0.04 * np.random.default_rng(5).standard_normal(69)),  # flat, near zero, scattered
    ],
    ids=["cross-entropy", "flat-near-zero"],
)
def test_a_loss_that_never_changes_sign_is_still_judged(losses: np.ndarray) -> None:
    [finding] = trn003.not_learning(episodes(losses))
    assert finding.code == "TRN003"
