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

Cost: two attribute reads and a comparison per backward; no tensor op. A
gradient clipped or unscaled in place (`clip_grad_norm_`, `GradScaler.unscale_`)
also counts as touched: a loop that clips but never zeroes is not reported, a
loop that zeroes never is.
"""

from __future__ import annotations

from typing import Any


class GradZeroWatch:
    """Follows one parameter's `.grad` across backward calls (see the module docstring)."""

    __slots__ = ("_grad", "_param", "_version", "backwards", "touched")

    def __init__(self, param: Any) -> None:
        self._param = param
        self._grad: Any = None
        self._version = -1
        self.backwards = 0  # backward calls since the last `take`
        self.touched = True  # the first span has nothing to compare with

    def before_backward(self) -> None:
        grad = self._param.grad
        if grad is None or grad is not self._grad or grad._version != self._version:
            self.touched = True

    def after_backward(self) -> None:
        grad = self._param.grad
        self._grad = grad
        self._version = grad._version if grad is not None else -1
        self.backwards += 1

    def take(self) -> bool:
        """True when, since the last call, backward ran and nothing else touched the gradient."""
        untouched = self.backwards > 0 and not self.touched and self._grad is not None
        self.backwards, self.touched = 0, False
        return untouched
