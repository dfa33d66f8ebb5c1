"""The loss curve the guard sends: one `Step` per loss window, one `Epoch` per loader pass.

A window ends every `base_every` steps; on the steps in between checks that end
one, the hook only notes the time, the data wait and the learning rate
(`end_window`). The next check reads the window's losses and sends its `Step`
event with the mean loss, timing and data wait (`send_windows`), and the record of
every loss of the window (`Step.window`, `_window_stats`): a spike that the mean
averages away keeps its height and its step there.
"""

from __future__ import annotations

import bisect
import math
import operator
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from trainmedic.events import Epoch, Step
from trainmedic.torch._reads import LOSS_STEP, LOSS_VALUE, as_float
from trainmedic.torch._safety import part_never_breaks

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike
    from trainmedic.torch._losses import LossReads


class _WindowEnd(NamedTuple):
    """Where a loss window ended between two checks: its Step event is sent at the next one."""

    step: int
    time: float  # perf_counter
    data_wait: float  # the monitor's data wait accumulated since the last check
    lr: float | None
    epoch: int | None


class LossCurve:
    """The loss windows ended since the last check, and the epochs the loaders' passes end."""

    def __init__(self, monitor: MonitorLike, reads: LossReads) -> None:
        self.monitor = monitor
        self.reads = reads
        self.window_ends: list[_WindowEnd] = []  # loss windows ended since the last check
        self.window_t0 = time.perf_counter()
        self.window_step = 0

    def end_window(self, optimizer: Any, step: int) -> None:
        """Note where a loss window ends: a timestamp and two lookups, no tensor touched."""
        lr = optimizer.param_groups[0].get("lr")
        monitor = self.monitor
        self.window_ends.append(
            _WindowEnd(step, time.perf_counter(), monitor.data_wait, as_float(lr), monitor.known_epoch())
        )

    def send_windows(
        self, optimizer: Any, step: int, losses: list[tuple[int, float]], last: dict[str, float]
    ) -> None:
        """One `Step` event per loss window since the last check, the last one ending at `step`."""
        monitor = self.monitor
        now = time.perf_counter()
        ends = self.window_ends
        if ends and ends[-1].step == step:
            final = ends.pop()
        else:
            lr = as_float(optimizer.param_groups[0].get("lr"))
            final = _WindowEnd(step, now, monitor.data_wait, lr, monitor.known_epoch())
        begin_step, begin_time, begin_wait = self.window_step, self.window_t0, 0.0
        loss_steps, values = list(map(LOSS_STEP, losses)), list(map(LOSS_VALUE, losses))
        # `losses` are in step order (those read early first, then this check's), but for a
        # handover to another optimizer, which numbers steps from its own count: a window then
        # takes the losses up to the first one past its end (`_window_end`).
        ordered = all(map(operator.le, loss_steps, loss_steps[1:]))
        taken = 0
        for end in [*ends, final]:
            first = taken
            if end is final:
                taken = len(losses)
            elif ordered:
                taken = bisect.bisect_right(loss_steps, end.step, lo=taken)
            else:
                taken = _window_end(loss_steps, taken, end.step)
            window = values[first:taken]
            metrics = {"loss": sum(window) / len(window)} if window else {}
            stats = (
                _window_stats(loss_steps, window, first, min(begin_step + 1, loss_steps[first]))
                if window
                else None
            )
            if end is final:
                metrics.update(last)
            if end.lr is not None:
                metrics["lr"] = end.lr
            steps = max(1, end.step - begin_step)
            monitor.emit(
                Step(
                    step=end.step,
                    epoch=end.epoch,
                    metrics=metrics,
                    duration_s=(end.time - begin_time) / steps,
                    data_wait_s=(end.data_wait - begin_wait) / steps,
                    window=stats,
                )
            )
            begin_step, begin_time, begin_wait = end.step, end.time, end.data_wait
        self.window_ends, self.reads.unsent = [], []
        self.window_t0, self.window_step, monitor.data_wait = final.time, step, 0.0

    @part_never_breaks
    def on_loader_exhausted(self, iterator: Any) -> None:
        monitor = self.monitor
        start = iterator.__dict__.pop("_tm_start_step", None)
        if start is None or monitor.step <= start or monitor.framework_epochs:
            return  # not a training epoch (no optimizer step while it ran), or reported elsewhere
        loss = monitor.take_epoch_loss()
        metrics = {"loss": loss} if loss is not None else {}
        monitor.emit(Epoch(epoch=monitor.epoch, steps=monitor.step - start, metrics=metrics))
        monitor.epoch += 1


def _window_end(steps: list[int], first: int, last_step: int) -> int:
    """The index past the losses from `first` on whose steps are at most `last_step`."""
    end = first
    while end < len(steps) and steps[end] <= last_step:
        end += 1
    return end


def _window_stats(steps: list[int], window: list[float], first: int, first_step: int) -> dict[str, Any]:
    """Every loss of a window (`window`, the losses from index `first` of `steps` on), counted: how
    many, the range of the finite ones and the step of the highest, and how many were not finite;
    what a spike between two points leaves in the curve.

    Computed at the check from the values read there (on the CPU each loss was read as it came;
    on an accelerator the kept aliases were read in the check's one transfer), so an ordinary
    step pays nothing for it: no running sum, minimum or maximum is kept per step, on the host or
    on the device (there each would be a kernel launch a step, costing more CPU time than the
    step's one detached alias, and bought nothing the check cannot compute from the aliases).
    A window of finite losses, the usual one, is measured by `min`, `max` and `index` in C.
    """
    total = sum(window)
    if total - total == 0.0:  # all finite (a NaN or Inf makes the sum NaN or Inf)
        low, high = min(window), max(window)
        high_step, bad = steps[first + window.index(high)], 0
    else:
        low, high, high_step, bad = math.inf, -math.inf, first_step, 0
        for i, value in enumerate(window, start=first):
            if value - value == 0.0:  # finite (NaN and Inf give NaN)
                low = min(low, value)
                if value > high:
                    high, high_step = value, steps[i]
            else:
                bad += 1
    stats: dict[str, Any] = {"first_step": first_step, "n": len(window)}
    if high >= low:
        stats.update(min=low, max=high, max_step=high_step)
    if bad:
        stats["nonfinite"] = bad
    return stats
