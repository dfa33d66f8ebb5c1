"""Which Keras line the public classes subclass: legacy tf-keras or Keras 3.

`tf.keras` is tf-keras when TF_USE_LEGACY_KERAS is set, else Keras 3; the
classes here follow the same switch, so a `Guard()` fits the model the user's
`tf.keras` builds.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from trainmedic.errors import install_hint

LEGACY_ENV = "TF_USE_LEGACY_KERAS"


def wants_legacy() -> bool:
    if os.environ.get(LEGACY_ENV, "").strip().lower() in {"1", "true", "yes"}:
        return True
    # A script that imports tf_keras directly (and not Keras 3) uses the legacy line.
    return "tf_keras" in sys.modules and "keras" not in sys.modules


def keras_module() -> ModuleType:
    """The Keras package in use; a clear message when none is installed."""
    name = "tf_keras" if wants_legacy() else "keras"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        package = "tf-keras" if name == "tf_keras" else "keras"
        raise ImportError(
            f"trainmedic.keras needs {package}: "
            + install_hint(package if name == "tf_keras" else "tensorflow-cpu keras", "keras")
        ) from exc
