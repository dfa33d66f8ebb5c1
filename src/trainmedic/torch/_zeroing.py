"""Were a parameter's gradients zeroed between two checks? Told by who touched them.

`backward()` adds into `.grad`; every way of zeroing (`zero_grad()`, `p.grad = None`,
`p.grad.zero_()`) happens outside a backward call. So the watch notes the probe
parameter's gradient tensor and its version when each backward returns, and
compares them when the next one starts: a different tensor, or a version moved
in between, means the user's code touched the gradient. Gradients that only
backward touched between two checks were never zeroed.

Counting what happens *outside* backward, not how far the version moved inside
it, keeps the test true whatever backward itself does to `.grad`: the reducer of
`DistributedDataParallel` copies the averaged gradient back into it (one more
version per backward), and in a GAN the generator's backward runs through the
discriminator, adding to its gradients before the discriminator's `zero_grad()`.

Gradients clipped or unscaled in place by PyTorch's own functions
(`clip_grad_norm_`, `clip_grad_value_`, `GradScaler.unscale_`) are rescaled, not
zeroed: the hooks around them note the gradient again after them (`rescaled`).
Any other in-place write counts as touched: a loop that rewrites its gradients
itself and never zeroes them is not reported; a loop that zeroes them never is.

Cost: two attribute reads and a comparison per backward while watching; no tensor
op. The monitor watches the last `ZERO_WATCH_STEPS` steps before each check only
(`rebase` starts a span): a loop that never zeroes shows it in any span.
"""

from __future__ import annotations

from typing import Any


class GradZeroWatch:
    """Follows one parameter's `.grad` across backward calls (see the module docstring)."""

    __slots__ = ("_before", "_grad", "_param", "_version", "backwards", "touched")

    def __init__(self, param: Any) -> None:
        self._param = param
        self._grad: Any = None
        self._version = -1
        self._before: tuple[Any, int] = (None, -1)  # `.grad` and its version as a backward starts
        self.backwards = 0  # backward calls that reached the parameter since the last `take`
        self.touched = True  # the first span has nothing to compare with

    def before_backward(self) -> None:
        grad = self._param.grad
        if grad is None or grad is not self._grad or grad._version != self._version:
            self.touched = True
        self._before = (grad, grad._version if grad is not None else -1)

    def after_backward(self) -> None:
        grad = self._param.grad
        version = grad._version if grad is not None else -1
        self._grad, self._version = grad, version
        # A backward that left `.grad` as it was did not reach this parameter (another model's
        # loss: a later model in a notebook or a script that trains several): it says nothing.
        if grad is not None and (grad is not self._before[0] or version != self._before[1]):
            self.backwards += 1

    def rebase(self) -> None:
        """A watched span starts: what `.grad` is now is the reference, whatever came before."""
        grad = self._param.grad
        self._grad = grad
        self._version = grad._version if grad is not None else -1
        self.touched = False

    def rescaled(self) -> None:
        """PyTorch rescaled the gradient in place (clipping, unscaling): not the loop zeroing it."""
        grad = self._param.grad
        if grad is not None and grad is self._grad:
            self._version = grad._version

    def take(self) -> bool:
        """True when, since the last call, backward ran and nothing else touched the gradient."""
        untouched = self.backwards > 0 and not self.touched and self._grad is not None
        self.backwards, self.touched = 0, False
        return untouched
