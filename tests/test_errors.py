"""One exception root: `except trainmedic.TrainmedicError` catches whatever trainmedic raises.

Each class also keeps the built-in base its callers may already catch, and the
source is walked so that a new exception class cannot be added outside the root.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import trainmedic
from trainmedic.errors import TrainmedicError

SRC = Path(__file__).resolve().parents[1] / "src" / "trainmedic"

# module, class, the built-in base callers may catch (besides TrainmedicError)
PUBLIC = [
    ("trainmedic.errors", "UsageError", Exception),
    ("trainmedic.train.config", "ConfigError", ValueError),
    ("trainmedic.contract", "ContractViolation", Exception),
    ("trainmedic.checkpoint", "CheckpointError", Exception),
    ("trainmedic.checkpoint", "CorruptCheckpointError", Exception),
    ("trainmedic.keras", "SequenceLenHugeError", ValueError),
    ("trainmedic.torch", "NonFiniteLossError", RuntimeError),
    ("trainmedic.supervise.supervisor", "CommandNotFound", Exception),
    ("trainmedic.report.bounded", "ReportSkipped", Exception),
]
# raised and caught inside one module as control flow; never reach a caller
PRIVATE = {"_ArgumentsRejected", "_NotCopied"}


@pytest.mark.parametrize(("module", "name", "builtin"), PUBLIC, ids=[p[1] for p in PUBLIC])
def test_public_exception_derives_from_the_root_and_keeps_its_builtin_base(
    module: str, name: str, builtin: type[BaseException]
) -> None:
    if module in {"trainmedic.torch", "trainmedic.checkpoint"}:
        pytest.importorskip("torch")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, TrainmedicError)
    assert issubclass(cls, builtin)


def test_root_is_exported_from_the_package() -> None:
    assert trainmedic.TrainmedicError is TrainmedicError
    assert issubclass(TrainmedicError, Exception)


def _is_exception_base(base: ast.expr) -> bool:
    name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
    return name.endswith(("Error", "Exception", "Violation", "NotFound"))


def test_every_exception_class_in_the_source_is_listed() -> None:
    """A new exception class must join PUBLIC (and so the root) or be a private control-flow one."""
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(_is_exception_base(b) for b in node.bases):
                found.add(node.name)
    assert found - {"TrainmedicError"} == {name for _, name, _ in PUBLIC} | PRIVATE
