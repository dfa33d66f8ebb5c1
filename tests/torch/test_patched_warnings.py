"""PyTorch's warning about the order of scheduler and optimizer steps names the user's line
under the guard, as it does bare.

PyTorch warns with `stacklevel=2` so that the warning names the line that called `step()`;
the guard's wrapper must not take that line's place.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator

import pytest

import torch
import trainmedic.torch as tm
from torch import nn

torch.set_num_threads(1)

BEFORE_OPTIMIZER = "before `optimizer.step()`"


def _next_line() -> int:
    """The line after the caller's: where the call under test stands."""
    return sys._getframe(1).f_lineno + 1


@contextlib.contextmanager
def _recorded(
    guarded: bool, model: nn.Module, optimizer: torch.optim.Optimizer
) -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised inside, with the guard installed or not."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tm.guard(model, optimizer) if guarded else contextlib.nullcontext():
            yield caught


def _sgd() -> tuple[nn.Module, torch.optim.Optimizer]:
    model = nn.Linear(2, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _train_step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()


@pytest.mark.parametrize("guarded", [False, True], ids=["bare", "guarded"])
def test_scheduler_before_optimizer_names_the_users_line(guarded: bool) -> None:
    model, optimizer = _sgd()
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with _recorded(guarded, model, optimizer) as caught:
        line = _next_line()
        scheduler.step()
    (warning,) = caught
    assert BEFORE_OPTIMIZER in str(warning.message)
    assert (warning.filename, warning.lineno) == (__file__, line)


@pytest.mark.parametrize("guarded", [False, True], ids=["bare", "guarded"])
def test_healthy_order_warns_nothing(guarded: bool) -> None:
    model, optimizer = _sgd()
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    with _recorded(guarded, model, optimizer) as caught:
        for _ in range(3):
            _train_step(model, optimizer)
            scheduler.step()
            plateau.step(1.0)
    assert [str(w.message) for w in caught] == []
