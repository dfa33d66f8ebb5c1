"""The gradient scaler's skipped steps (TRN011): counted in a call the guard already pays for.

`GradScaler.step(optimizer)` calls `unscale_(optimizer)` once an iteration (unless the loop
called it first, before clipping: then that call is the iteration's), and the guard
already wraps `unscale_` (an in-place rescaling the zeroing watch must know about). When the
unscaled gradients hold an inf or a NaN the scaler skips `optimizer.step()` and multiplies
its scale by its backoff factor (0.5). The optimizer's step hooks then never run: a skipped
iteration is one that called `unscale_` and stepped no optimizer.

So the wrapper counts its calls (one integer added and compared per iteration, AMP runs
only) and, every `every` calls (the guard's check interval), reads the scaler: its scale
(one scalar read: no sync on the CPU; on an accelerator one in `every` iterations) and the
optimizer steps taken since the last read (the guard counts them anyway). The reads happen
in the wrapper, not at the checks, because a scaler that skips every step never lets the
optimizer step, and the checks ride on its steps. Once skipped iterations are seen, the
next `unscale_` reads the scaler's own inf flag (one read, after that read only), and when it
is set names the first parameter whose gradient is not finite: one read of each gradient's
finiteness, once a run.
Each read sends a `grad_scaler` observation (`rules/trn/trn011_optimizer_steps_skipped.py`);
the last one is sent at the end of the run.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.trn.trn011_optimizer_steps_skipped import OBSERVATION
from trainmedic.torch._safety import part_never_breaks

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike, OptState
    from trainmedic.torch._names import ParamNames


class ScalerWatch:
    """Counts `unscale_` calls (iterations under a scaler) and reads the scaler every `every`."""

    def __init__(self, monitor: MonitorLike, names: ParamNames) -> None:
        self.monitor = monitor
        self.names = names
        self.unscales = 0  # written by the unscale_ wrapper, once an iteration
        self.read_at = 1  # the wrapper reads the scaler when `unscales` reaches it
        self.probe = False  # name the first parameter with a non-finite gradient at the next unscale_
        self.scaler: Any = None  # weakref to the last scaler read
        self._read_unscales = 0
        self._read_steps = 0
        self._first_param: str | None = None
        self._states: dict[int, OptState] = {}  # the optimizers' step counts, by the record's id

    @part_never_breaks
    def after_unscale(self, scaler: Any, optimizer: Any) -> None:
        """The wrapper's call when a read is due (or a parameter is to be named)."""
        if self.probe:
            self._name_nonfinite(scaler, optimizer)
        if self.unscales >= self.read_at:
            self.read(scaler)

    def read(self, scaler: Any, *, ended: bool = False) -> None:
        """Send the iterations and skips since the last read, with the scale (None: the scaler
        was freed before the end of the run, where the last counts are sent without it).

        Called from `unscale_`, the current iteration has not stepped yet: it is counted at the
        next read. At the end every iteration is complete (`ended`)."""
        monitor = self.monitor
        if scaler is not None:
            self.scaler = weakref.ref(scaler)
        self.read_at = self.unscales + monitor.every
        for state in list(monitor.opts.values()):  # kept: an optimizer freed before the end still counts
            self._states[id(state)] = state
        steps = sum(state.steps for state in self._states.values())
        done = self.unscales if ended else self.unscales - 1
        iterations = done - self._read_unscales
        taken = steps - self._read_steps
        self._read_unscales, self._read_steps = done, steps
        if iterations <= 0:
            return
        scale = getattr(scaler, "_scale", None)
        value = float(scale) if isinstance(scale, torch.Tensor) else None
        skipped = max(0, iterations - taken)
        if skipped and self._first_param is None:
            self.probe = True
        monitor.observe(
            OBSERVATION,
            {
                "iterations": iterations,
                "skipped": skipped,
                "scale": value if value is None or math.isfinite(value) else str(value),
                "init_scale": getattr(scaler, "_init_scale", None),
                "backoff_factor": getattr(scaler, "_backoff_factor", None),
                "growth_interval": getattr(scaler, "_growth_interval", None),
                "first_nonfinite_param": self._first_param,
            },
            once=False,
            step=monitor.step,
        )

    def _name_nonfinite(self, scaler: Any, optimizer: Any) -> None:
        states = getattr(scaler, "_per_optimizer_states", {})
        found = states.get(id(optimizer), {}).get("found_inf_per_device", {})
        self.probe = False  # one try a read: on an accelerator the flag's read is a sync
        if not sum(float(v) for v in found.values()):
            return
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is not None and grad.layout is torch.strided and not bool(grad.isfinite().all()):
                        self._first_param = self.names.name(p)
                        return
        self._first_param = "<none found>"

    @part_never_breaks
    def close(self) -> None:
        """The end of the run: the iterations since the last read."""
        if self.unscales > self._read_unscales:
            self.read(self.scaler() if self.scaler is not None else None, ended=True)
