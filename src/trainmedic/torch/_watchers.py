"""The watcher protocol: how another package adds its watches to the PyTorch guard without the
guard importing it (`trainmedic.llm`'s fine-tuning watches are the one user).

A watch is added in two steps, each with what the guard knows at that moment:
1. `on_model`: a `ModelWatch` the package registers here, once per process, where it is
   installed (`trainmedic.llm.install`, hooked on `transformers.modeling_utils` by the boot
   module and by `trainmedic.hf`). The guard calls every registered one with each root model
   it meets (the outermost module of a forward pass with grad enabled, `_forward`) and the
   monitor, once per model and forward watch; a watch decides from the model whether it
   applies. It runs inside the forward watch's own guard: one that raises costs that watch
   only (`forward_watch`), never the user's forward.
2. What the watch then needs per step it takes from the monitor (`_interface.MonitorLike`): it
   appends a `Watcher` to `monitor.watchers` (`on_check` on each checked step, after the step's
   reads and before the update; `on_close` once at the end), and observes through
   `monitor.observe`.

The registry is a plain list: registering is rare (one call per package), reading it happens
only when a new root model is met.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

#: Called with a root model the guard meets and the monitor it reports to.
ModelWatch = Callable[[Any, "MonitorLike"], None]

_model_watches: list[ModelWatch] = []


def on_model(watch: ModelWatch) -> None:
    """Call `watch(model, monitor)` for each root model the guard meets from now on (once per
    process: a second registration of the same watch is ignored)."""
    if watch not in _model_watches:
        _model_watches.append(watch)


def model_met(model: Any, monitor: MonitorLike) -> None:
    """The guard met `model`, a root model new to its forward watch: tell every registered watch."""
    for watch in tuple(_model_watches):
        watch(model, monitor)
