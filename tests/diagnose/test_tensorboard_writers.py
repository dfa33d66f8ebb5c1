"""`trainmedic diagnose` on event files written by the TensorBoard writers of Flax, CLU,
tensorboardX and PyTorch (new-style tensor scalars): NaN loss (TRN001), overfitting (TRN004),
and a healthy run stays quiet.

Flax's `SummaryWriter.scalar` and CLU's `SummaryWriter.write_scalars` call `tf.summary.scalar`:
TF2 tensor scalars (plugin "scalars"), not the `simple_value` of tensorboardX / torch's default.
The curves are made by write_tb.py; the writers and the files are the libraries' own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainmedic.cli.main import main

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WRITE_TB = Path(__file__).with_name("write_tb.py")
NEEDS = {"flax": "flax", "clu": "clu", "tensorboardx": "tensorboardX", "torch-new-style": "torch"}
AVAILABLE = [w for w, module in NEEDS.items() if importlib.util.find_spec(module) is not None]
#: the tag names each writer's layout gives the training and held-out loss
TAGS = {
    "flax": ("train_loss", "test_loss"),
    "clu": ("train/loss", "eval/loss"),
    "tensorboardx": ("loss/train", "loss/val"),
    "torch-new-style": ("train_loss", "val_loss"),
}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every available writer's three scenarios, written by processes started together."""
    root = tmp_path_factory.mktemp("tb_writers")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    procs = {
        writer: subprocess.Popen(
            [sys.executable, str(WRITE_TB), writer, str(root / writer)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        for writer in AVAILABLE
    }
    for writer, proc in procs.items():
        out, _ = proc.communicate(timeout=540)
        assert proc.returncode == 0, f"{writer}: {out[-3000:]}"
    return root


def diagnose(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict]:
    code = main(["diagnose", "--format", "json", str(path)])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("writer", AVAILABLE)
def test_nan_loss_is_found_at_its_step(writer: str, logs: Path, capsys) -> None:
    code, doc = diagnose(capsys, logs / writer / "nan")
    assert code == 1
    nan = [f for f in doc["findings"] if f["code"] == "TRN001"]
    assert len(nan) == 1, doc["findings"]
    assert nan[0]["evidence"]["metric"] == TAGS[writer][0]
    assert nan[0]["evidence"]["step"] == 60
    assert nan[0]["evidence"]["last_finite_step"] == 59
    assert doc["sources"][0]["points"] == 200  # both tags, every step: no reservoir sampling


@pytest.mark.parametrize("writer", AVAILABLE)
def test_overfitting_names_the_held_out_curve_and_the_turn(writer: str, logs: Path, capsys) -> None:
    _, doc = diagnose(capsys, logs / writer / "overfit")
    over = [f for f in doc["findings"] if f["code"] == "TRN004"]
    assert len(over) == 1, doc["findings"]
    train_tag, held_out_tag = TAGS[writer]
    assert over[0]["evidence"]["metric"] == held_out_tag
    assert over[0]["evidence"]["train_metric"] == train_tag
    assert 25 <= over[0]["evidence"]["turn_step"] <= 35  # the held-out minimum is at step 30


@pytest.mark.parametrize("writer", AVAILABLE)
def test_healthy_run_is_quiet(writer: str, logs: Path, capsys) -> None:
    code, doc = diagnose(capsys, logs / writer / "healthy")
    assert (code, doc["findings"]) == (0, [])


def test_flax_and_clu_are_really_tested_here() -> None:
    """The point of this file: Flax and CLU are installed (the `jax` extra), so their writers ran."""
    assert {"flax", "clu"} <= set(AVAILABLE)
