"""The sampled checks: every tensor op and host read of the guard happens here.

On a checked step (the first, then every `every`-th) the gradients are final and
the optimizer is about to apply them: the kept losses, the clipping norms and this
step's gradient norms are read in one transfer; the loss windows are sent, the
non-finite and explosion checks run, and the loop-hygiene checks that need the
gradients (zeroing, parameters without gradient or outside the optimizer). The
check is timed for the budget (`_budget`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.events import GuardObservation
from trainmedic.torch._budget import clock
from trainmedic.torch._manual import ParameterUpdates
from trainmedic.torch._precision import PrecisionWatch
from trainmedic.torch._reads import floats, norms, read_prefix, readable
from trainmedic.torch._safety import contained

if TYPE_CHECKING:
    from trainmedic.torch._budget import CheckBudget
    from trainmedic.torch._clipping import ClipWatch
    from trainmedic.torch._curve import LossCurve
    from trainmedic.torch._explosion import UpdateWatch
    from trainmedic.torch._forward import ForwardWatch
    from trainmedic.torch._hygiene import LoopHygiene
    from trainmedic.torch._interface import MonitorLike, OptState
    from trainmedic.torch._losses import LossReads
    from trainmedic.torch._names import ParamNames


class SampledChecks:
    """Runs one checked step's reads and checks, in the order their results depend on."""

    def __init__(
        self,
        monitor: MonitorLike,
        *,
        forward: ForwardWatch,
        clipping: ClipWatch,
        budget: CheckBudget,
        reads: LossReads,
        curve: LossCurve,
        updates: UpdateWatch,
        hygiene: LoopHygiene,
        names: ParamNames,
    ) -> None:
        self.monitor = monitor
        self.forward = forward
        self.clipping = clipping
        self.budget = budget
        self.reads = reads
        self.curve = curve
        self.updates = updates
        self.hygiene = hygiene
        self.names = names
        self.precision = PrecisionWatch(monitor, names)  # bf16/fp16 weights whose updates round away

    def check(self, optimizer: Any, state: OptState, step: int, primary: bool) -> None:
        """Each check is `contained`: one that fails costs itself, and the others run."""
        monitor, budget = self.monitor, self.budget
        state.checks += 1
        manual = isinstance(optimizer, ParameterUpdates)  # no optimizer: nothing to be missing from
        if state.checks <= 3 and not manual:  # the membership checks are settled by the 3rd checked step
            contained(monitor, "membership", self.membership, optimizer, state, step)
        elif state.checks == 1:
            contained(monitor, "first_check", self.hygiene.first_check, optimizer)
        if primary:
            started = clock()
            window = started - budget.check_end  # training time since the last check ended
            steps = max(1, step - budget.full_step)
            if self.forward.is_open:  # the losses' graphs are read only for a watched forward pass
                contained(monitor, "forward_watch", self.forward.close, step, self.reads.of_step(step))
            self.flush(optimizer, step)
            if not manual:
                contained(monitor, "updates_below_precision", self.precision.on_check, optimizer, step)
            for watcher in monitor.watchers:
                contained(monitor, type(watcher).__name__, watcher.on_check, step)
            budget.check_end, budget.full_step = clock(), step
            if monitor.adaptive and budget.host_read and not monitor.stop_on_nonfinite:
                cost = budget.check_end - started - budget.freed_s
                budget.keep_to_budget(state.checks, step, cost, window / steps)

    def membership(self, optimizer: Any, state: OptState, step: int) -> None:
        state.checked_steps.append(step)
        params = [p for g in optimizer.param_groups for p in g["params"]]
        missing = {id(p) for p in params if p.requires_grad and p.grad is None}
        state.never_grad = missing if state.never_grad is None else state.never_grad & missing
        if state.checks == 1:
            self.hygiene.first_check(optimizer)
        if state.checks == 3:
            self.hygiene.check_membership(optimizer, state, step)

    def flush(self, optimizer: Any, step: int) -> None:
        """One host read: the losses kept since the last check and this step's gradient norms."""
        monitor = self.monitor
        losses, loss_steps = self.reads.take()
        clips = self.clipping.take()  # pre-clip norms since the last read: read in the same transfer
        measured = contained(monitor, "grad_norms", self.gradient_norms, optimizer)
        params, grad_tensors, grads_on_cpu = measured if measured is not None else ([], [], True)
        # A CPU run's losses are floats already (read as they came), but for a watched step's (its
        # graph read at the check): found at C speed, the floats are not walked in Python one by
        # one (a check takes up to 100 a time on a small model), and only the rest is read.
        read = read_prefix(losses)
        unread = losses[read:]
        self.budget.host_read = grads_on_cpu and all(
            not isinstance(t, torch.Tensor) or t.is_cpu for t in unread
        )
        with torch.no_grad():
            values = floats([*clips.kept, *unread, *grad_tensors])
        contained(monitor, "clipping", self.clipping.report, clips, values[: len(clips.kept)])
        values = values[len(clips.kept) :]
        if read:
            values = [*losses[:read], *values]
        freeing = clock()
        # The kept losses are values or detached aliases, except a watched step's, whose graph's nodes go
        # now: work a bare loop does at every step anyway (when its loss dies), so it is not
        # counted as the check's cost.
        del losses, unread
        self.budget.freed_s = clock() - freeing
        loss_values = self.reads.values(loss_steps, values[: len(loss_steps)])
        grad_norms = values[len(loss_steps) :]
        self.reads.check_nonfinite(loss_values, step)
        monitor.batches.forget()  # every batch so far had its loss read: none is the culprit
        contained(monitor, "update_explosion", self.updates.watch, optimizer, loss_values, step)
        self.reads.add_to_epoch(loss_values)
        last: dict[str, float] = {}
        if grad_norms:
            last["grad_norm"] = math.sqrt(sum(n * n for n in grad_norms))
            contained(monitor, "grad_norms", self.observe_norms, params, grad_norms, step)
        self.curve.send_windows(optimizer, step, [*self.reads.unsent, *loss_values], last)

    @staticmethod
    def gradient_norms(optimizer: Any) -> tuple[list[Any], list[Any], bool]:
        """The parameters with a gradient a norm can read (`_reads.readable`), those norms (tensors,
        not read yet), and whether the gradients are all on the CPU."""
        params, grads = [], []
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is not None and (grad := readable(grad)) is not None:
                        grads.append(grad)
                        params.append(p)
            return params, norms(grads), all(t.is_cpu for t in grads)

    def observe_norms(self, params: list[Any], grad_norms: list[float], step: int) -> None:
        weights = [
            (n, p) for n, p in zip(grad_norms, params, strict=True) if p.dim() >= 2 and math.isfinite(n)
        ]
        if len(weights) < 2:
            return
        low = min(weights, key=lambda w: w[0])
        high = max(weights, key=lambda w: w[0])
        monitor = self.monitor
        monitor.emit(
            GuardObservation(
                check="grad_norms",
                step=step,
                epoch=monitor.known_epoch(),
                data={
                    "min": low[0],
                    "min_param": self.names.name(low[1]),
                    "max": high[0],
                    "max_param": self.names.name(high[1]),
                    "every": monitor.every,
                },
            )
        )
