"""TRN003's yardstick for a regression: the loss of predicting the targets' mean, measured by the
PyTorch guard from the targets of a mean squared error on its checked steps.

A regression whose targets say nothing of its inputs falls from its random start to the
targets' variance (the output bias learns their mean) and stays there: it passed the "did it
decrease" test; against the mean's loss it is reported. A real relation stays quiet.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from torch.nn import functional as F

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.events import Event, GuardObservation, Step
from trainmedic.findings import Finding, Severity
from trainmedic.record import RunRecord
from trainmedic.rules.trn import trn003_not_learning as trn003

torch.set_num_threads(1)
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
ROWS, BATCH = 6400, 64


def relation(x: torch.Tensor) -> torch.Tensor:
    """A real, nonlinear relation with noise (R^2 about 0.8 for a model that finds it)."""
    signal = 2.0 * x[:, 0] - x[:, 1] * x[:, 2] + torch.sin(2.0 * x[:, 3]) + 0.5 * x[:, 4] ** 2
    return 5.0 + signal + 0.7 * torch.randn(len(x))


def train(loss_of: Loss, *, independent: bool, steps: int = 500) -> tm.Guard:
    """An MLP on 8 inputs; the targets are their relation, or drawn apart from them."""
    torch.manual_seed(0)
    x = torch.randn(ROWS, 8)
    y = 5.0 + 2.0 * torch.randn(ROWS) if independent else relation(x)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    order = torch.cat([torch.randperm(ROWS // BATCH) for _ in range(steps // (ROWS // BATCH) + 1)])
    with tm.guard(every=10) as guard:
        for i in range(steps):  # the batches shuffled every epoch
            batch = slice(BATCH * int(order[i]), BATCH * (int(order[i]) + 1))
            optimizer.zero_grad()
            loss_of(model(x[batch]).squeeze(-1), y[batch]).backward()
            optimizer.step()
    return guard


def warnings_of(guard: tm.Guard) -> list[Finding]:
    return [f for f in guard.findings() if f.severity.at_least(Severity.WARNING)]


def blocks(guard: tm.Guard) -> list[dict]:
    return [e.data for e in guard.events if e.kind == "guard" and e.check == "mean_prediction"]


@pytest.fixture(scope="module")
def independent() -> tm.Guard:
    return train(F.mse_loss, independent=True)


def test_targets_independent_of_the_inputs_stay_at_the_loss_of_their_mean(independent: tm.Guard) -> None:
    [finding] = warnings_of(independent)
    assert finding.code == "TRN003"
    assert "stayed at the loss of predicting the targets' mean" in finding.message
    ev = finding.evidence
    assert 0.95 <= ev["loss_over_mean_prediction"] <= 1.25
    assert ev["mean_prediction_loss"] == pytest.approx(4.0, rel=0.2)  # their variance: 2.0 ** 2
    assert ev["start_loss"] > 2 * ev["end_loss"]  # it did fall: the bias learned the mean


def test_the_targets_are_read_on_checked_steps_only(independent: tm.Guard) -> None:
    """Steps 1, 10, 20, ..., 500: one batch each, in blocks of 8, the last block sent when the
    guard closes."""
    sent = blocks(independent)
    assert [b["batches"] for b in sent] == [8, 8, 8, 8, 8, 8, 3]
    assert sum(b["rows"] for b in sent) == 51 * BATCH
    assert (sent[0]["first_step"], sent[0]["last_step"], sent[-1]["last_step"]) == (1, 70, 500)


def test_a_real_relation_is_quiet() -> None:
    guard = train(F.mse_loss, independent=False)
    assert warnings_of(guard) == []
    late = [b for b in blocks(guard) if b["last_step"] > 250]
    assert sum(b["loss_sum"] for b in late) < 0.5 * sum(b["mean_prediction_sum"] for b in late)


def test_batches_of_one_group_each_are_judged_against_the_mean_of_all() -> None:
    """Each batch is one store (100 stores of 64 rows, the stores shuffled each epoch): the
    value is the store's level (told by its 8 features) plus noise. The model learns the levels
    (R^2 about 0.9); within a batch only the noise is left, about the batch's own variance.
    The mean's loss is the variance pooled over every batch measured: quiet."""
    torch.manual_seed(0)
    profile = torch.randn(100, 8)
    level = profile[:, 0] + profile[:, 1] - profile[:, 2] * profile[:, 3]
    store = torch.arange(ROWS) // BATCH
    x = profile[store] + 0.1 * torch.randn(ROWS, 8)
    y = level[store] + 0.5 * torch.randn(ROWS)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    order = torch.cat([torch.randperm(100) for _ in range(10)])
    with tm.guard(every=10) as guard:
        for i in range(1000):
            batch = slice(BATCH * int(order[i]), BATCH * (int(order[i]) + 1))
            optimizer.zero_grad()
            F.mse_loss(model(x[batch]).squeeze(-1), y[batch]).backward()
            optimizer.step()
    late = [b for b in blocks(guard) if b["last_step"] > 500]
    assert sum(b["loss_sum"] for b in late) < 0.5 * sum(b["mean_prediction_sum"] for b in late)
    within = 0.5**2  # a batch's own variance: the squared error of a model that knows the levels
    assert sum(b["loss_sum"] for b in late) > within * sum(b["batches"] for b in late)
    assert warnings_of(guard) == []


