"""Loops that update parameters without `torch.optim`: each backward() is their step.

A language model updated by `p.data.add_(p.grad, alpha=-lr)`, a regression
stopped when the loss is small, a Keras 3 model (torch backend) whose Keras
optimizer applies the gradients: no optimizer hook ever fires, yet every one of
these loops calls `backward()` on its loss once per update. When no optimizer
of the process holds the loss's parameters, the monitor takes that backward as
the step, and `ParameterUpdates` stands in for the optimizer: the parameters
the loss reached (the leaves of its autograd graph, found once), in the
`param_groups` shape every check already reads.

Where an optimizer holds them (plain loops, GANs with two optimizers, LBFGS
closures, gradient accumulation, AMP scalers) the optimizer's own hooks number
the steps, and backward stays what it is: several per step, or none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_ACCUMULATE = "torch::autograd::AccumulateGrad"


class ParameterUpdates:
    """The parameters a manual-update loop trains, shaped like an optimizer for the checks."""

    def __init__(self, params: list[Any]) -> None:
        self.param_groups: list[dict[str, Any]] = [{"params": params}]

    def __repr__(self) -> str:
        return f"ParameterUpdates({len(self.param_groups[0]['params'])} tensors)"


def trained_parameters(loss: Any) -> list[Any]:
    """The leaf tensors that require grad and that `loss`'s graph reaches (its AccumulateGrad nodes).

    Walked once per run, before the first manual step: a graph has a few nodes per layer.
    """
    found: dict[int, Any] = {}
    seen: set[int] = set()
    todo = [getattr(loss, "grad_fn", None)]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.name() == _ACCUMULATE:
            variable = node.variable
            found.setdefault(id(variable), variable)
            continue
        todo.extend(child for child, _ in node.next_functions)
    return list(found.values())


def held_by_any(optimizers: Iterable[Any], params: list[Any]) -> bool:
    """Whether one of `optimizers` holds one of `params`: its step, not backward, is the step."""
    wanted = {id(p) for p in params}
    return any(id(p) in wanted for opt in optimizers for group in opt.param_groups for p in group["params"])
