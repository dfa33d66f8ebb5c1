"""Auto-instrumentation of Hugging Face under `trainmedic run`: every Trainer gets a `Guard`.

transformers imports its Trainer lazily, so the patch waits for
`transformers.trainer` itself to be imported.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from trainmedic.instrument import hooks


def install(module: ModuleType) -> None:
    hooks.when_imported("transformers.trainer", _patch_trainer)


def _patch_trainer(module: ModuleType) -> None:
    trainer_cls = getattr(module, "Trainer", None)
    if trainer_cls is None or getattr(trainer_cls.__init__, "_trainmedic", False):
        return
    original = trainer_cls.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        from trainmedic.hf import Guard

        callbacks = self.callback_handler.callbacks
        if not any(isinstance(c, Guard) for c in callbacks):
            stopping = any(type(c).__name__ == "EarlyStoppingCallback" for c in callbacks)
            self.add_callback(Guard(early_stopping=stopping))

    __init__._trainmedic = True  # type: ignore[attr-defined]
    trainer_cls.__init__ = __init__
