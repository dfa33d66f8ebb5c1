"""The optimizers the monitor knows, the one whose steps number the run, and loops without one.

A loop that updates its parameters itself (no `torch.optim` optimizer holds the
loss's parameters) is told at its first loss: a `ParameterUpdates` stands in for
the optimizer, and each backward() is a step. An optimizer that steps after all
(one made before the guard) takes over.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.torch._interface import OptState
from trainmedic.torch._manual import ParameterUpdates, held_by_any, trained_parameters

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike
    from trainmedic.torch._zeroing import GradZeroWatch


class Optimizers:
    """One `OptState` per optimizer, found by id on every step (a dict hit, no weakref made)."""

    def __init__(self, monitor: MonitorLike, zero_watches: list[GradZeroWatch]) -> None:
        self.monitor = monitor
        self.zero_watches = zero_watches  # the monitor's list: its hooks feed every watch in it
        self.opts: weakref.WeakKeyDictionary[Any, OptState] = weakref.WeakKeyDictionary()
        self.by_id: dict[int, OptState] = {}  # the per-step lookup: a dict hit, no weakref made
        # Every optimizer made while installed: a loss whose parameters none holds is a manual loop.
        self.made: weakref.WeakSet[Any] = weakref.WeakSet()

    def set_primary(self, optimizer: Any) -> None:
        inner = getattr(optimizer, "optimizer", None)  # Lightning/accelerate wrappers
        target = inner if isinstance(inner, torch.optim.Optimizer) else optimizer
        self.monitor.primary = weakref.ref(target)
        self.made.add(target)

    def new_state(self, optimizer: Any) -> OptState:
        state = self.opts.get(optimizer)
        if state is None:
            state = OptState(ref=weakref.ref(optimizer), name=type(optimizer).__name__)
            self.opts[optimizer] = state
            if self.monitor.primary is None:
                self.monitor.primary = weakref.ref(optimizer)
        self.by_id[id(optimizer)] = state
        return state

    def decide_manual(self, loss: Any, idle: bool = False) -> None:
        """At the first loss: does an optimizer hold its parameters, or does the loop update them?

        `idle`: an optimizer holds them but never stepped in IDLE_OPTIMIZER_BACKWARDS backward calls.
        """
        params = trained_parameters(loss)
        if not params:
            return  # no parameter behind this backward (yet): decide at the next one
        monitor = self.monitor
        monitor.manual_decided = True
        if self.opts or (not idle and held_by_any(list(self.made), params)):
            return
        monitor.manual = ParameterUpdates(params)
        self.new_state(monitor.manual)

    def drop_manual(self) -> None:
        """An optimizer stepped after all (one made before the guard): its hooks number the steps."""
        monitor = self.monitor
        updates, monitor.manual = monitor.manual, None
        state = self.by_id.pop(id(updates), None)
        self.opts.pop(updates, None)
        if state is not None and state.zero_watch in self.zero_watches:
            self.zero_watches.remove(state.zero_watch)
        if monitor.primary is not None and monitor.primary() is updates:
            monitor.primary = None
