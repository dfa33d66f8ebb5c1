"""trainmedic for Keras: guards and a looping sequence for runs without `trainmedic run`.

- `Guard()`: a callback with the checks `trainmedic run` adds by itself
  (sequence length, epochs run vs requested, input exhaustion); prints each
  finding with its fix when fit ends and keeps them in `guard.findings`.
- `LoopingSequence(seq, multiple=k)`: the fix for `__len__ = sys.maxsize`.
- `Deferred(callback, every=k)`: run a heavy epoch-end evaluation every k
  epochs or once after training.
- `check_sequence(seq, batch_size=..., n_samples=...)`: the checks before training.

The callback and sequence classes subclass the Keras line in use (Keras 3, or
tf-keras under TF_USE_LEGACY_KERAS=1), so Keras is imported only when one of
them is first used.
"""

from __future__ import annotations

from typing import Any

from trainmedic.keras._check import check_sequence
from trainmedic.keras._errors import SequenceLenHugeError

__all__ = ["Deferred", "Guard", "LoopingSequence", "SequenceLenHugeError", "check_sequence"]

_LAZY = {"Guard", "LoopingSequence", "Deferred"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from trainmedic.keras import _classes
        from trainmedic.keras._line import keras_module

        value = _classes.build(keras_module())[name]
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainmedic.keras' has no attribute {name!r}")
