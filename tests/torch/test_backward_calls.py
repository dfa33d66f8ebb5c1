"""The guard's `torch.autograd.backward` wrapper passes every form of the call through unchanged.

Its ordinary step names the parameters `Tensor.backward` passes (four positionally, `inputs=`
by name) and calls the original with exactly those, for speed; every other form (`inputs=` a
list, a sixth positional argument, a kept graph, a keyword PyTorch does not know) goes the
general way. Real autograd in this process: each form gives the gradients it gives bare, and
an ordinary step's loss is still kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import torch
import trainmedic.torch as tm
from torch import nn


def _grads(guarded: bool, call: Callable[[torch.Tensor, nn.Module], Any]) -> tuple[list[Any], list[int]]:
    """The gradients after one optimizer step and a second backward made by `call`, and the steps
    whose losses the guard kept (none bare)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4)
    guard = tm.guard(model, optimizer) if guarded else None
    try:
        for _ in range(3):  # past the first, checked step: the next backward is an ordinary one
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
        optimizer.zero_grad()
        call(model(x).pow(2).mean(), model)
        grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        kept = list(guard.monitor.loss_steps) if guard is not None else []
    finally:
        if guard is not None:
            guard.stop()
    return grads, kept


CALLS: dict[str, Callable[[torch.Tensor, nn.Module], Any]] = {
    "Tensor.backward()": lambda loss, model: loss.backward(),
    "inputs= a list": lambda loss, model: loss.backward(inputs=[model[0].weight]),
    "retain_graph": lambda loss, model: loss.backward(retain_graph=True),
    "six positional": lambda loss, model: torch.autograd.backward(
        loss, None, None, False, None, [model[2].bias]
    ),
    "autograd.backward(inputs=)": lambda loss, model: torch.autograd.backward(loss, inputs=[model[2].weight]),
}


@pytest.mark.parametrize("form", sorted(CALLS))
def test_each_form_of_backward_gives_the_gradients_it_gives_bare(form: str) -> None:
    bare, _ = _grads(False, CALLS[form])
    guarded, kept = _grads(True, CALLS[form])
    assert len(bare) == len(guarded)
    for b, g in zip(bare, guarded, strict=True):
        assert (b is None) == (g is None)
        if b is not None:
            assert torch.equal(b, g)
    assert 4 in kept  # the loss of the backward made by `call` (step 4) is kept, whatever the form


def test_an_unknown_keyword_is_refused_as_pytorch_refuses_it() -> None:
    with pytest.raises(TypeError) as bare:
        _grads(False, lambda loss, model: torch.autograd.backward(loss, no_such_argument=1))
    with pytest.raises(TypeError) as guarded:
        _grads(True, lambda loss, model: torch.autograd.backward(loss, no_such_argument=1))
    assert "no_such_argument" in str(bare.value)
    assert "no_such_argument" in str(guarded.value)
