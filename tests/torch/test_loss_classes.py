"""The classes of a cross-entropy loss, read from its autograd graph: TRN003's chance level ln K.

A classifier whose loss falls from its random start to ln K and stays there predicts the same
distribution for every input. Without the class count, a loss that fell at first passes the
"did it decrease" test; with it, TRN003 names the chance level and where K came from.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from torch.nn import functional as F

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.findings import Severity

torch.set_num_threads(1)
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def train(loss_of: Loss, *, classes: int = 10, steps: int = 400, scale: float = 1.0) -> tm.Guard:
    """An MLP on inputs that say nothing of their labels: the best it can do is ln K."""
    torch.manual_seed(0)
    x, y = torch.randn(6400, 16), torch.randint(0, classes, (6400,))
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, classes))
    with torch.no_grad():
        model[2].weight.mul_(scale)  # large random logits: the loss starts far above ln K
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tm.guard(every=10) as guard:
        for i in range(steps):
            batch = slice(64 * (i % 100), 64 * (i % 100 + 1))
            optimizer.zero_grad()
            loss_of(model(x[batch]), y[batch]).backward()
            optimizer.step()
    return guard


def stated(guard: tm.Guard) -> list[int]:
    return [e.data["classes"] for e in guard.events if e.kind == "guard" and e.check == "loss_function"]


def test_a_loss_that_falls_to_chance_and_stays_is_not_learning_at_ln_k() -> None:
    guard = train(F.cross_entropy, scale=8.0)
    assert stated(guard) == [10]
    [finding] = [f for f in guard.findings() if f.severity.at_least(Severity.WARNING)]
    assert finding.code == "TRN003"
    assert finding.evidence["classes"] == 10
    assert "cross-entropy over a log-softmax of width 10" in finding.evidence["classes_from"]


@pytest.mark.parametrize(
    "loss_of",
    [
        F.cross_entropy,
        nn.CrossEntropyLoss(),
        lambda out, y: F.nll_loss(F.log_softmax(out, dim=-1), y),
        lambda out, y: F.cross_entropy(out, y) / 1,  # Accelerate's backward without accumulation
        lambda out, y: nn.CrossEntropyLoss()(out, F.one_hot(y, out.shape[-1]).float()),  # to_categorical
    ],
    ids=["functional", "module", "log_softmax-nll", "divided-by-1", "one-hot-targets"],
)
def test_every_form_of_a_mean_cross_entropy_states_its_classes(loss_of: Loss) -> None:
    assert stated(train(loss_of, classes=4, steps=30)) == [4]


@pytest.mark.parametrize(
    "loss_of",
    [
        lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1),
        lambda out, y: F.cross_entropy(out, y, reduction="sum"),
        lambda out, y: F.cross_entropy(out, y) / 4,  # accumulation over 4 micro-batches
        lambda out, y: F.cross_entropy(out, y) + 0.01 * out.pow(2).mean(),
        lambda out, y: F.cross_entropy(out, 0.9 * F.one_hot(y, out.shape[-1]).float() + 0.025),
        lambda out, y: F.cross_entropy(out, F.softmax(torch.randn_like(out), dim=-1)),  # a teacher's
        lambda out, y: F.cross_entropy(out, F.one_hot(y, out.shape[-1]).float(), reduction="sum"),
    ],
    ids=[
        "smoothed",
        "summed",
        "divided-by-4",
        "plus-a-penalty",
        "smoothed-one-hot",
        "soft",
        "summed-one-hot",
    ],
)
def test_a_loss_that_is_not_at_ln_k_for_a_know_nothing_model_states_no_classes(loss_of: Loss) -> None:
    assert stated(train(loss_of, classes=4, steps=30)) == []
