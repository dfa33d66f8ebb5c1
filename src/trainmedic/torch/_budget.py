"""The sampling rate of the guard's checks, kept to a share of the training time.

The reads and the gradient norms happen together on checked steps, every `every`
steps, and keep to a budget: after `WARMUP_CHECKS` checks at the base rate, when
the tensors are on the CPU (where a check's time is all its own, not a wait for
queued device work), the checks are timed against the training time between them
and `every` is widened (in multiples of the base, up to `MAX_EVERY_FACTOR` times
it) until they cost at most `CHECK_BUDGET` of the step time. A `sampling`
observation says when and why. An `every` given explicitly is kept as it is.

Both are measured in the CPU time of the training thread (`time.thread_time`),
not wall time: the budget is a share of the work the process does. Wall time
would count the time the process waits while something else runs on its CPU as
training time, and allow more checks the busier the machine is.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

DEFAULT_EVERY = 10  # steps between sampled checks, unless widened to keep to the budget
CHECK_BUDGET = 0.005  # sampled checks may cost this share of the training time
WARMUP_CHECKS = 10  # checks at the base rate before the rate adapts: early failures at full rate
# The rate never drops below one check per 10 x the base every. Widening only ever happens where
# a check is long next to a step (a tiny model on a CPU): there 100 steps are a fraction of a
# second, every loss is still kept and read (a NaN is reported at its own step), and the curve
# keeps its point per base window, so what the bound limits is only how late a finding comes.
MAX_EVERY_FACTOR = 10
clock = time.thread_time  # see the module's docstring


class CheckBudget:
    """What the checks cost and the training time between them, smoothed; it sets `monitor.every`."""

    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor
        self.check_cost = 0.0  # smoothed seconds per sampled check (host-only reads)
        self.step_time = 0.0  # smoothed training seconds per step between checks
        self.host_read = False  # the last check read CPU tensors only
        self.check_end = clock()
        self.full_step = 0  # the step of the last full check (gradient norms)
        self.freed_s = 0.0  # time the last check spent freeing kept losses (not its own cost)

    def keep_to_budget(self, checks: int, step: int, cost: float, step_time: float) -> None:
        """Widen (or narrow back) `every` so that full checks cost at most CHECK_BUDGET."""
        monitor = self.monitor
        smooth = 0.2
        if checks <= 2:  # the first checks pay one-off costs (names, first-check observations)
            return
        self.check_cost = cost if not self.check_cost else (1 - smooth) * self.check_cost + smooth * cost
        self.step_time = (
            step_time if not self.step_time else (1 - smooth) * self.step_time + smooth * step_time
        )
        if checks < WARMUP_CHECKS or self.step_time <= 0:
            return
        base = monitor.base_every
        needed = self.check_cost / (CHECK_BUDGET * self.step_time)  # steps per check
        every = min(base * MAX_EVERY_FACTOR, max(base, base * math.ceil(needed / base)))
        # Widen at once; narrow only when clearly over-budgeted, so noise does not flap it.
        if every == monitor.every or (every < monitor.every and needed > monitor.every / 2):
            return
        monitor.every = every
        monitor.observe(
            "sampling",
            {
                "every": every,
                "base_every": base,
                "from_step": step,
                "check_us": round(self.check_cost * 1e6, 1),
                "step_us": round(self.step_time * 1e6, 1),
                "budget": CHECK_BUDGET,
            },
            once=False,
            step=step,
        )
