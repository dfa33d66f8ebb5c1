"""Under `trainmedic run`: every Lightning Trainer gets a `Guard` (the post-import hook's call).

Installed when `lightning` or `pytorch_lightning` is imported. The Guard class is imported
only when a Trainer is built, as a script that adds it itself would: importing it here would
import the `lightning` package (and the PyTorch guard) whenever `pytorch_lightning` is.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any


def install(module: ModuleType) -> None:
    """Add a `Guard` to every Trainer of `module`; a Trainer that has one keeps its own."""
    trainer_cls = getattr(getattr(module, "pytorch", module), "Trainer", None)
    if trainer_cls is None or getattr(trainer_cls.__init__, "_trainmedic", False):
        return
    original = trainer_cls.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        from trainmedic.lightning._guard import Guard

        if not any(isinstance(c, Guard) for c in self.callbacks):
            self.callbacks.append(Guard())

    __init__._trainmedic = True  # type: ignore[attr-defined]
    trainer_cls.__init__ = __init__
