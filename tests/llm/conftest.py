"""What the fine-tuning watches remember per process, forgotten before each test: a serving
render or a trainer's truncation counts left by an earlier test in the same worker would be
another run's (in a user's process they are the script's own)."""

from __future__ import annotations

import pytest

from trainmedic.llm import sft, templates


@pytest.fixture(autouse=True)
def fresh_process_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "_renders", [])
    monkeypatch.setattr(sft, "_waiting", [])
