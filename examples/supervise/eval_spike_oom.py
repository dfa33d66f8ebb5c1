"""A training loop whose epoch-end evaluation needs more memory every epoch (pure numpy).

Training holds a steady working set; the evaluation at the end of each epoch
keeps every prediction of a growing validation set in memory (like a callback
that computes mAP over the whole set). Under `trainmedic run --memory-limit 400M`
the OOM killer ends it during the evaluation of epoch 3:

    trainmedic run --memory-limit 400M -- python examples/supervise/eval_spike_oom.py
"""

import argparse
import sys
import time

import numpy as np

MB = 1 << 20


def train_epoch(weights: np.ndarray, steps: int, step_s: float) -> float:
    loss = 0.0
    for _ in range(steps):
        batch = weights[: 256 * 1024] * 0.999  # a little real work per step
        loss = float(batch.mean())
        time.sleep(step_s)
    return loss


def evaluate(epoch: int, eval_mb: int) -> float:
    """Collect predictions chunk by chunk: memory grows through the evaluation."""
    predictions = []
    for _ in range(epoch * eval_mb // 20):
        predictions.append(np.full(20 * MB // 8, 1.0))  # np.full touches every page
        time.sleep(0.04)
    return float(sum(p[0] for p in predictions))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--step-s", type=float, default=0.1)
    parser.add_argument("--train-mb", type=int, default=80)
    parser.add_argument("--eval-mb", type=int, default=130, help="evaluation memory per epoch number")
    args = parser.parse_args()
    # each line as printed: the OOM killer's SIGKILL would lose what a block buffer holds
    sys.stdout.reconfigure(line_buffering=True)
    weights = np.full(args.train_mb * MB // 8, 0.5)
    for epoch in range(1, args.epochs + 1):
        print(f"Epoch {epoch}/{args.epochs}")
        loss = train_epoch(weights, args.steps, args.step_s)
        print(f"Evaluating epoch {epoch} ...")
        score = evaluate(epoch, args.eval_mb)
        print(f"epoch {epoch}: loss {loss:.4f} val_score {score:.1f}")
    print("done")


if __name__ == "__main__":
    main()
