"""The public API is what `__all__` says: every public module declares it, every name in it
exists, and every name the README and docs/ use from a public module is in it.

Modules whose framework is not installed here are skipped, not failed.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# public module -> the framework it needs (None: always importable)
PUBLIC: dict[str, str | None] = {
    "trainmedic": None,
    "trainmedic.errors": None,
    "trainmedic.findings": None,
    "trainmedic.contract": None,
    "trainmedic.data": None,
    "trainmedic.configcheck": None,
    "trainmedic.diagnose": None,
    "trainmedic.report.html": None,
    "trainmedic.sklearn": "sklearn",
    "trainmedic.keras": None,
    "trainmedic.ray": None,
    "trainmedic.torch": "torch",
    "trainmedic.train": "torch",
    "trainmedic.checkpoint": "torch",
    "trainmedic.lightning": "lightning",
    "trainmedic.hf": "transformers",
    "trainmedic.jax": "jax",
    "trainmedic.xgboost": "xgboost",
    "trainmedic.lightgbm": "lightgbm",
    "trainmedic.catboost": "catboost",
}
# `import trainmedic.torch as tm` in the docs: the aliases they use
ALIASES = {"tm": "trainmedic.torch", "tmd": "trainmedic.data"}


def _load(name: str) -> ModuleType:
    framework = PUBLIC[name]
    if framework is not None:
        pytest.importorskip(framework)
    return importlib.import_module(name)


def documented_names() -> dict[str, set[str]]:
    """Public module -> the names the docs take from it (`trainmedic.hf.Guard`, `from ... import`)."""
    text = "\n".join(path.read_text() for path in DOCS)
    found: dict[str, set[str]] = {name: set() for name in PUBLIC}
    for match in re.finditer(r"\btrainmedic((?:\.[A-Za-z_]\w*)+)", text):
        parts = ["trainmedic", *match.group(1).strip(".").split(".")]
        for cut in range(len(parts) - 1, 1, -1):  # the longest public module, then one name
            module = ".".join(parts[:cut])
            if module in PUBLIC and parts[cut] not in {"py", "json", "sarif"}:
                found[module].add(parts[cut])
                break
    for match in re.finditer(r"from (trainmedic(?:\.\w+)*) import ([\w, ]+)", text):
        if match.group(1) in PUBLIC:
            found[match.group(1)].update(n.strip() for n in match.group(2).split(",") if n.strip())
    for alias, module in ALIASES.items():
        found[module].update(re.findall(rf"\b{alias}\.([A-Za-z_]\w*)", text))
    return found


DOCUMENTED = documented_names()


def _is_submodule(module: ModuleType, name: str) -> bool:
    if not hasattr(module, "__path__"):  # a plain module has no submodules
        return False
    return importlib.util.find_spec(f"{module.__name__}.{name}") is not None


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_module_declares_all_and_every_name_exists(name: str) -> None:
    module = _load(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_documented_names_are_in_all(name: str) -> None:
    module = _load(name)
    documented = {n for n in DOCUMENTED[name] if not _is_submodule(module, n)}
    absent = sorted(documented - set(module.__all__))
    assert not absent, f"README/docs use {name}.{absent} but {name}.__all__ lacks them"


def test_the_docs_use_the_public_modules() -> None:
    """The scan itself works: a few names the docs certainly use are found."""
    assert {"Guard", "LoopingSequence"} <= DOCUMENTED["trainmedic.keras"]
    assert {"guard", "overfit_batch"} <= DOCUMENTED["trainmedic.torch"]
    assert "fit" in DOCUMENTED["trainmedic.train"]
