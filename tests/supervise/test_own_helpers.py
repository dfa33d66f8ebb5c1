"""The supervisor's own helper processes are not the run's leftovers.

`trainmedic run` asks git about the worktree in a thread while the trainer runs. A trainer
that ends before git answers must not have that git ended and reported as an orphan of
the run (RUN010): the supervisor waits for its own helpers before it ends the tree's
leftovers. A slow `git` (a wrapper that sleeps, then runs the real one) makes the timing
certain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import trainmedic_cmd

REAL_GIT = shutil.which("git")


@pytest.mark.skipif(REAL_GIT is None, reason="git is not installed")
def test_a_trainer_that_ends_before_git_answers_has_no_orphan_and_keeps_its_git_state(
    tmp_path: Path,
) -> None:
    slow = tmp_path / "bin"
    slow.mkdir()
    (slow / "git").write_text(f'#!/bin/sh\nsleep 1.5\nexec "{REAL_GIT}" "$@"\n')
    (slow / "git").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run([REAL_GIT, "init", "-q", str(work)], check=True)
    out = tmp_path / "run"
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), sys.executable, "-c", "pass"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
        env={
            **os.environ,
            "PATH": f"{slow}{os.pathsep}{os.environ['PATH']}",
            "NO_COLOR": "1",
            "TRAINMEDIC_STATE_DIR": str(tmp_path / "state"),
        },
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    slugs = {f["slug"] for f in json.loads((out / "findings.json").read_text())["findings"]}
    assert "orphan-processes" not in slugs
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["git"]["root"] == str(work.resolve())
