"""The real `trainmedic run` supervising PyTorch jobs: findings land in the run folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from ..conftest import trainmedic_cmd
from ..helpers import past_torch_exit_abort
from .conftest import EXAMPLES, SINGLE_THREAD

PY = sys.executable
JOBS: dict[str, tuple[list[str], dict[str, str]]] = {
    "torchrun": (
        [
            PY,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "sampler_epoch_not_set.py",
        ],
        {},
    ),
    "healthy": ([PY, "healthy.py"], {}),
    "stop": ([PY, "nonfinite_loss.py"], {"TRAINMEDIC_ON_NONFINITE": "stop"}),
}


@pytest.fixture(scope="module")
def supervised(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess[str], dict]]:
    tmp = tmp_path_factory.mktemp("trainmedic-run")

    def one(name: str) -> tuple[subprocess.CompletedProcess[str], dict]:
        argv, extra = JOBS[name]
        out = tmp / name
        env = {
            **os.environ,
            **SINGLE_THREAD,
            **extra,
            "NO_COLOR": "1",
            "TRAINMEDIC_STATE_DIR": str(tmp / "state"),
        }

        def attempt() -> subprocess.CompletedProcess[str]:
            shutil.rmtree(out, ignore_errors=True)
            return subprocess.run(
                [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), "--", *argv],
                capture_output=True,
                text=True,
                timeout=280,
                env=env,
                cwd=EXAMPLES,
                stdin=subprocess.DEVNULL,
                check=False,
            )

        result = past_torch_exit_abort(attempt)
        found = (
            json.loads((out / "findings.json").read_text())["findings"]
            if (out / "findings.json").exists()
            else []
        )
        return result, {f["code"]: f for f in found}

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(JOBS, pool.map(one, JOBS), strict=True))


@pytest.mark.slow
def test_torchrun_under_trainmedic_run_reports_tor005_with_ranks(supervised) -> None:
    result, found = supervised["torchrun"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert found["TOR005"]["evidence"]["ranks"] == [0, 1]


@pytest.mark.slow
def test_healthy_script_under_trainmedic_run_has_no_warning(supervised) -> None:
    result, found = supervised["healthy"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert [f for f in found.values() if f["severity"] in ("warning", "error")] == []
    assert "epoch 4" in result.stdout  # the trainer's own output passes through


@pytest.mark.slow
def test_on_nonfinite_stop_under_trainmedic_run(supervised) -> None:
    result, found = supervised["stop"]
    assert result.returncode == 1  # `run` exits with the trainer's status
    assert "NonFiniteLossError" in result.stderr
    assert 137 in found["TRN001"]["evidence"]["batch_indices"]
