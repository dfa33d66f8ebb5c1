"""`trainmedic diff A B`: environment differences (ENV001) and where B's curve leaves A's.

The curves here are formulas (a known point of departure), not benchmark cases.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from trainmedic.cli.main import main
from trainmedic.envinfo import capture_manifest, write_manifest
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import RunStart, Step


@pytest.fixture(scope="module")
def manifest() -> dict:
    return capture_manifest()


def make_run(folder: Path, manifest: dict, losses: np.ndarray, command: list[str]) -> Path:
    write_manifest(folder / "manifest.json", manifest)
    with EventWriter(folder / "events.jsonl") as writer:
        writer.emit(RunStart(command=command, t=0.0))
        for i, loss in enumerate(losses):
            writer.emit(Step(step=i, metrics={"loss": float(loss)}, t=1.0 + i))
    return folder


def curve(seed: int, n: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.2 + 2.0 * np.exp(-np.arange(n) / 40)) * (1 + 0.05 * rng.standard_normal(n))


def test_diff_of_two_runs(tmp_path: Path, manifest: dict, capsys) -> None:
    changed = copy.deepcopy(manifest)
    changed["packages"]["numpy"] = "1.26.4"
    changed["packages"]["zzz-tool"] = "9"
    changed["packages"].pop("click")
    changed["data"] = [
        {"path": "data/train.csv", "kind": "file", "files": 1, "bytes": 10, "sha256": "b" * 64}
    ]
    base = copy.deepcopy(manifest)
    base["data"] = [{"path": "data/train.csv", "kind": "file", "files": 1, "bytes": 10, "sha256": "a" * 64}]
    b_loss = curve(2)
    b_loss[120:] = b_loss[120:] + np.linspace(0.5, 3.0, 80)  # B leaves A at step 120
    a = make_run(tmp_path / "a", base, curve(1), ["python", "train.py", "--lr", "0.1"])
    b = make_run(tmp_path / "b", changed, b_loss, ["python", "train.py", "--lr", "0.3"])
    assert main(["diff", "--format", "json", str(a), str(b)]) == 0  # ENV001 is a warning
    doc = json.loads(capsys.readouterr().out)
    [finding] = doc["findings"]
    assert finding["code"] == "ENV001"
    packages = finding["evidence"]["packages"]
    assert packages["changed"] == {"numpy": [manifest["packages"]["numpy"], "1.26.4"]}
    assert packages["added"] == {"zzz-tool": "9"}
    assert "click" in packages["removed"]
    assert doc["differences"]["data"]["data/train.csv"]["sha256"] == ["a" * 64, "b" * 64]
    assert doc["differences"]["command"][1][-1] == "0.3"
    [row] = doc["metrics"]
    assert row["metric"] == "loss"
    assert 118 <= row["departs_at"] <= 124
    assert row["b_final"] > row["a_final"] + 2


def test_same_environment_and_noisy_twin_curves(tmp_path: Path, manifest: dict, capsys) -> None:
    a = make_run(tmp_path / "a", manifest, curve(1), ["python", "train.py"])
    b = make_run(tmp_path / "b", manifest, curve(2), ["python", "train.py"])
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "environment: identical" in out
    assert "no departure beyond noise" in out
    assert "No findings." in out


def test_training_packages_come_first(manifest: dict) -> None:
    from trainmedic.envinfo import TRAINING_PACKAGES
    from trainmedic.rules.env.env001_env_drift import compare_manifests

    b = copy.deepcopy(manifest)
    for name in ("aaa-first-alphabetically", "torch", "nvidia-cudnn-cu12", "numpy"):
        b["packages"][name] = "0.0.1"
    changed = compare_manifests(manifest, b, TRAINING_PACKAGES)["packages"]
    order = list(changed.get("changed", {})) + list(changed.get("added", {}))
    assert order.index("torch") < order.index("numpy") < order.index("aaa-first-alphabetically")


def test_nan_in_b_is_a_departure(tmp_path: Path, manifest: dict, capsys) -> None:
    b_loss = curve(1)
    b_loss[50:] = math.nan
    a = make_run(tmp_path / "a", manifest, curve(1), ["python", "train.py"])
    b = make_run(tmp_path / "b", manifest, b_loss, ["python", "train.py"])
    assert main(["diff", "--format", "json", str(a), str(b)]) == 0
    [row] = json.loads(capsys.readouterr().out)["metrics"]
    assert row["departs_at"] == 50


def test_diff_bad_input(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli("diff", str(empty), str(tmp_path / "missing"))
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert "empty: neither a manifest.json nor a log" in result.stderr
