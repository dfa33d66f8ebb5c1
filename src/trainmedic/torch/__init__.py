"""trainmedic for PyTorch: a guard for your own training loop, and the tiny-batch overfit test.

    import trainmedic.torch as tm
    with tm.guard(model, optimizer) as g:
        for x, y in loader:
            ...
    print(g.findings())

Under `trainmedic run` the same checks are installed automatically when the
script imports torch; `guard()` then joins them (and adds what you pass it).
"""

from __future__ import annotations

# torch first: under `run`, its import hook installs the monitor from these very modules.
import torch as _torch  # noqa: F401
from trainmedic.torch._guard import Guard, guard
from trainmedic.torch._monitor import NonFiniteLossError
from trainmedic.torch._overfit import OverfitResult, overfit_batch

__all__ = ["Guard", "NonFiniteLossError", "OverfitResult", "guard", "overfit_batch"]
