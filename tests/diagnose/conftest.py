"""Real logs, made once per test session by really training tiny models (CPU, synthetic data).

The four framework processes start together, so the session pays for the slowest
one, not for the sum.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MAKE_LOGS = Path(__file__).with_name("make_logs.py")
FRAMEWORKS = ("keras", "lightning", "hf", "tensorboard")
#: ~90 CPU seconds in all; on a machine shared with other suites the wall time can be several times that.
GENERATION_TIMEOUT_S = 840


@pytest.fixture(scope="session")
def real_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real_logs")
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONWARNINGS": "ignore",
        "TOKENIZERS_PARALLELISM": "false",
    }
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(MAKE_LOGS), name, str(root / name)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        for name in FRAMEWORKS
    }
    failed = []
    try:
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=GENERATION_TIMEOUT_S)
            if proc.returncode != 0:
                failed.append(f"{name} (exit {proc.returncode}):\n{out[-3000:]}")
    finally:  # a timeout or an interrupt must not leave trainers running
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert not failed, "\n".join(failed)
    return root
