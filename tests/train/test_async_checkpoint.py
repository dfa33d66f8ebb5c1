"""Background checkpoint saves: the training thread waits only for a copy; kills lose nothing old."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import torch
from tests.train.conftest import subprocess_env
from torch import nn
from trainmedic import checkpoint as ckpt
from trainmedic.atomicfile import TMP_SUFFIX
from trainmedic.train import fit
from trainmedic.train.checkpoint import KILL_IN_WRITE_ENV


def test_training_may_change_the_model_while_its_checkpoint_is_written(tmp_path: Path) -> None:
    """The staged copy is taken before save_async returns: later in-place updates are not in it."""
    model = nn.Linear(256, 256)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    manager = ckpt.CheckpointManager(tmp_path, keep_last=2)
    manager.save_async({"model": model.state_dict()}, step=1, epoch=0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)  # what the next optimizer step does, maybe mid-write
    manager.wait()
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 1
    for name, value in expected.items():
        assert torch.equal(loaded.state["model"][name], value), name


def test_staging_reuses_its_buffers_and_keeps_tied_tensors_tied() -> None:
    weight = torch.randn(8, 4)
    state = {"model": {"embed": weight, "head": weight.detach()}, "step": 3, "lr": [0.1, 0.01]}
    stager = ckpt.Stager()
    first = stager.stage(state)
    assert first["model"]["embed"] is first["model"]["head"]  # staged once, still shared
    assert first["model"]["embed"].data_ptr() != weight.data_ptr()  # a copy, not the live tensor
    assert first["lr"] == [0.1, 0.01]
    assert first["lr"] is not state["lr"]
    weight.add_(1.0)
    second = stager.stage(state)
    assert second["model"]["embed"].data_ptr() == first["model"]["embed"].data_ptr()  # no new memory
    assert torch.equal(second["model"]["embed"], weight)


def test_a_background_save_that_fails_raises_in_the_training_thread(tmp_path: Path) -> None:
    """A real write failure on the writer thread (file-size rlimit) surfaces at wait()."""
    result = subprocess.run(
        [sys.executable, "-c", DISK_FULL_ASYNC, str(tmp_path)],
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


DISK_FULL_ASYNC = textwrap.dedent(
    """
    import resource, signal, sys, torch
    from trainmedic import checkpoint as ckpt
    manager = ckpt.CheckpointManager(sys.argv[1])
    manager.save_async({"w": torch.zeros(1000)}, step=1, epoch=0)
    manager.wait()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
    manager.save_async({"w": torch.ones(100000)}, step=2, epoch=0)  # returns: the write is later
    print("RETURNED", flush=True)
    try:
        manager.wait()
    except ckpt.CheckpointError as exc:
        print("ERROR", exc)
    """
)

# Saves step 1 and waits for it; then starts a ~100 MB background save of step 2 and
# says so. The parent (or the kill hook, halfway through the payload) SIGKILLs it.
# Step 2 goes to disk in writes of at most 1 MiB, 0.1 s apart (over 10 s): the parent's
# kill lands mid-write even when the parent is descheduled for seconds, as on a busy
# machine. Same bytes through the same writer: a broken checkpoint still fails the test.
KILLED_MID_SAVE = textwrap.dedent(
    """
    import sys, time, torch
    from trainmedic import checkpoint as ckpt
    from trainmedic.train.checkpoint._writing import HashingWriter
    manager = ckpt.CheckpointManager(sys.argv[1])
    manager.save_async({"w": torch.zeros(1000), "step": 1}, step=1, epoch=0)
    manager.wait()
    write = HashingWriter.write
    def slow_write(self, data):
        view = memoryview(data)
        for start in range(0, len(view), 2**20):
            write(self, view[start : start + 2**20])
            time.sleep(0.1)
        return len(view)
    HashingWriter.write = slow_write
    big = {"w": torch.ones(25 * 2**20), "step": 2}
    manager.save_async(big, step=2, epoch=0)
    print("STAGED", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("killer", ["parent", "in-write"])
def test_sigkill_during_a_background_save_leaves_the_previous_checkpoint(tmp_path: Path, killer: str) -> None:
    """A real process, really SIGKILLed while its writer thread is inside the payload.

    `parent`: killed from outside once the writer thread has created its temporary file
    (the child writes its 100 MB slowly, over 10 s: far longer than the kill takes). `in-write`:
    the checkpoint writer's own kill hook fires halfway through the payload's bytes, on the
    writer thread: exactly placed.
    """
    extra = {KILL_IN_WRITE_ENV: "2"} if killer == "in-write" else {}
    with subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_SAVE, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(**extra),
    ) as child:
        assert child.stdout is not None
        line = child.stdout.readline()
        if killer == "parent":
            assert line.strip() == "STAGED"
            _wait_for_file(tmp_path, ".step-00000002.pt.")  # the writer thread has begun
            child.send_signal(signal.SIGKILL)
        _, stderr = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "step-00000002.json" not in names  # the interrupted checkpoint never counts
    assert any(n.startswith(".step-00000002.pt.") for n in names), names  # it was mid-write
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 1
    assert loaded.skipped == ()
    assert torch.equal(loaded.state["w"], torch.zeros(1000))
    ckpt.CheckpointManager(tmp_path)  # the next run's manager clears the half-written file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001.json", "step-00000001.pt"]


