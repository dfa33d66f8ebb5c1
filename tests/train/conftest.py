"""Shared fixtures for the training-loop tests: one torch thread (2 shared cores), tiny data."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Two threads on two busy cores spin against each other; one is faster and deterministic."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a child trainer: one thread, and this worktree's trainmedic."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **extra}
    env.pop("TRAINMEDIC_EVENTS", None)
    return env
