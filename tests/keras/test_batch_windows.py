"""Every batch's loss in the Keras curve without a read per batch (keras._recorder).

Keras' own train_step logs the epoch's running mean; two readings give the exact mean of the
batches between them. A real fit on Keras 3 / TensorFlow in a child (batch_windows.py), read
every third batch by a clock that advances per read, against every batch's logs recorded by
a user callback; and a model with its own train_step, whose readings stay as logged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import line_env

pytestmark = pytest.mark.slow
CHILD = Path(__file__).with_name("batch_windows.py")
BATCHES = 10  # 320 rows in batches of 32


@pytest.fixture(scope="module")
def fits() -> dict:
    env = {**os.environ, **line_env("keras3-tensorflow"), "TRAINMEDIC_INSTRUMENT": "0"}
    result = subprocess.run(
        [sys.executable, str(CHILD)],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def batch_losses(running: list[float]) -> list[float]:
    """Each batch's loss from the running means Keras logs, epoch by epoch."""
    out = []
    for epoch in range(len(running) // BATCHES):
        means = running[epoch * BATCHES : (epoch + 1) * BATCHES]
        out += [means[0]] + [(k + 1) * means[k] - k * means[k - 1] for k in range(1, BATCHES)]
    return out


def test_each_reading_is_the_mean_of_every_batch_since_the_last(fits: dict) -> None:
    fit = fits["keras"]
    losses = batch_losses(fit["logs"])
    steps = fit["steps"]
    assert 4 <= len(steps) < 2 * BATCHES  # sampled, not every batch
    covered = []
    for step in steps:
        first, n = step["window"]["first_step"], step["window"]["n"]
        assert first + n - 1 == step["step"]
        window = losses[first - 1 : step["step"]]
        assert step["loss"] == pytest.approx(sum(window) / n, rel=1e-4, abs=1e-6)
        covered += range(first, step["step"] + 1)
    assert len(covered) == len(set(covered))  # no batch counted twice
    # every batch up to the last reading of each epoch is in a window
    last_of_epoch = {}
    for step in steps:
        last_of_epoch[(step["step"] - 1) // BATCHES] = step["step"]
    for epoch, last in last_of_epoch.items():
        assert set(range(epoch * BATCHES + 1, last + 1)) <= set(covered)


def test_a_models_own_train_step_keeps_its_logged_values(fits: dict) -> None:
    fit = fits["own"]
    assert fit["steps"]
    for step in fit["steps"]:
        assert step["window"] is None
        assert step["loss"] == pytest.approx(fit["logs"][step["step"] - 1], rel=1e-6)
