"""Every step counted: what happens between two checks is seen at the next one.

Real PyTorch loops in this process, checked every 50 steps (`every=50`): a few steps at a
learning rate 50x too high blow the loss up and the model recovers within the window, so the
points of the curve (window means) barely move; a NaN loss on an unchecked step whose update
the loop skips leaves every checked step finite. The guard's window record (`Step.window`:
every loss of the window counted) gives TRN002 the episode and TRN001 the step; the same loop
without the spike stays quiet.
"""

from __future__ import annotations

import math

import pytest

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.events import Step

torch.set_num_threads(1)

EVERY = 50
STEPS = 400
SPIKE = range(201, 203)  # two steps at lr 5.0 instead of 0.1
NAN_STEP = 123  # not a checked step (the checks: 1, 50, 100, ...)


def _run(*, spike: bool = False, nan: bool = False) -> tm.Guard:
    """A 3-class-ish MLP on a learnable rule, SGD lr 0.1, a batch of 32 a step."""
    torch.manual_seed(0)
    x = torch.randn(2048, 16)
    y = (x @ torch.randn(16, 4)).argmax(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = tm.guard(model, optimizer, every=EVERY)
    try:
        for step in range(1, STEPS + 1):
            i = (step * 32) % 2048
            for group in optimizer.param_groups:
                group["lr"] = 5.0 if spike and step in SPIKE else 0.1
            optimizer.zero_grad()
            inputs = x[i : i + 32]
            if nan and step == NAN_STEP:
                inputs = inputs.clone()
                inputs[3, 5] = math.nan
            loss = nn.functional.cross_entropy(model(inputs), y[i : i + 32])
            loss.backward()
            if not torch.isfinite(loss):
                optimizer.zero_grad()  # the loop skips the bad update: the steps go on, finite
            optimizer.step()
    finally:
        guard.stop()
    return guard


@pytest.fixture(scope="module")
def runs() -> dict[str, tm.Guard]:
    return {"healthy": _run(), "spike": _run(spike=True), "nan": _run(nan=True)}


def _windows(guard: tm.Guard) -> list[Step]:
    return [e for e in guard.events if isinstance(e, Step) and "loss" in e.metrics]


def test_each_point_counts_every_loss_of_its_window(runs: dict[str, tm.Guard]) -> None:
    points = _windows(runs["spike"])
    assert [p.step for p in points] == [1, *range(EVERY, STEPS + 1, EVERY)]
    assert all(p.window is not None for p in points)
    assert sum(p.window["n"] for p in points if p.window) == STEPS
    spiked = next(p for p in points if p.step == 250)
    assert spiked.window is not None
    assert spiked.window["first_step"] == 201
    assert spiked.window["min"] <= spiked.metrics["loss"] <= spiked.window["max"]
    assert spiked.window["max_step"] in range(201, 210)
    assert spiked.window["max"] > 10 * spiked.window["min"]


def test_a_spike_between_two_checks_is_a_divergence_episode(runs: dict[str, tm.Guard]) -> None:
    found = [f for f in runs["spike"].findings() if f.code == "TRN002"]
    assert len(found) == 1, [f.message for f in runs["spike"].findings()]
    evidence = found[0].evidence
    assert evidence["between_points"] is True
    assert evidence["episode_start_step"] == 201
    assert 201 <= evidence["peak_step"] < 210
    assert evidence["steps_above_at_least"] >= 3
    assert found[0].step == 201
    assert "between two points" in found[0].message


def test_a_nan_on_an_unchecked_step_is_found_at_its_step(runs: dict[str, tm.Guard]) -> None:
    found = [f for f in runs["nan"].findings() if f.code == "TRN001"]
    assert [f.step for f in found] == [NAN_STEP]
    window = next(p.window for p in _windows(runs["nan"]) if p.step == 150)
    assert window is not None
    assert window["nonfinite"] == 1
    assert window["first_step"] == 101
    assert math.isfinite(window["max"])


def test_the_same_loop_without_spike_or_nan_is_quiet(runs: dict[str, tm.Guard]) -> None:
    assert [f.code for f in runs["healthy"].findings() if f.code.startswith("TRN")] == []
