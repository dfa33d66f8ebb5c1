"""Auto-instrumentation of PyTorch under `trainmedic run` (called when `torch` is imported).

Installs the same monitor as `trainmedic.torch.guard()`, fed by PyTorch's global
hooks, sending its events to the run's events file. Settings come from the
environment so they reach every torchrun worker:

- TRAINMEDIC_TORCH_EVERY: how often host-syncing checks run (unset: every 10 steps,
  widened on CPU-only training to keep the checks under 0.5 % of the step time);
- TRAINMEDIC_ON_NONFINITE: `warn` (default) or `stop` (raise before a NaN/Inf update);
- TRAINMEDIC_SAVE_CHECKS: `0` turns off the checks of what the script saves (`_saves`).
"""

from __future__ import annotations

import atexit
import os
from types import ModuleType

from trainmedic.instrument import channel


def install(module: ModuleType) -> None:
    from trainmedic.torch import _patches
    from trainmedic.torch._monitor import Monitor

    if _patches.active() is not None:
        return
    every = os.environ.get("TRAINMEDIC_TORCH_EVERY", "")
    monitor = Monitor(
        channel.emit,
        every=int(every) if every.isdigit() and int(every) > 0 else None,
        on_nonfinite=os.environ.get("TRAINMEDIC_ON_NONFINITE", "warn"),
        mode="auto",
    )
    _patches.install(monitor)
    atexit.register(monitor.close)
