"""What the guard sends: its events, each tagged with the process's rank, to every sink.

`observe` sends a `GuardObservation` (a fact the rules read) once per check unless asked
for each: the checks that ran are remembered in the monitor's `reported`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainmedic.events import Event, GuardObservation
from trainmedic.instrument import channel

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike


class Outbox:
    """The monitor's `emit` and `observe`."""

    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor

    def emit(self, event: Event) -> None:
        if event.rank is None:
            event.rank = channel.current_rank()
        for sink in self.monitor.sinks:
            sink(event)

    def observe(
        self, check: str, data: dict[str, Any], *, once: bool = True, step: int | None = None
    ) -> None:
        monitor = self.monitor
        if once and check in monitor.reported:
            return
        monitor.reported.add(check)
        self.emit(GuardObservation(check=check, data=data, step=step, epoch=monitor.known_epoch()))
