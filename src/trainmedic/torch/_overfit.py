"""The tiny-batch overfit test: can the model memorise one small batch?"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from trainmedic.events import GuardObservation
from trainmedic.findings import Finding
from trainmedic.instrument import channel
from trainmedic.rules.trn import trn006_cannot_overfit_batch as trn006
from trainmedic.torch import _patches


@dataclass(slots=True)
class OverfitResult:
    """The losses of the test, its verdict and, when it failed, the TRN006 finding."""

    passed: bool
    initial_loss: float
    final_loss: float
    losses: list[float] = field(default_factory=list)
    finding: Finding | None = None


def overfit_batch(
    model: torch.nn.Module,
    batch: tuple[Any, Any],
    loss_fn: Callable[[Any, Any], torch.Tensor],
    *,
    steps: int = 200,
    lr: float = 1e-2,
    optimizer: Callable[..., torch.optim.Optimizer] | None = None,
    copy_model: bool = True,
) -> OverfitResult:
    """Train on one fixed batch for `steps` steps; the loss should approach zero.

    The model is deep-copied first (`copy_model=False` trains it in place), so
    the test leaves the weights it is given untouched. Adam at `lr` is used
    unless `optimizer` (a factory taking the parameters) is given. Emits a
    guard observation that the TRN006 rule judges; a failure is returned as
    `result.finding` and also sent to `trainmedic run` when supervised.
    """
    inputs, targets = batch
    net = copy.deepcopy(model) if copy_model else model
    net.train()
    params = [p for p in net.parameters() if p.requires_grad]
    opt = optimizer(params) if optimizer is not None else torch.optim.Adam(params, lr=lr)
    losses: list[torch.Tensor] = []
    with _patches.paused():  # the test's own steps are not the run's
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(inputs), targets)
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            losses.append(loss.detach())
    values = torch.stack(losses).float().tolist() if losses else [float("nan")]
    observation = GuardObservation(
        check=trn006.OBSERVATION,
        rank=channel.current_rank(),
        data={
            "initial_loss": values[0],
            "final_loss": min(values[-5:]),
            "steps": steps,
            "lr": lr,
            "batch_size": len(targets) if hasattr(targets, "__len__") else None,
            "losses": values[:: max(1, len(values) // 20)],
        },
    )
    channel.emit(observation)
    return OverfitResult(
        passed=not trn006.failed(observation.data),
        initial_loss=values[0],
        final_loss=observation.data["final_loss"],
        losses=values,
        finding=trn006.judge(observation.data, rank=observation.rank),
    )
