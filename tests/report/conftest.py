"""Fixtures of the report tests: one headless Chromium and three real runs per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .browser import CHROMIUM, Browser
from .runs import make_run


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/ensure-chromium (make test does)")
    chromium = Browser()
    yield chromium
    chromium.close()


@pytest.fixture(scope="session")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run folders (with report.html) of a healthy run, a NaN run and an OOM-killed run."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "healthy": make_run(root / "healthy", "healthy").parent,
        "nan": make_run(root / "nan", "nan").parent,
        "oom": make_run(root / "oom", "oom", oom=True).parent,
    }
