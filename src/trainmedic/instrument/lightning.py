"""Auto-instrumentation of Lightning under `trainmedic run`: every Trainer gets a `Guard`."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any


def install(module: ModuleType) -> None:
    trainer_cls = getattr(getattr(module, "pytorch", module), "Trainer", None)
    if trainer_cls is None or getattr(trainer_cls.__init__, "_trainmedic", False):
        return
    original = trainer_cls.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        from trainmedic.lightning import Guard

        if not any(isinstance(c, Guard) for c in self.callbacks):
            self.callbacks.append(Guard())

    __init__._trainmedic = True  # type: ignore[attr-defined]
    trainer_cls.__init__ = __init__
