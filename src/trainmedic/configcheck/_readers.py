"""Read a configuration file into plain data: JSON or YAML, chosen by suffix and content.

Anything that cannot be read becomes a `UsageError` naming the file and what was
expected, so `trainmedic check config` prints one line and exits 2.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainmedic.errors import UsageError

_YAML_SUFFIXES = (".yaml", ".yml")


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The file's top-level mapping; raises UsageError for a missing, unreadable or non-mapping file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{file}: no such file (expected a DeepSpeed/HF/Accelerate config)") from None
    except IsADirectoryError:
        raise UsageError(f"{file}: is a directory (expected a config file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    data = _parse(file, text)
    if not isinstance(data, dict):
        raise UsageError(
            f"{file}: expected a mapping of settings at the top level, got {type(data).__name__}"
        )
    return data


def _parse(file: Path, text: str) -> Any:
    suffix = file.suffix.lower()
    if suffix in _YAML_SUFFIXES:
        return _yaml(file, text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if suffix == ".json":
            raise UsageError(
                f"{file}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from None
    return _yaml(file, text)  # no telling suffix: YAML is a superset of most config text


def _yaml(file: Path, text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise UsageError(f"{file}: reading YAML needs PyYAML: pip install pyyaml") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise UsageError(f"{file}: not valid YAML or JSON{at}") from None
