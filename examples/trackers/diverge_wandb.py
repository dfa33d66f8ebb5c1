"""Linear regression by gradient descent with a learning rate too large: the loss diverges.

Logs to Weights & Biases as a training script does (`wandb.init`, `wandb.log` per step);
run it with WANDB_MODE=offline to keep the run in ./wandb/offline-run-…/.
`python diverge_wandb.py [--lr 0.2] [--steps 60] [--grow-memory]`.

    WANDB_MODE=offline trainmedic run -- python examples/trackers/diverge_wandb.py --lr 0.2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import wandb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--grow-memory", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 8)) * 3.0
    y = x @ rng.normal(size=8) + 0.1 * rng.normal(size=256)
    w = np.zeros(8)
    hoard = []
    run = wandb.init(project="trackers-example", config={"lr": args.lr})
    print(f"wandb run {run.id}", flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    for step in range(args.steps):
        error = x @ w - y
        loss = float(np.mean(error**2))
        wandb.log({"train/loss": loss}, step=step)
        w -= args.lr * 2.0 * x.T @ error / len(y)
        if args.grow_memory:
            hoard.append(np.ones(8 << 20))  # 64 MiB a step, written so it is resident
    run.finish()
    loop, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"final loss {loss:.4g}; loop {loop:.3f} s, {cpu:.3f} s CPU")


if __name__ == "__main__":
    main()
