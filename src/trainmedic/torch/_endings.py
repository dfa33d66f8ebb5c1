"""The end of a training: a notebook cell's (`settle`), and the process's or the guard's (`close`).

Either way the last window is sent and the losses kept since the last check are
read now. After a cell, the first optimizer to step next may start a new training
(`adopt`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from trainmedic.evidence.curves import HANDOVER_OBSERVATION
from trainmedic.torch._manual import ParameterUpdates
from trainmedic.torch._safety import contained, part_never_breaks, quiet

if TYPE_CHECKING:
    from trainmedic.torch._checks import SampledChecks
    from trainmedic.torch._interface import MonitorLike, OptState


class Endings:
    """`settle` after each notebook cell, `close` once at the end."""

    def __init__(self, monitor: MonitorLike, checks: SampledChecks) -> None:
        self.monitor = monitor
        self.checks = checks
        self.closed = False

    @part_never_breaks
    def settle(self) -> None:
        """A notebook cell ended. Send its last window and check the losses kept since the last
        check now (they would otherwise wait for the next cell's training, or the kernel's
        exit, and be counted in the next training's first window), and let the first optimizer to
        step next become the primary: a later cell often trains a new model with a new one."""
        if self.closed:
            return
        monitor, checks = self.monitor, self.checks
        primary = monitor.primary() if monitor.primary is not None else None
        state = monitor.opts.get(primary) if primary is not None else None
        step = monitor.step + (1 if state is not None and state.pre_done else 0)
        if primary is not None and state is not None and step > checks.curve.window_step:
            with quiet():
                checks.flush(primary, step)  # the cell's last window, as `close` sends it at exit
        else:
            checks.reads.drain()
        monitor.adopt_next = True

    def adopt(self, optimizer: Any, state: OptState) -> None:
        """The first optimizer to step after a cell: a new one is a new training (before its
        update: its step is the next one)."""
        monitor = self.monitor
        monitor.adopt_next = False
        if monitor.is_primary(optimizer):
            return
        self._take_over(optimizer)
        state.steps = monitor.step

    def hand_over(self, optimizer: Any, state: OptState, steps: int) -> None:
        """Another optimizer took the training over from the primary, after `steps` of its own
        updates in a row (this one included): the run's steps go on by as many. An observation
        (HANDOVER_OBSERVATION) says from which step: the loss rules judge the new training from there."""
        monitor = self.monitor
        previous = monitor.primary() if monitor.primary is not None else None
        self._take_over(optimizer)
        state.steps = monitor.step + steps
        monitor.observe(
            HANDOVER_OBSERVATION,
            {
                "optimizer": type(optimizer).__name__,
                "previous": type(previous).__name__ if previous is not None else None,
                "previous_freed": previous is None,
            },
            once=False,
            step=state.steps,
        )

    def _take_over(self, optimizer: Any) -> None:
        """`optimizer` numbers the steps from now on, on from the last (the loss curve and the
        windows stay in order); the baselines of the last training (loss history, parameter
        norm, the model's root modules) and its one-off reports are reset."""
        monitor = self.monitor
        monitor.primary = weakref.ref(optimizer)
        # The model is learned anew from the next forward passes: the last training's model
        # (a distillation's teacher) is no part of this one's, its parameters in no optimizer.
        monitor.forward.roots.clear()
        monitor.forward.open()
        self.checks.updates.reset()
        self.checks.reads.epoch_loss = [0.0, 0]
        monitor.reported -= {"nonfinite_loss", "update_explosion"}

    @part_never_breaks
    def close(self) -> None:
        """End of the process or of the guard: send what the last window measured."""
        if self.closed:
            return
        self.closed = True
        monitor, checks = self.monitor, self.checks
        checks.forward.close(None)
        checks.hygiene.judge_last_passes()
        primary = monitor.primary() if monitor.primary is not None else None
        state = monitor.opts.get(primary) if primary is not None else None
        step = monitor.step + (1 if state is not None and state.pre_done else 0)
        if primary is not None and state is not None and step > checks.curve.window_step:
            with quiet():
                checks.flush(primary, step)
        # Again at the end, whatever the checks saw: parameters unfrozen later in the run (a
        # backbone from epoch N on) and never added to the optimizer.
        if primary is not None and state is not None and not isinstance(primary, ParameterUpdates):
            checks.hygiene.check_membership(primary, state, monitor.step)
        checks.clipping.read_rest()  # clip calls no read took (the optimizer was freed first)
        monitor.scaler.close()  # the gradient scaler's iterations since its last read
        for watcher in monitor.watchers:
            contained(monitor, type(watcher).__name__, watcher.on_close)