def test_diabetes_is_quiet() -> None:
    """scikit-learn's diabetes table (442 patients, 10 features; a linear model explains about
    half of the progression's variance), standardised, an MLP with SGD, 40 epochs of 14 batches."""
    data = load_diabetes()
    x = torch.tensor((data.data - data.data.mean(0)) / data.data.std(0), dtype=torch.float32)
    y = torch.tensor((data.target - data.target.mean()) / data.target.std(), dtype=torch.float32)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
    criterion = nn.MSELoss()
    with tm.guard(every=10) as guard:
        for _ in range(40):
            for xb, yb in loader:
                optimizer.zero_grad()
                criterion(model(xb).squeeze(-1), yb).backward()
                optimizer.step()
    assert blocks(guard)
    assert warnings_of(guard) == []


@pytest.mark.parametrize(
    "loss_of",
    [
        F.mse_loss,
        nn.MSELoss(),
        nn.MSELoss(reduction="sum"),
        lambda out, y: F.mse_loss(out, y) / 4,  # accumulation over 4 micro-batches
        lambda out, y: 0.5 * F.mse_loss(out, y),
    ],
    ids=["functional", "module", "summed", "divided-by-4", "halved"],
)
def test_every_form_of_a_squared_error_is_measured(loss_of: Loss) -> None:
    assert sum(b["batches"] for b in blocks(train(loss_of, independent=True, steps=30))) == 4


@pytest.mark.parametrize(
    "loss_of",
    [
        F.l1_loss,  # its graph keeps the residual, not the target
        F.smooth_l1_loss,  # its best constant has no closed form
        lambda out, y: F.mse_loss(out, y) + 0.01 * out.pow(2).mean(),
        lambda out, y: F.mse_loss(out, out.roll(1) + y),  # a target the model computes
    ],
    ids=["l1", "huber", "plus-a-penalty", "target-from-the-model"],
)
def test_other_losses_are_not_measured(loss_of: Loss) -> None:
    assert blocks(train(loss_of, independent=True, steps=30)) == []


def test_a_broadcast_squared_error_is_not_measured() -> None:
    """An (N, 1) output against (N,) targets compares every row with every target (PyTorch warns)."""
    with pytest.warns(UserWarning, match="different to the input size"):
        guard = train(lambda out, y: F.mse_loss(out.unsqueeze(-1), y), independent=True, steps=30)
    assert blocks(guard) == []


def yardstick_run(loss: np.ndarray, ratio: float) -> RunRecord:
    """A loss logged every 10 steps, and blocks of sampled batches at `ratio` x the mean's loss."""
    events: list[Event] = [
        Step(step=10 * i, metrics={"loss": float(v)}, t=float(i)) for i, v in enumerate(loss)
    ]
    for first in range(0, 10 * len(loss), 80):
        data = {"loss": "mse", "first_step": first + 1, "last_step": first + 80, "batches": 8, "rows": 512}
        data.update(loss_sum=8.0 * ratio, mean_prediction_sum=8.0)
        events.append(GuardObservation(check="mean_prediction", data=data, t=first / 10))
    return RunRecord.of(events)


def test_a_loss_still_falling_at_the_mean_is_not_reported() -> None:
    """Sampled batches at 0.97x the mean's loss, but the curve still falls (a slow learner)."""
    falling = 1.3 - 0.3 * np.arange(60) / 59 + 0.005 * np.random.default_rng(0).standard_normal(60)
    assert trn003.not_learning(yardstick_run(falling, 0.97)) == []
    flat = 1.02 + 0.005 * np.random.default_rng(0).standard_normal(60)
    flat[:5] = [3.0, 2.0, 1.4, 1.1, 1.05]  # the bias learns the mean in the first steps
    [finding] = trn003.not_learning(yardstick_run(flat, 0.97))
    assert finding.evidence["loss_over_mean_prediction"] == pytest.approx(0.97)


def test_a_flat_loss_above_the_mean_has_not_learned_even_the_mean() -> None:
    """Ten logged steps (3 short epochs, the DDP tutorial's placeholder data): flat at 0.11
    while predicting the targets' mean costs 0.083 (1.36x): the model has not even learned
    their mean. Too few points for the flat-loss test; the yardstick says it."""
    loss = np.array([0.1136, 0.1165, 0.1086, 0.1121, 0.1140, 0.1102, 0.1145, 0.1076, 0.1118, 0.1097])
    [finding] = trn003.not_learning(yardstick_run(loss, 1.36))
    assert "stayed above the loss of predicting the targets' mean" in finding.message
    assert finding.evidence["loss_over_mean_prediction"] == pytest.approx(1.36)
    falling = np.linspace(0.6, 0.16, 10)  # another initialisation: it is learning the mean
    assert trn003.not_learning(yardstick_run(falling, 1.9)) == []


def test_a_flat_loss_far_above_the_mean_is_judged_against_it() -> None:
    """Blocks whose squared error is 1.5x the mean's loss, flat from the start: the message
    says where the loss stands against the mean."""
    loss = 6.0 + 0.01 * np.random.default_rng(0).standard_normal(60)
    events = [Step(step=10 * i, metrics={"loss": float(v)}, t=float(i)) for i, v in enumerate(loss)]
    data = {"loss": "mse", "first_step": 300, "last_step": 590, "batches": 30, "rows": 1920}
    events.append(
        GuardObservation(
            check="mean_prediction", data={**data, "loss_sum": 180.0, "mean_prediction_sum": 120.0}
        )
    )
    [finding] = trn003.not_learning(RunRecord.of(events))
    assert "stayed above the loss of predicting the targets' mean" in finding.message
    assert finding.evidence["loss_over_mean_prediction"] == pytest.approx(1.5)
