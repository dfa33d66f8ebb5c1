"""Linear regression by gradient descent with a learning rate too large: the loss diverges.

Logs to MLflow as a training script does (`mlflow.start_run`, `mlflow.log_metric` per step).
`python diverge_mlflow.py [--lr 0.2] [--steps 60] [--grow-memory]`. The tracking URI
comes from MLFLOW_TRACKING_URI (e.g. sqlite:///mlflow.db or http://127.0.0.1:5000).
`--grow-memory` allocates 64 MiB more at every step (under `trainmedic run --memory-limit`
the OOM killer ends it).

    trainmedic run -- python examples/trackers/diverge_mlflow.py --lr 0.2
"""

from __future__ import annotations

import argparse
import time

import mlflow
import numpy as np


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
    mlflow.set_experiment("trackers-example")
    with mlflow.start_run() as run:
        print(f"mlflow run {run.info.run_id}", flush=True)
        mlflow.log_param("lr", args.lr)
        t0, c0 = time.perf_counter(), time.process_time()
        for step in range(args.steps):
            error = x @ w - y
            loss = float(np.mean(error**2))
            mlflow.log_metric("train_loss", loss, step=step)
            w -= args.lr * 2.0 * x.T @ error / len(y)
            if args.grow_memory:
                hoard.append(np.ones(8 << 20))  # 64 MiB a step, written so it is resident
    loop, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"final loss {loss:.4g}; loop {loop:.3f} s, {cpu:.3f} s CPU")


if __name__ == "__main__":
    main()
