"""trainmedic.checkpoint on real files: atomic writes, damage detected, fallback, safe loading."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torch
from tests.train.conftest import subprocess_env
from trainmedic import checkpoint as ckpt


def _state(value: float, size: int = 64) -> dict[str, object]:
    return {"model": {"w": torch.full((size,), value)}, "step": int(value)}


def _save_three(directory: Path) -> ckpt.CheckpointManager:
    manager = ckpt.CheckpointManager(directory, keep_last=5, best_metric="val_loss")
    for step, loss in ((1, 0.9), (2, 0.5), (3, 0.7)):
        manager.save(_state(step), step=step, epoch=0, metrics={"val_loss": loss})
    return manager


def test_roundtrip_keeps_manifest_and_best(tmp_path: Path) -> None:
    _save_three(tmp_path)
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 3
    assert loaded.skipped == ()
    assert torch.equal(loaded.state["model"]["w"], torch.full((64,), 3.0))
    best, info = ckpt.load(tmp_path / "best.json")
    assert info.step == 2  # the lowest val_loss, not the newest
    assert best["step"] == 2


def test_keep_last_rotates_old_steps_but_not_best(tmp_path: Path) -> None:
    manager = ckpt.CheckpointManager(tmp_path, keep_last=2, best_metric="val_loss")
    for step in range(1, 6):
        manager.save(_state(step), step=step, epoch=0, metrics={"val_loss": 1.0 / step if step != 1 else 0.1})
    manager.wait()  # rotated-out files are removed in the background
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "best.json",
        "best.pt",
        "step-00000004.json",
        "step-00000004.pt",
        "step-00000005.json",
        "step-00000005.pt",
    ]
    assert ckpt.verify(tmp_path / "best.json").step == 1  # still intact after its step file was rotated away


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "manifest"])
def test_damaged_newest_is_reported_and_previous_used(tmp_path: Path, damage: str) -> None:
    _save_three(tmp_path)
    newest = tmp_path / "step-00000003.pt"
    data = bytearray(newest.read_bytes())
    if damage == "truncate":
        newest.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "bitflip":
        data[len(data) // 2] ^= 0x10
        newest.write_bytes(bytes(data))
    else:
        (tmp_path / "step-00000003.json").write_text('{"name": "step-00000003", "st')
    with pytest.raises(ckpt.CorruptCheckpointError):
        ckpt.verify(newest)
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 2
    assert [Path(p).name for p, _ in loaded.skipped] == ["step-00000003.json"]
    reason = loaded.skipped[0][1]
    expected = {"truncate": "truncated", "bitflip": "checksum mismatch", "manifest": "unreadable manifest"}
    assert expected[damage] in reason


def test_payload_without_manifest_never_counts(tmp_path: Path) -> None:
    _save_three(tmp_path)
    (tmp_path / "step-00000004.pt").write_bytes(b"half a checkpoint")  # killed before its manifest
    (tmp_path / ".step-00000005.pt.123.tmp").write_bytes(b"killed mid-write")
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 3
    ckpt.CheckpointManager(tmp_path)  # the next run's manager clears the leftovers
    assert not (tmp_path / "step-00000004.pt").exists()
    assert not (tmp_path / ".step-00000005.pt.123.tmp").exists()


class _Exploit:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch PWNED",))


def test_loading_runs_no_pickled_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint with a valid manifest but a malicious pickle is refused, and nothing runs."""
    monkeypatch.chdir(tmp_path)
    info = ckpt.save({"model": _Exploit()}, tmp_path, "step-00000001", step=1, epoch=0)
    with pytest.raises(ckpt.CorruptCheckpointError, match="cannot be loaded safely"):
        ckpt.load(info.manifest)
    assert not (tmp_path / "PWNED").exists()


DISK_FULL = textwrap.dedent(
    """
    import resource, signal, sys, torch
    from trainmedic import checkpoint as ckpt
    manager = ckpt.CheckpointManager(sys.argv[1])
    manager.save({"w": torch.zeros(1000)}, step=1, epoch=0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
    try:
        manager.save({"w": torch.ones(100000)}, step=2, epoch=0)
    except ckpt.CheckpointError as exc:
        print("ERROR", exc)
    """
)


def test_disk_full_during_write_leaves_previous_intact(tmp_path: Path) -> None:
    """A real write failure (file-size limit: the kernel refuses bytes past 20 kB)."""
    result = subprocess.run(
        [sys.executable, "-c", DISK_FULL, str(tmp_path)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR could not write checkpoint" in result.stdout
    assert "File too large" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001.json", "step-00000001.pt"]
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 1
    assert torch.equal(loaded.state["w"], torch.zeros(1000))


def test_rng_state_roundtrip_through_safe_load(tmp_path: Path) -> None:
    import random

    import numpy as np

    state = ckpt.rng_state()
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    ckpt.save({"rng": state}, tmp_path, "step-00000001", step=1, epoch=0)
    loaded, _ = ckpt.load(tmp_path / "step-00000001.json")
    ckpt.restore_rng_state(loaded["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


def test_bad_manager_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep_last"):
        ckpt.CheckpointManager(tmp_path, keep_last=0)
    with pytest.raises(ValueError, match="best_mode"):
        ckpt.CheckpointManager(tmp_path, best_mode="lowest")
