"""trainmedic for Lightning: `Guard`, a callback that guards `Trainer.fit`.

    trainer = lightning.Trainer(callbacks=[trainmedic.lightning.Guard()])

It starts the PyTorch guard on the LightningModule and its optimizer (so every
TOR/TRN check applies) and reports what Lightning knows: the epochs and steps
requested, early stopping, each finished epoch with its logged metrics, and
the train/validation phases. Under `trainmedic run` it is added automatically.

`Guard` is built when first used: importing this package imports no framework, so
the installer (`_auto`) can run when `pytorch_lightning` is imported without
pulling in the `lightning` package at that moment.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from trainmedic.errors import install_hint

if TYPE_CHECKING:
    from trainmedic.lightning._guard import Guard

__all__ = ["Guard"]

if importlib.util.find_spec("lightning") is None and importlib.util.find_spec("pytorch_lightning") is None:
    raise ImportError(f"trainmedic.lightning needs Lightning: {install_hint('lightning', 'lightning')}")


def __getattr__(name: str) -> Any:
    if name == "Guard":
        from trainmedic.lightning._guard import Guard

        globals()["Guard"] = Guard
        return Guard
    raise AttributeError(f"module 'trainmedic.lightning' has no attribute {name!r}")
