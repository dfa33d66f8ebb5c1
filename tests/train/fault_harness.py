"""Fault-injection harness: train, SIGKILL the trainer at planned points, resume, compare.

Run as a script (`python fault_harness.py WORKDIR PLAN_JSON`). torch is imported once
here; every training attempt is a forked child (a real process, really killed by
SIGKILL), so twenty kills cost twenty forks, not twenty interpreter starts.

A plan entry is [where, n]:
- ["loss", n]: the child kills itself in the n-th call of the loss function (mid-step);
- ["write", n]: in the n-th write of checkpoint bytes (payload or manifest, half written);
- ["replace", n]: right after the n-th rename of a checkpoint file (payload renamed,
  manifest not yet written, or the reverse).
Prints one JSON line: kills that landed, and the first tensor that differs (or null).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)  # forked children: no OpenMP pool inherited from the parent
# The first optimizer imports torch._dynamo (seconds): pay it once here, not in every child.
torch.optim.AdamW([torch.zeros(1, requires_grad=True)])

import torch.nn.functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from torch import nn  # noqa: E402
from trainmedic import checkpoint  # noqa: E402
from trainmedic.atomicfile import TMP_SUFFIX  # noqa: E402
from trainmedic.train import fit, param_groups, warmup_cosine  # noqa: E402
from trainmedic.train.checkpoint._writing import HashingWriter  # noqa: E402

EPOCHS, BATCH, SAMPLES, ACCUM = 6, 8, 120, 2  # 15 micro-batches an epoch: the last window is partial


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def train(directory: str, kill: list[object] | None) -> None:
    torch.manual_seed(0)
    x = torch.randn(SAMPLES, 16)
    y = (x[:, :4].sum(1) > 0).long()
    train_loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[:40], y[:40]), batch_size=20)
    model = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 2))
    optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=3e-3)
    steps = EPOCHS * 8
    scheduler = warmup_cosine(optimizer, warmup_steps=5, total_steps=steps)
    calls = {"loss": 0, "write": 0, "replace": 0}

    def count(where: str) -> None:
        calls[where] += 1
        if kill is not None and kill[0] == where and calls[where] == kill[1]:
            die()

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        count("loss")
        return F.cross_entropy(out, target)

    if kill is not None and kill[0] == "write":
        original_write = HashingWriter.write

        def write(self: HashingWriter, data: bytes) -> int:
            original_write(self, data[: len(data) // 2])  # half of it reaches the disk, then the kill
            count("write")
            return original_write(self, data[len(data) // 2 :])

        HashingWriter.write = write  # type: ignore[method-assign]
    if kill is not None and kill[0] == "replace":
        original_replace = Path.replace  # every rename of the checkpoint writes

        def replace(self: Path, target: Path) -> Path:
            done = original_replace(self, target)
            count("replace")
            return done

        Path.replace = replace  # type: ignore[method-assign]
    fit(
        model,
        train_loader,
        optimizer=optimizer,
        loss_fn=loss_fn,
        epochs=EPOCHS,
        val_loader=val_loader,
        scheduler=scheduler,
        grad_accum_steps=ACCUM,
        max_grad_norm=1.0,
        precision="bf16",
        checkpoint_dir=directory,
        checkpoint_every=1,
        keep_last=2,
        log_every=1,
    )


def attempt(directory: str, kill: list[object] | None) -> int | None:
    """Train in a forked child; returns the signal that ended it (None: it finished)."""
    pid = os.fork()
    if pid == 0:
        try:
            train(directory, kill)
        except BaseException:
            import traceback

            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status)
    if os.WEXITSTATUS(status) != 0:
        raise SystemExit(f"trainer failed with exit status {os.WEXITSTATUS(status)}")
    return None


def first_difference(a: object, b: object, path: str = "") -> str | None:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        return None if same else path
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path} (keys)"
        for key in a:
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return f"{path} (length)"
        for i, (x, z) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, z, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else path


def main() -> None:
    workdir, plan = sys.argv[1], json.loads(sys.argv[2])
    reference, interrupted = os.path.join(workdir, "reference"), os.path.join(workdir, "interrupted")
    assert attempt(reference, None) is None
    signals = [attempt(interrupted, kill) for kill in plan]
    assert attempt(interrupted, None) is None
    ref, got = checkpoint.load_latest(reference), checkpoint.load_latest(interrupted)
    assert ref is not None
    assert got is not None
    result = {
        "kills": sum(1 for s in signals if s == signal.SIGKILL),
        "signals": signals,
        "steps": [ref.info.step, got.info.step],
        "model": first_difference(ref.state["model"], got.state["model"], "model"),
        "optimizer": first_difference(ref.state["optimizer"], got.state["optimizer"], "optimizer"),
        "history": first_difference(ref.state["history"], got.state["history"], "history"),
        "leftovers": sorted(n for n in os.listdir(interrupted) if n.endswith(TMP_SUFFIX)),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
