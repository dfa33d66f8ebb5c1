"""A tiny real trainer for the report tests: numpy linear regression with SGD, three modes.

    python trainer.py healthy   # converges, exits 0
    python trainer.py nan       # a warm-up that never stops: the loss falls, then overflows to inf/NaN
    python trainer.py oom       # evaluation keeps every batch's activations: grows until OOM-killed

It announces its phases, steps and epochs through trainmedic's event channel,
as a framework integration would (a numpy loop has no framework hooks to do it).
Step times and data waits are measured, not invented.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from trainmedic.events import Epoch, PhaseEnd, PhaseStart, Step, TrainingPlan
from trainmedic.instrument.channel import emit

EPOCHS, STEPS, BATCH = 3, 25, 64
LEARNING_RATE = {"healthy": 0.05, "nan": 0.01, "oom": 0.05}
WARMUP_GROWTH = {"healthy": 1.0, "nan": 1.12, "oom": 1.0}  # lr multiplier per step


def batches(x: np.ndarray, y: np.ndarray, rng: np.random.Generator):
    while True:
        idx = rng.integers(0, len(x), BATCH)
        time.sleep(0.004)  # a loader that takes a little time: real, measured data wait
        yield x[idx], y[idx]


def main(mode: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 16)).astype(np.float32)
    y = x @ rng.normal(size=16).astype(np.float32) + 0.1 * rng.normal(size=4096).astype(np.float32)
    w = np.zeros(16, dtype=np.float32)
    lr = LEARNING_RATE[mode]
    emit(TrainingPlan(framework="numpy", epochs=EPOCHS, steps_per_epoch=STEPS, batch_size=BATCH))
    loader = batches(x, y, rng)
    step = 0
    kept: list[np.ndarray] = []
    for epoch in range(EPOCHS):
        emit(PhaseStart(phase="train", epoch=epoch, step=step))
        for _ in range(STEPS):
            t0 = time.perf_counter()
            xb, yb = next(loader)
            t1 = time.perf_counter()
            with np.errstate(all="ignore"):
                err = xb @ w - yb
                loss = float(np.mean(err**2))
                w = w - lr * WARMUP_GROWTH[mode] ** step * (2 / BATCH) * (xb.T @ err)
            time.sleep(0.012)  # the "forward/backward" of a bigger model
            duration = time.perf_counter() - t0
            emit(
                Step(step=step, epoch=epoch, metrics={"loss": loss}, duration_s=duration, data_wait_s=t1 - t0)
            )
            print(f"epoch {epoch} step {step} loss {loss:.4g}", flush=True)
            step += 1
        emit(PhaseEnd(phase="train", epoch=epoch, step=step))
        emit(PhaseStart(phase="eval", epoch=epoch, step=step))
        with np.errstate(all="ignore"):
            val_loss = float(np.mean((x[:512] @ w - y[:512]) ** 2))
        if mode == "oom" and epoch == 1:
            print("evaluating with every batch's activations kept ...", flush=True)
            while True:  # the bug: activations of every eval batch kept in a list
                kept.append(np.ones(8 * 2**20 // 8))  # 8 MiB, touched
                time.sleep(0.01)
        emit(PhaseEnd(phase="eval", epoch=epoch, step=step))
        train_loss = loss
        emit(Epoch(epoch=epoch, steps=STEPS, metrics={"loss": train_loss, "val_loss": val_loss}))
        print(f"epoch {epoch} loss {train_loss:.4g} val_loss {val_loss:.4g}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
