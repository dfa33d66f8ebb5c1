"""Shared test helpers: run the real `trainmedic` command, locate the catalogue."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_FINDINGS = REPO.parent / "shared" / "FINDINGS.md"
VENDORED_FINDINGS = REPO / "docs" / "FINDINGS.md"


def trainmedic_cmd() -> list[str]:
    """The installed console script next to this interpreter (falls back to `-m`)."""
    script = Path(sys.executable).with_name("trainmedic")
    return [str(script)] if script.exists() else [sys.executable, "-m", "trainmedic"]


def run_cli(*args: str, timeout: float = 120, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run(
        [*trainmedic_cmd(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def cli():
    return run_cli
