"""Under `trainmedic run`: every Lightning Trainer gets a `Guard` (the post-import hook's call).

Installed when `lightning` or `pytorch_lightning` is imported. The Guard class is imported
only when a Trainer is built, as a script that adds it itself would: importing it here would
import the `lightning` package (and the PyTorch guard) whenever `pytorch_lightning` is.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from trainmedic.instrument import hooks


def install(module: ModuleType) -> None:
    """Add a `Guard` to every Trainer of `module`; a Trainer that has one keeps its own."""
    trainer_cls = getattr(getattr(module, "pytorch", module), "Trainer", None)
    if trainer_cls is not None:
        hooks.run_after(trainer_cls, "__init__", _add_guard)


def _add_guard(trainer: Any) -> None:
    from trainmedic.lightning._guard import Guard

    if not any(isinstance(c, Guard) for c in trainer.callbacks):
        trainer.callbacks.append(Guard())
