"""The loss curve the guard sends: one `Step` per loss window, one `Epoch` per loader pass.

A window ends every `base_every` steps; on the steps in between checks that end
one, the hook only notes the time, the data wait and the learning rate
(`end_window`). The next check reads the window's losses and sends its `Step`
event with the mean loss, timing and data wait (`send_windows`), and the record of
every loss of the window (`Step.window`, `_window_stats`): a spike that the mean
averages away keeps its height and its step there.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from trainmedic.events import Epoch, Step
from trainmedic.torch._reads import as_float
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
        taken = 0  # `losses` are in step order: those read early first, then this check's
        for end in [*ends, final]:
            window: list[float] = []
            while taken < len(losses) and (end is final or losses[taken][0] <= end.step):
                window.append(losses[taken][1])
                taken += 1
            first = taken - len(window)
            metrics = {"loss": sum(window) / len(window)} if window else {}
            stats = (
                _window_stats(losses, first, taken, min(begin_step + 1, losses[first][0])) if window else None
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


def _window_stats(losses: list[tuple[int, float]], first: int, end: int, first_step: int) -> dict[str, Any]:
    """Every loss of a window, counted: how many, the range of the finite ones and the step of the
    highest, and how many were not finite; what a spike between two points leaves in the curve.

    Computed at the check from the values read there (on the CPU each loss was read as it came;
    on an accelerator the kept aliases were read in the check's one transfer), so an ordinary
    step pays nothing for it: no running sum, minimum or maximum is kept per step, on the host or
    on the device (there each would be a kernel launch a step, costing more CPU time than the
    step's one detached alias, and bought nothing the check cannot compute from the aliases).
    """
    low, high, high_step, bad = math.inf, -math.inf, first_step, 0
    for i in range(first, end):
        step, value = losses[i]
        if value - value == 0.0:  # finite (NaN and Inf give NaN)
            low = min(low, value)
            if value > high:
                high, high_step = value, step
        else:
            bad += 1
    stats: dict[str, Any] = {"first_step": first_step, "n": end - first}
    if high >= low:
        stats.update(min=low, max=high, max_step=high_step)
    if bad:
        stats["nonfinite"] = bad
    return stats
