"""An update that blew up between two sampled gradient norms, caught from what the guard keeps.

The gradient norm is measured on sampled steps only. A one-step explosion between
two samples shows in what the guard keeps anyway: the window's losses jump (or turn
non-finite) and the parameter norm, measured then and every `PARAM_NORM_EVERY`-th
sample, jumped too or is non-finite. That is sent as an `update_explosion`
observation with the first abnormal step, and TRN007 reports it.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.record import median
from trainmedic.torch._reads import LOSS_VALUE, all_finite, floats, norms, readable

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

PARAM_NORM_EVERY = 5  # a parameter-norm baseline every 5th sampled step
JUMP_FACTOR = 10.0  # a loss and a parameter norm both 10x their level before: an update blew up
JUMP_MIN_HISTORY = 5  # finite losses needed before a jump can be judged


class UpdateWatch:
    """The recent finite losses and a parameter-norm baseline: what a jump is judged against."""

    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor
        self.loss_history: deque[float] = deque(maxlen=50)  # recent finite losses, for jumps
        self.param_norm: tuple[int, float] | None = None  # (step, norm): the jump baseline

    def reset(self) -> None:
        """A new training (a notebook's next cell): the last one's baselines do not apply."""
        self.loss_history.clear()
        self.param_norm = None

    def watch(self, optimizer: Any, losses: list[tuple[int, float]], step: int) -> None:
        """Catch a one-step gradient explosion that fell between two sampled gradient norms.

        What the window keeps anyway tells it: the first loss that turned non-finite or
        jumped to `JUMP_FACTOR` x the recent median, and a parameter norm that is non-finite
        or `JUMP_FACTOR` x its last baseline (measured every `PARAM_NORM_EVERY`-th sample, so
        a healthy run pays one norm per 50 steps). A bad batch alone moves the loss, not the
        weights; a NaN in the data turns the loss non-finite at the step it entered.
        """
        monitor = self.monitor
        if not monitor.is_primary(optimizer) or "update_explosion" in monitor.reported:
            return
        history = self.loss_history
        typical = median(history) if len(history) >= JUMP_MIN_HISTORY else None
        jump: tuple[int, float, float | None] | None = None
        values = list(map(LOSS_VALUE, losses))
        # The usual window, all finite and none above the bar, is told by a sum and a max in C;
        # the losses are walked in Python only when one may have jumped.
        bar = JUMP_FACTOR * typical if typical is not None and typical > 0 else math.inf
        if all_finite(losses) and max(values, default=0.0) <= bar:
            history.extend(values)
        else:
            for loss_step, value in losses:
                if value > bar or not math.isfinite(value):
                    jump = (loss_step, value, typical)
                    break
            history.extend(value for value in values if math.isfinite(value))
        state = monitor.state_of(optimizer)
        checks = state.checks if state is not None else 1
        if jump is None:
            if self.param_norm is None or checks % PARAM_NORM_EVERY == 0:
                self.param_norm = (step, self.parameter_norm(optimizer))
            return
        if self.param_norm is None:
            return  # nothing to compare with: the jump came before any baseline
        norm = self.parameter_norm(optimizer)
        base_step, base = self.param_norm
        if math.isfinite(norm) and not (base > 0 and norm > JUMP_FACTOR * base):
            return
        loss_step, value, typical = jump
        monitor.observe(
            "update_explosion",
            {
                "step": loss_step,
                "loss": value,
                "loss_median_before": typical,
                "param_norm": norm,
                "param_norm_before": base,
                "param_norm_step": base_step,
                "checked_step": step,
                "every": monitor.every,
            },
            step=loss_step,
        )

    def parameter_norm(self, optimizer: Any) -> float:
        with torch.no_grad():
            params = [readable(p) for g in optimizer.param_groups for p in g["params"]]
            return math.sqrt(sum(n * n for n in floats(norms([p for p in params if p is not None]))))
