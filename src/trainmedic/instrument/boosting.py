"""Under `trainmedic run`: guard every XGBoost / LightGBM / CatBoost training call.

Installed when the library is imported. The training entry points are wrapped
in each module that binds them (the library's namespace, its engine module, and
its sklearn module, which imported the function by name), so `xgb.train`,
`XGBClassifier.fit`, `lgb.train`, `LGBMClassifier.fit` and `CatBoost*.fit` all
stream their rounds and have their eval sets checked. The user's call is
otherwise unchanged.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

_ATTR = "__trainmedic_wrapped__"


def _wrap_everywhere(modules: list[str], name: str, wrap: Callable[[Any], Any]) -> None:
    for module_name in modules:
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
        original = getattr(module, name, None)
        if original is not None and not getattr(original, _ATTR, False):
            setattr(module, name, wrap(original))


def install_xgboost(module: ModuleType) -> None:
    from trainmedic.xgboost import guarded_train

    _wrap_everywhere(["xgboost", "xgboost.training", "xgboost.sklearn"], "train", guarded_train)


def install_lightgbm(module: ModuleType) -> None:
    from trainmedic.lightgbm import guarded_train

    modules = ["lightgbm", "lightgbm.engine"]
    if "lightgbm.sklearn" in sys.modules:  # only when scikit-learn is installed
        modules.append("lightgbm.sklearn")
    _wrap_everywhere(modules, "train", guarded_train)


def install_catboost(module: ModuleType) -> None:
    from trainmedic.catboost import install

    install(module)