def _wait_for_file(directory: Path, prefix: str) -> None:
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(prefix) for p in directory.iterdir()):
        assert time.monotonic() < deadline, f"no {prefix}* appeared"
        time.sleep(0.001)


def _data() -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(48, 6, generator=generator)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _run(
    checkpoint_dir: Path | None, *, max_steps: int | None = None, asynchronous: bool = True
) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.1), nn.Linear(16, 2))
    fit(
        model,
        DataLoader(_data(), batch_size=8, shuffle=True),
        optimizer=torch.optim.AdamW(model.parameters(), lr=1e-2),
        loss_fn=F.cross_entropy,
        epochs=3,
        max_steps=max_steps,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=2,
        checkpoint_async=asynchronous,
    )
    return model


@pytest.mark.parametrize("asynchronous", [True, False])
def test_resume_from_a_background_save_is_bit_exact(tmp_path: Path, asynchronous: bool) -> None:
    """Stop mid-epoch after async saves, resume in a new fit: the same weights and history."""
    one_run = _run(tmp_path / "one")
    _run(tmp_path / "two", max_steps=9, asynchronous=asynchronous)  # 6 batches an epoch: mid-epoch 2
    resumed = _run(tmp_path / "two", asynchronous=asynchronous)
    for a, b in zip(one_run.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    one, two = ckpt.load_latest(tmp_path / "one"), ckpt.load_latest(tmp_path / "two")
    assert one is not None
    assert two is not None
    assert one.info.step == two.info.step == 18
    assert one.state["history"] == two.state["history"]


def test_an_error_in_training_still_lets_the_save_in_flight_land(tmp_path: Path) -> None:
    """fit re-raises the trainer's error only once the background save has finished."""
    import threading

    calls = [0]

    def failing_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == 4:
            raise RuntimeError("the user's loss broke")
        return F.cross_entropy(outputs, targets)

    torch.manual_seed(0)
    model = nn.Linear(6, 2)
    with pytest.raises(RuntimeError, match="the user's loss broke"):
        fit(
            model,
            DataLoader(_data(), batch_size=8),
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=failing_loss,
            epochs=1,
            checkpoint_dir=tmp_path,
            checkpoint_every=3,
        )
    assert not [t for t in threading.enumerate() if t.name.startswith("trainmedic-checkpoint")]
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 3


EXITS_RIGHT_AFTER = textwrap.dedent(
    """
    import sys, torch
    from trainmedic import checkpoint as ckpt
    manager = ckpt.CheckpointManager(sys.argv[1])
    manager.save_async({"w": torch.arange(4 * 2**20, dtype=torch.float32)}, step=7, epoch=0)
    print("LEAVING", manager.pending, flush=True)
    """
)


def test_the_interpreter_waits_for_a_background_save_at_exit(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", EXITS_RIGHT_AFTER, str(tmp_path)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LEAVING")
    loaded = ckpt.load_latest(tmp_path)
    assert loaded is not None
    assert loaded.info.step == 7
    assert torch.equal(loaded.state["w"], torch.arange(4 * 2**20, dtype=torch.float32))


def test_loader_workers_are_forked_only_once_the_save_in_flight_has_landed(tmp_path: Path) -> None:
    """A fork while the writer thread holds a lock can hang the child: fit waits first.

    Each worker, as it starts, lists the checkpoint folder: the epoch-end checkpoint
    saved just before the next epoch's workers are forked is complete, no temp file.
    """
    seen = tmp_path / "seen.txt"
    checkpoints = tmp_path / "ckpt"

    def record(_worker: int) -> None:
        names = sorted(p.name for p in checkpoints.iterdir()) if checkpoints.exists() else []
        with seen.open("a") as out:
            out.write(" ".join(names) + "\n")

    torch.manual_seed(0)
    model = nn.Linear(6, 2)
    fit(
        model,
        DataLoader(_data(), batch_size=8, num_workers=1, worker_init_fn=record),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=F.cross_entropy,
        epochs=2,
        checkpoint_dir=checkpoints,
        checkpoint_fsync=False,
        extra_state={"blob": torch.ones(8 * 2**20)},  # 32 MB: the write outlasts the fork
    )
    starts = seen.read_text().splitlines()
    assert len(starts) == 2  # one worker per epoch
    assert "step-00000006.json" in starts[1].split()  # epoch 0's checkpoint had landed
    assert not [n for line in starts for n in line.split() if n.endswith(TMP_SUFFIX)]
