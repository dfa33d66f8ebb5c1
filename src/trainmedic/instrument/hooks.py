"""Post-import hooks: run a callback right after a module is first imported.

This is how trainmedic patches a framework only when the user's code imports
it: a finder at the front of `sys.meta_path` watches for the module's name,
lets the normal machinery load it, then calls the callback with the module. A
script that never imports TensorFlow pays one dictionary lookup per import.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

Callback = Callable[[ModuleType], None]
_callbacks: dict[str, list[Callback]] = {}
_finder: _PostImportFinder | None = None


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _callbacks or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = _find_with_others(fullname, path, target, self)
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _CallbackLoader(spec.loader)
        return spec


class _CallbackLoader(importlib.abc.Loader):
    """Delegates to the real loader, then fires the callbacks for the module."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        result: ModuleType | None = self._loader.create_module(spec)
        return result

    def exec_module(self, module: ModuleType) -> None:
        # The module must look as if the real loader loaded it (pkgutil, importlib.resources).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _fire(module.__name__, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def _find_with_others(
    fullname: str,
    path: Sequence[str] | None,
    target: ModuleType | None,
    skip: importlib.abc.MetaPathFinder,
) -> importlib.machinery.ModuleSpec | None:
    for finder in sys.meta_path:
        if finder is skip:
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        spec: importlib.machinery.ModuleSpec | None = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _fire(name: str, module: ModuleType) -> None:
    for callback in _callbacks.pop(name, []):
        try:
            callback(module)
        except Exception as exc:  # a broken hook must never break the user's import
            sys.stderr.write(f"trainmedic: instrumentation of {name} disabled: {exc!r}\n")


def when_imported(name: str, callback: Callback) -> None:
    """Call `callback(module)` once `name` is imported (at once if it already is).

    A module still executing (this call comes from an import it makes) is not imported yet:
    when this finder loads it (other callbacks wait for it), the callback joins them and runs
    once the module's code has run; fired now, it would find the module half made.
    """
    global _finder
    module = sys.modules.get(name)
    initializing = getattr(getattr(module, "__spec__", None), "_initializing", False)
    if module is not None and initializing and name in _callbacks:
        _callbacks[name].append(callback)
        return
    if module is not None:
        _callbacks.setdefault(name, []).append(callback)
        _fire(name, module)
        return
    _callbacks.setdefault(name, []).append(callback)
    if _finder is None:
        _finder = _PostImportFinder()
        sys.meta_path.insert(0, _finder)


def run_after(cls: type, method: str, after: Callable[[Any], None]) -> None:
    """Make `cls.method` call `after(self)` once the original has run, at most once per class.

    The integrations add their guard to a framework object right after it is built (a
    Trainer's `__init__`, a kernel's `init_shell`): one wrapper, marked so that a second
    install (both `lightning` and `pytorch_lightning` imported) does not wrap it again.
    """
    original = getattr(cls, method)
    if getattr(original, "_trainmedic", False):
        return

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        after(self)
        return result

    wrapper._trainmedic = True  # type: ignore[attr-defined]
    setattr(cls, method, wrapper)
