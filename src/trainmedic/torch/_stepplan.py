"""How the optimizer step hooks count a step, and what the next steps' hooks do (`StepPlan`).

PyTorch calls the monitor's post-step hook on every optimizer step; most steps need nothing
else. After a step, the plan notes where a loss window ended (on a step that ends one and was
not checked: a timestamp, the data wait, the learning rate, `LossCurve.end_window`) and says
what the next steps need: the forward watch (opened for some checked steps), the zeroing watch
(armed `ZERO_WATCH_STEPS` steps before each check), and how long a stretch of steps is only
counted (`quiet_until`: until the zeroing watch arms, or the next step that ends a loss
window, whose post-step hook comes here to note it). The pre-step hook is needed on checked
steps only (their gradients are measured before the update): for the other steps of the only
optimizer it is switched off (`_patches.PreStepHook`, its entry out of PyTorch's dict of global
pre-step hooks), so PyTorch calls no Python before those updates, and the post-step hook
counts them on its shortest path (`Monitor.on_step_post`, the monitor's `_quiet`). Noting a
window's end after its update rather than before it keeps the hook off across window ends:
a window end costs one call of `plan`, not two switches of the pre-step hook and its calls.
An optimizer that first steps while the hook is off gets that hook's work after its update
(`count`), and the hook stays on while two optimizers step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainmedic.torch._interface import OptState
    from trainmedic.torch._monitor import Monitor
    from trainmedic.torch._zeroing import GradZeroWatch

# Other optimizers stepped this many times in a row while the one numbering the steps waited:
# the training was taken over (layer-wise training, a second stage with its own optimizer).
# Alternating loops never come near: GANs step their optimizers 1:1 up to 5:1 (WGAN's critic).
HANDOVER_STEPS = 50
# Gradients are watched for zeroing over the last 8 steps before each check: a loop that
# never zeroes shows it in any span that includes an update, at a fraction of the cost.
ZERO_WATCH_STEPS = 8


def no_hook(on: bool) -> None:
    """The pre-step hook's switch before the hooks are installed: nothing to switch."""


class StepPlan:
    """Counts the steps the post-step hook's short path does not, and plans the next ones."""

    def __init__(self, monitor: Monitor, zero_watches: list[GradZeroWatch]) -> None:
        self.monitor = monitor
        self.zero_watches = zero_watches
        # Steps other optimizers took in a row since the primary's step `others_since`.
        self.others_since, self.others_run = 0, 0

    def count(self, optimizer: Any, args: Any, kwargs: Any) -> OptState | None:
        """Count a step of `optimizer`: its state when the step is the run's (the primary's, or
        the one that takes over from it), else None."""
        monitor = self.monitor
        state = monitor.state_of(optimizer)
        if state is None or state.ref() is not optimizer:
            if monitor.pre_step_on:
                return None
            # An optimizer unknown until now stepped while the pre-step hook was off (made before
            # the guard and not given to it): what that hook does, done after its update.
            self.wake()
            monitor.on_step_pre(optimizer, args, kwargs)
            state = monitor.state_of(optimizer)
            if state is None:
                return None
        state.steps += 1
        state.pre_done = False
        primary = monitor.primary
        if primary is not None and primary() is not optimizer:
            if not self.takes_over(primary() is None):
                return None
            monitor.endings.hand_over(optimizer, state, self.others_run)
        monitor.step = state.steps
        return state

    def plan(self, state: OptState, step: int) -> None:
        """What the next steps' hooks do, up to the next check: the forward watch, the zeroing
        watch, and how long a stretch of steps is only counted (`quiet_until`)."""
        monitor = self.monitor
        base = monitor.base_every
        curve = monitor.curve
        if step % base == 0 and step != curve.window_step:  # a window ends here, unchecked
            curve.end_window(state.ref(), step)  # a point of the loss curve, read at the next check
        upcoming = step + 1
        # Forward hooks on every checked step at first (they find the model), then on every
        # fifth one: eval() mode can start late, but needs no fast answer to be useful.
        every = monitor.every
        if upcoming % every == 0 and (upcoming <= 5 * every or upcoming % (5 * every) == 0):
            monitor.forward.open()
        armed = (-upcoming) % every < ZERO_WATCH_STEPS
        if armed and not monitor._zero_armed:
            for watch in self.zero_watches:
                watch.rebase()
        monitor._zero_armed = armed
        monitor.plain_backward = plain = not armed and not monitor.forward.is_open and monitor.manual is None
        # Only counted until the zeroing watch arms for the next check (`every` moves at checks)
        # or the next window's end, whose post-step hook comes back here to note it.
        monitor.quiet_until = (
            min((-(-upcoming // every)) * every - ZERO_WATCH_STEPS, (-(-upcoming // base)) * base)
            if plain
            else 0
        )
        # The pre-step hook measures a checked step's gradients before its update, and nothing
        # else: off until the step before a check, also while the zeroing watch is armed (those
        # steps come back here from the post-step hook, which counts them).
        alone = (
            upcoming % every != 0
            and monitor.manual is None
            and len(monitor.opts) == 1
            and not monitor.stop_on_nonfinite
            and not monitor.adopt_next
        )
        monitor._quiet = state if alone else None
        if alone is monitor.pre_step_on:
            monitor.pre_step_on = not alone
            monitor.pre_step(not alone)

    def wake(self) -> None:
        """The next steps take the full hooks: the pre-step hook on, no quiet stretch."""
        monitor = self.monitor
        monitor._quiet, monitor.quiet_until = None, 0
        if not monitor.pre_step_on:
            monitor.pre_step_on = True
            monitor.pre_step(True)

    def then_wake(self, call: Callable[..., None]) -> Callable[..., None]:
        """`call`, after which the next steps take the full hooks (`wake`)."""

        def waking(*args: Any) -> None:
            call(*args)
            self.wake()

        return waking

    def takes_over(self, primary_gone: bool) -> bool:
        """Another optimizer stepped: has it taken the training over from the primary?

        Yes when the primary is gone (freed), or waited HANDOVER_STEPS of its steps in a row.
        The run is counted from the primary's step number, which only the primary moves: no
        cost on the primary's own steps.
        """
        step = self.monitor.step
        if self.others_since != step:
            self.others_since, self.others_run = step, 0
        self.others_run += 1
        return primary_gone or self.others_run >= HANDOVER_STEPS
