"""The sampled step's measurement, placed for optimizers that run forward and backward in `step`.

On a sampled step the gradients are measured once they are final, just before the update.
For most loops that is the optimizer's pre-step hook; Lightning and LBFGS call
`step(closure)`, and the closure computes the gradients inside `step`: it is wrapped, so
they are measured after it has run. Sampled steps only (every step with
`on_nonfinite="stop"`): an ordinary step never gets here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainmedic.torch._safety import part_never_breaks

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike


class ClosureSteps:
    """Calls the monitor's measurement before the update: at once, or after the step's closure."""

    def __init__(self, monitor: MonitorLike, measure: Callable[[Any], None]) -> None:
        self.monitor = monitor
        self.measure = measure  # the monitor's `_before_update`: gradients final, update next

    def sampled_step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        """What the optimizer's pre-step hook returns on a sampled step (new arguments, or None)."""
        closure = kwargs.get("closure") if kwargs else None
        positional = closure is None and len(args) > 1 and callable(args[1])
        if positional:
            closure = args[1]
        if closure is None:
            self.measure(optimizer)
            return None

        # Lightning and LBFGS run forward and backward inside step(closure): measure after it.
        def measured_closure() -> Any:
            result = closure()
            self.before_update(optimizer)
            return result

        if positional:
            return (args[0], measured_closure, *args[2:]), kwargs
        return args, {**kwargs, "closure": measured_closure}

    @part_never_breaks
    def before_update(self, optimizer: Any) -> None:
        """Gradients of this step are final: the optimizer is about to apply them."""
        self.measure(optimizer)
